"""Jepsen's Kafka histories (jepsen-io/jepsen, jepsen/src/jepsen/tests/kafka.clj) read into the
kafkaverify history format (version 2), streaming, one line at a time.

The reader understands the EDN that Jepsen's kafka histories use, not EDN in general: maps,
vectors, lists, sets, keywords, integers, floats, strings, nil/true/false, symbols and tagged
literals (`#jepsen.history.Op{...}` reads as its map): no general-purpose parser, whose speed
here was about 1,000 lines/s. `parse_line_py` tokenises a line with one regular expression and
builds values by recursive descent (the reference); traces/_edn.c does the same in C (what
`parse_line` uses when built; tests hold the two to the same values and refusals). docs/history-format.md ("Jepsen's Kafka histories") says how each op
maps; in short:

- A client op (integer :process) is an invoke and its completion (paired by process, as
  Jepsen pairs them). Nemesis ops, `:crash` and `:debug-topic-partitions` carry no client
  evidence and are skipped.
- A key is a partition: an integer k is partition k of topic `jepsen`, a keyword :x is
  partition 0 of topic `x`, a vector [topic partition] is itself.
- `:assign` / `:subscribe` [k ...] is one assignment (one event per key, one mono_ns);
  `:seek-to-beginning? true` marks the process's later polls as final reads.
- `:send` / `:poll` / `:txn` ops hold micro-ops. An op of f :txn, or of more than one micro-op,
  is a transaction: its sends and polls carry its `txn`, and a `txn_commit` with the op's
  outcome follows them. A transaction's sends whose outcome is unknown (no offset) are `info`;
  those of a failed transaction are `info` too (the records may be in the log, hidden by the
  abort). A lone send is `ok` (with its offset), `info` or `fail` as the op.
- `:rebalance-log` [{:keys [k ...]} ...] on a completion: each entry is an assignment
  (subscribe events) at the op's invoke.
- Times: Jepsen's :time t (ns) becomes mono_ns 4t; a transaction (invoked at t0, completed at
  t1) has its operations from 4t0+1 to 4t1+1 and its commit from 4t0+2 to 4t1+2 (when its
  client began to commit is not recorded: any time after the transaction began). Every
  real-time order and tie of Jepsen's ops is kept.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Iterator

from traces.history import FORMAT, ISOLATION_LEVELS, TXN_VERSION, History, HistoryError, Op

try:
    from traces import _edn       # the compiled twin of parse_line_py (setup.py builds it)
except ImportError:               # not built: the regular-expression reader alone
    _edn = None

# The last alternative catches any other character (a stray '#', an unterminated '"', a ';'):
# an error, never skipped.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|#\{|#[A-Za-z][A-Za-z0-9_.\-/]*|[\[\](){}]|[^\s,\[\](){}"#;]+|[^\s,]')
_CLOSE = {"]", ")", "}"}
_CLOSER = {"[": "]", "(": ")", "#{": "}"}
TOPIC = "jepsen"
SCALE = 4


class EdnError(ValueError):
    pass


def parse_line(line: str) -> Any:
    """One EDN value from one line (the subset Jepsen's kafka histories use): the compiled
    reader (traces/_edn.c) when built, else the regular-expression one (`parse_line_py`)."""
    if _edn is None:
        return parse_line_py(line)
    try:
        return _edn.parse_line(line)
    except _edn.Fallback:
        return parse_line_py(line)
    except (ValueError, TypeError) as e:
        raise EdnError(str(e)) from None


def parse_line_py(line: str) -> Any:
    """The reference reader: one regular expression to tokens, then recursive descent."""
    toks = _TOKEN.findall(line)
    if not toks:
        raise EdnError("no value")
    try:
        v, i = _value(toks, 0)
    except RecursionError:
        raise EdnError("nested too deeply") from None
    if i != len(toks):
        raise EdnError(f"unexpected {toks[i]!r} after the value")
    return v


def _value(toks: list[str], i: int) -> tuple[Any, int]:
    try:
        t = toks[i]
    except IndexError:
        raise EdnError("unexpected end of line (an unclosed bracket)") from None
    c = t[0]
    if c == ":":
        return t, i + 1
    if c == "[" or c == "(" or t == "#{":
        out = []
        i += 1
        while True:
            try:
                u = toks[i]
            except IndexError:
                raise EdnError("unexpected end of line (an unclosed bracket)") from None
            if u in _CLOSE:
                if u != _CLOSER[t]:
                    raise EdnError(f"{t!r} closed by {u!r}")
                return out, i + 1
            v, i = _value(toks, i)
            out.append(v)
    if c == "{":
        out = {}
        i += 1
        while True:
            try:
                u = toks[i]
            except IndexError:
                raise EdnError("unexpected end of line (an unclosed map)") from None
            if u == "}":
                return out, i + 1
            if u in _CLOSE:
                raise EdnError(f"'{{' closed by {u!r}")
            k, i = _value(toks, i)
            if i < len(toks) and toks[i] == "}":
                raise EdnError("a map with an odd number of forms")
            v, i = _value(toks, i)
            try:
                out[k if not isinstance(k, list) else tuple(_frozen(x) for x in k)] = v
            except TypeError:
                raise EdnError("a map as a map key") from None
    if c == "#":
        if len(t) == 1:
            raise EdnError("a '#' that is neither a set nor a tag")
        return _value(toks, i + 1)          # a tagged literal reads as its value
    if c == '"':
        if len(t) == 1:
            raise EdnError("an unterminated string")
        try:
            return json.loads(t, strict=False), i + 1
        except ValueError:
            raise EdnError(f"a bad escape in the string {t[:40]!r}") from None
    if c == ";":
        raise EdnError("unexpected character ';'")
    if c in _CLOSE:
        raise EdnError(f"unexpected {t!r}")
    if c.isdigit() or (c in "-+" and len(t) > 1 and t[1].isdigit()):
        s = t.rstrip("NM")
        try:
            return int(s), i + 1
        except ValueError:
            try:
                return float(s), i + 1
            except ValueError:
                raise EdnError(f"bad number {t!r}") from None
    if t == "nil":
        return None, i + 1
    if t == "true":
        return True, i + 1
    if t == "false":
        return False, i + 1
    return t, i + 1                         # a symbol


def _frozen(x: Any) -> Any:
    return tuple(_frozen(y) for y in x) if isinstance(x, list) else x


def iter_edn(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line."""
    p = str(path)
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise HistoryError(p, "", f"cannot open: {e.strerror}") from None
    with f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield n, parse_line(line)
            except EdnError as e:
                hint = " — the file looks truncated" if not line.endswith("\n") else ""
                raise HistoryError(p, f"line {n}", f"not a Jepsen op (malformed EDN: {e}){hint}") from None


def _key(path: str, where: str, k: Any) -> tuple[str, int]:
    if isinstance(k, bool):
        raise HistoryError(path, where, f"field ':value': {k!r} is not a key")
    if isinstance(k, int):
        return TOPIC, k
    if isinstance(k, str) and k.startswith(":"):
        return k[1:], 0
    if isinstance(k, (tuple, list)) and len(k) == 2 and isinstance(k[1], int) and not isinstance(k[1], bool):
        return str(k[0]).lstrip(":"), k[1]
    raise HistoryError(path, where, f"field ':value': {k!r} is not a key (an integer, a keyword or "
                                    "[topic partition])")


def _val(v: Any) -> str:
    return v[1:] if isinstance(v, str) and v.startswith(":") else str(v)


# The converter builds operations positionally (a third cheaper than by keyword): the order it
# relies on, held to Op's own at import, so a field added to Op cannot shift values silently.
OP_FIELDS = ("id", "process", "f", "type", "inv", "comp", "end", "topic", "partition", "key", "value",
             "offset", "offsets", "values", "group", "generation", "final", "delivery", "config", "error",
             "txn", "isolation", "end_offset", "where")
if tuple(f.name for f in dataclasses.fields(Op))[:len(OP_FIELDS)] != OP_FIELDS:
    raise ImportError("traces.history.Op's fields changed: update the positional construction in "
                      "traces/history_jepsen.py and OP_FIELDS")


class Converter:
    """Jepsen ops (maps, in file order) to kafkaverify events; `events()` yields them."""

    CLIENT_FS = (":send", ":poll", ":txn", ":assign", ":subscribe")
    SKIPPED_FS = (":crash", ":debug-topic-partitions")

    def __init__(self, path: str, producer_config: dict | None = None, isolation: str = "read_committed"):
        self.path = path
        self.config = dict(producer_config or {})
        if isolation not in ISOLATION_LEVELS:
            raise HistoryError(path, "", f"isolation level {isolation!r} (expected one of "
                                         f"{', '.join(ISOLATION_LEVELS)})")
        self.isolation = isolation
        self.pending: dict[int, tuple[str, dict]] = {}
        self.next_id = 0
        self.configured: dict[int, bool] = {}     # process -> its producer is transactional
        self.final: set[int] = set()        # processes after a seek-to-beginning assign
        self.ops: list[Op] | None = None    # `load`: operations made directly (see `_op`)
        self.sent: dict[tuple, str] = {}

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def op(self, where: str, m: Any) -> list[tuple[str, dict]]:
        """Events for one Jepsen op map (invokes are held until their completion)."""
        if not isinstance(m, dict):
            raise HistoryError(self.path, where, "not a Jepsen op (expected a map)")
        proc, f, typ = m.get(":process"), m.get(":f"), m.get(":type")
        if typ not in (":invoke", ":ok", ":info", ":fail"):
            raise HistoryError(self.path, where, f"field ':type': unknown op type {typ!r} "
                                                 "(expected :invoke, :ok, :info or :fail)")
        if not isinstance(proc, int) or isinstance(proc, bool):
            return []                       # the nemesis, or another non-client process
        if f in self.SKIPPED_FS:
            return []
        if f not in self.CLIENT_FS:
            raise HistoryError(self.path, where, f"field ':f': unknown client op {f!r} (expected one "
                                                 f"of {', '.join(self.CLIENT_FS + self.SKIPPED_FS)})")
        t = m.get(":time")
        if not isinstance(t, int) or isinstance(t, bool) or t < 0:
            raise HistoryError(self.path, where, f"field ':time': {t!r} is not a time in ns")
        if typ == ":invoke":
            if proc in self.pending:
                raise HistoryError(self.path, where, f"process {proc} invokes while its op at "
                                                     f"{self.pending[proc][0]} is still open")
            self.pending[proc] = (where, m)
            return []
        if proc not in self.pending:
            raise HistoryError(self.path, where, f"field ':process': process {proc} completes an op "
                                                 "it never invoked")
        iwhere, inv = self.pending.pop(proc)
        if inv.get(":f") != f:
            raise HistoryError(self.path, where, f"field ':f': completion {f} of an invoke of "
                                                 f"{inv.get(':f')} ({iwhere})")
        return self._pair(iwhere, where, inv, m)

    def finish(self) -> list[tuple[str, dict]]:
        """Invokes never completed: their operations' invokes only (unknown outcome)."""
        out = []
        for proc in sorted(self.pending):
            iwhere, inv = self.pending[proc]
            out += self._pair(iwhere, iwhere, inv, None)
        self.pending.clear()
        return out

    def _pair(self, iwhere: str, where: str, inv: dict, comp: dict | None) -> list[tuple[str, dict]]:
        f, proc = inv[":f"], inv[":process"]
        typ = comp[":type"][1:] if comp is not None else None
        t0 = inv[":time"] * SCALE
        t1 = comp[":time"] * SCALE if comp is not None else None
        if t1 is not None and t1 < t0:
            raise HistoryError(self.path, where, "field ':time': completes before its invoke")
        out: list[tuple[str, dict]] = []
        if comp is not None and comp.get(":rebalance-log"):
            for entry in comp[":rebalance-log"]:
                keys = entry.get(":keys", []) if isinstance(entry, dict) else []
                out += self._assign(where, proc, "subscribe", keys, t0, t0, "ok", False)
        if f in (":assign", ":subscribe"):
            keys = inv.get(":value") or []
            if not isinstance(keys, list):
                raise HistoryError(self.path, iwhere, "field ':value': an assignment lists keys")
            seek = bool(inv.get(":seek-to-beginning?"))
            return out + self._assign(iwhere, proc, f[1:], keys, t0, t1, typ, seek)
        # The completion's micro-ops carry the results (a failed op may still report reads).
        mops = comp[":value"] if comp is not None and comp.get(":value") is not None else inv.get(":value")
        if not isinstance(mops, list) or not all(isinstance(x, list) and x for x in mops):
            raise HistoryError(self.path, where, "field ':value': expected a vector of micro-ops "
                                                 "([:send k v] / [:poll ...])")
        txn = f == ":txn" or len(mops) > 1
        # A transactional_id given for every process (--producer-config) makes them incarnations
        # of one producer, whose InitProducerId the fencing check bounds below by the config's
        # invoke: it is placed at the process's first operation of any kind, not at its first
        # transaction, which may come long after the client opened its producer.
        if not self.configured.get(proc) and (txn or (proc not in self.configured
                                                      and "transactional_id" in self.config)):
            out += self._config(proc, t0, transactional=True)
        elif proc not in self.configured and self.config:
            out += self._config(proc, t0, transactional=False)
        tid = self.next_id if txn else None      # named after its first operation
        # A transaction's operations: invoked at 4t0+1, completed at 4t1+1; its commit invoked
        # at 4t0+2 (Jepsen does not say when the client began to commit: any time after the
        # transaction began, so no read is taken for precommitted on a guess), completed at
        # 4t1+2.
        a, b = (t0 + 1, (t1 + 1 if t1 is not None else None)) if txn else (t0, t1)
        for mop in mops:
            kind = mop[0]
            if kind == ":send":
                if len(mop) != 3:
                    raise HistoryError(self.path, where, f"field ':value': bad send {mop!r}")
                topic, part = _key(self.path, where, mop[1])
                v = mop[2]
                off = None
                if isinstance(v, list):
                    if len(v) != 2:
                        raise HistoryError(self.path, where, f"field ':value': bad send result {mop!r}")
                    off, v = v
                    if not isinstance(off, int) or isinstance(off, bool) or off < 0:
                        raise HistoryError(self.path, where, f"field ':value': send offset {off!r} is "
                                                             "not an offset (an integer from 0)")
                if typ == "ok" and off is not None:
                    st = "ok"
                elif typ == "fail" and not txn:
                    st = "fail"
                else:
                    st = "info" if typ is not None else None
                inv_ev = {"id": None, "type": "invoke", "process": proc, "f": "send", "topic": topic,
                          "partition": part, "value": _val(v), "mono_ns": a}
                out += self._emit(iwhere, where, inv_ev, st, b, {"offset": off} if off is not None and st != "fail" else {}, tid)
            elif kind == ":poll":
                res = mop[1] if len(mop) > 1 else None
                if res is None:
                    continue                # nothing returned (or not completed): no partition
                if not isinstance(res, dict):
                    raise HistoryError(self.path, where, f"field ':value': bad poll result {mop!r}")
                for k in res:
                    topic, part = _key(self.path, where, k)
                    pairs = res[k] or []
                    try:
                        offs = [int(o) for o, _ in pairs]
                        vals = [_val(x) for _, x in pairs]
                    except (TypeError, ValueError):
                        raise HistoryError(self.path, where, f"field ':value': bad poll records for "
                                                             f"{k!r}") from None
                    if offs and min(offs) < 0:
                        raise HistoryError(self.path, where, f"field ':value': negative offset "
                                                             f"{min(offs)} in the poll of {k!r} "
                                                             "(offsets start at 0)")
                    inv_ev = {"id": None, "type": "invoke", "process": proc, "f": "poll", "topic": topic,
                              "partition": part, "mono_ns": a}
                    if proc in self.final:
                        inv_ev["final"] = True
                    if txn or self.isolation == "read_committed":
                        inv_ev["isolation"] = self.isolation
                    out += self._emit(iwhere, where, inv_ev, typ or None, b,
                                      {"offsets": offs, "values": vals}, tid)
            else:
                raise HistoryError(self.path, where, f"field ':value': unknown micro-op {kind!r}")
        if txn:
            end = {"id": None, "type": "invoke", "process": proc, "f": "txn_commit",
                   "mono_ns": t0 + 2}
            out += self._emit(iwhere, where, end, typ, (t1 + 2) if t1 is not None else None, {}, tid)
        return out

    def _emit(self, iwhere, where, inv_ev, typ, t1, result, tid) -> list[tuple[str, dict]]:
        oid = self._id()
        inv_ev["id"] = oid
        if tid is not None:
            inv_ev["txn"] = tid
        if self.ops is not None:
            self._op(iwhere, inv_ev, typ if t1 is not None else None, t1, result)
            return []
        out = [(iwhere, inv_ev)]
        if typ is not None and t1 is not None:
            comp = {"id": oid, "type": typ, "process": inv_ev["process"], "f": inv_ev["f"],
                    **{k: v for k, v in result.items() if v is not None}, "mono_ns": t1}
            out.append((where, comp))
        return out

    def _op(self, iwhere: str, inv: dict, typ: str | None, t1: int | None, result: dict) -> None:
        """The operation of one invoke and its completion (`typ` None: none), as
        traces.history.pair makes it of the two events `_emit` would yield, with the one rule
        relating operations that the conversion does not already ensure (a value sent twice
        to one partition); `load` collects these instead of events."""
        f = inv["f"]
        kind = typ or "info"
        if f == "send":
            k = (inv["topic"], inv["partition"], inv["value"])
            if k in self.sent:
                raise HistoryError(self.path, iwhere, f"value {inv['value']!r} was already sent to "
                                                      f"{k[0]}-{k[1]} ({self.sent[k]}); sent values "
                                                      "must be unique per partition")
            self.sent[k] = iwhere
        config = None
        if f == "producer_config":
            config = {n: inv[n] for n in ("retries", "max_in_flight", "idempotence", "acks",
                                          "transactional_id") if n in inv}
        has = typ is not None
        get = inv.get
        # Positional, in Op's field order (id, process, f, type, inv, comp, end, topic,
        # partition, key, value, offset, offsets, values, group, generation, final, delivery,
        # config, error, txn, isolation, end_offset, where): a third cheaper than by keyword.
        self.ops.append(Op(
            inv["id"], inv["process"], f, kind, inv["mono_ns"], t1 if has and kind != "info" else None,
            t1 if has else None, get("topic"), get("partition"), None, get("value"),
            result.get("offset") if has else None, result.get("offsets") if has else None,
            result.get("values") if has else None, None, None, bool(get("final", False)), None,
            config, None, get("txn"), get("isolation"), None, iwhere))

    def _assign(self, where, proc, f, keys, t0, t1, typ, seek) -> list[tuple[str, dict]]:
        if seek:
            self.final.add(proc)
        else:
            self.final.discard(proc)
        out = []
        for k in keys or [None]:
            ev = {"id": None, "type": "invoke", "process": proc, "f": f, "mono_ns": t0}
            if k is not None:
                ev["topic"], ev["partition"] = _key(self.path, where, k)
            out += self._emit(where, where, ev, typ, t1, {}, None)
        return out

    def _config(self, proc, t, transactional: bool) -> list[tuple[str, dict]]:
        self.configured[proc] = transactional
        ev = {"id": None, "type": "invoke", "process": proc, "f": "producer_config", "mono_ns": t,
              **{k: v for k, v in self.config.items() if k in ("retries", "max_in_flight", "idempotence", "acks")}}
        if transactional:
            ev["transactional_id"] = self.config.get("transactional_id", f"jepsen-{proc}")
        return self._emit("", "", ev, "ok", t, {}, None)


def _header(p: str) -> dict:
    return {"format": FORMAT, "version": TXN_VERSION, "meta": {"source": "jepsen", "file": Path(p).name}}


def events(path: str | Path, producer_config: dict | None = None,
           isolation: str = "read_committed") -> tuple[dict, Iterator[tuple[str, dict]]]:
    """(header, events) of a Jepsen history.edn, converted as it is read."""
    p = str(path)
    conv = Converter(p, producer_config, isolation)
    it = iter_edn(path)

    def gen():
        for n, m in it:
            yield from conv.op(f"line {n}", m)
        yield from conv.finish()
    return _header(p), gen()


def load(path: str | Path, producer_config: dict | None = None, isolation: str = "read_committed") -> History:
    """The History of a Jepsen history.edn (raises HistoryError naming the line and field): the
    operations traces.history.pair makes of `events`, made directly as each op completes (the
    conversion builds every field of the format's type, checking what it copies from the
    file, and ids, transactions and completions relate as pairing requires by construction;
    tests/test_history_txn.py holds the two ways to the same History)."""
    p = str(path)
    conv = Converter(p, producer_config, isolation)
    conv.ops = []
    op = conv.op
    for n, m in iter_edn(path):
        op(f"line {n}", m)
    conv.finish()
    ops = conv.ops
    ops.sort(key=lambda o: (o.inv, o.id))
    return History(header=_header(p), ops=ops)
