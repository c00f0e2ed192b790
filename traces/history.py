"""The client-history format: what Kafka clients did, as invoke/complete event pairs.

This module owns the schema (field names, types, which fields each operation needs), its two
encodings (JSON lines for one run, Parquet for bulk) and the pairing of events into operations.
It imports neither spec/ nor impl/. docs/history-format.md is the user-facing description.

    {"format": "kafkaverify-history", "version": 1, "trace_id": "run-7", "meta": {...}}
    {"id": 0, "type": "invoke", "process": 1, "f": "send", "topic": "t", "partition": 0,
     "key": "k1", "value": "v1", "mono_ns": 1000}
    {"id": 0, "type": "ok", "process": 1, "f": "send", "offset": 0, "mono_ns": 2000}

Every event concerns at most one partition, so the Parquet layout is flat and columnar (one row
per event, a `trace_id` column lets one file hold many histories for Spark). Readers raise
HistoryError with the 1-based line (JSONL) or row (Parquet) for anything malformed; nothing is
silently dropped. Conversion is lossless: an event is exactly its present (non-null) fields.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

FORMAT = "kafkaverify-history"
# Version 1: plain sends, polls, offset commits, one-partition assigns (each adds its partition
# and resets its position). Version 2 adds transactions (`txn` on sends, polls and offset
# commits; `txn_commit` / `txn_abort` operations; `isolation` and `end_offset` on polls;
# `transactional_id` on a producer_config) and Kafka's assignment semantics: the
# assign/subscribe events of one process invoked at one `mono_ns` are one assignment that
# replaces the consumer's whole set.
# Writers write version 1 unless a history uses what only version 2 has (TXN_VERSION).
VERSION = 1
TXN_VERSION = 2
SUPPORTED_VERSIONS = (1, 2)
PARQUET_META_KEY = b"kafkaverify-history"

TYPES = ("invoke", "ok", "fail", "info")
# `assign` and `subscribe` both mean "this consumer now owns this partition": they reset the
# consumer's poll position, which is all the checkers need to know of them.
FS = ("send", "poll", "commit", "assign", "subscribe", "producer_config", "txn_commit", "txn_abort")
DELIVERY_MODES = ("at-least-once", "at-most-once")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# Fields only version 2 has, and the operations each may appear on.
V2_FIELDS: dict[str, tuple[str, ...]] = {
    "txn": ("send", "poll", "commit", "txn_commit", "txn_abort"),
    "isolation": ("poll",),
    "transactional_id": ("producer_config",),
    "end_offset": ("poll",),
}
TXN_FS = ("txn_commit", "txn_abort")

# Field name -> (Python type, Arrow type name). Order is the Parquet column order.
FIELDS: dict[str, tuple[type, str]] = {
    "id": (int, "int64"),
    "type": (str, "string"),
    "process": (int, "int64"),
    "f": (str, "string"),
    "topic": (str, "string"),
    "partition": (int, "int32"),
    "key": (str, "string"),
    "value": (str, "string"),
    "offset": (int, "int64"),
    "offsets": (list, "list<int64>"),
    "values": (list, "list<string>"),
    "group": (str, "string"),
    "generation": (int, "int64"),
    "final": (bool, "bool"),
    "delivery": (str, "string"),
    "retries": (int, "int32"),
    "max_in_flight": (int, "int32"),
    "idempotence": (bool, "bool"),
    "acks": (str, "string"),
    "error": (str, "string"),
    "mono_ns": (int, "int64"),
    "wall_ns": (int, "int64"),
}
# Version 2's fields, after version 1's: a version-1 file keeps its columns and bytes (its
# Parquet schema is FIELDS alone, which every earlier reader and the columnar screens read).
V2_TYPES: dict[str, tuple[type, str]] = {
    "txn": (int, "int64"),
    "isolation": (str, "string"),
    "transactional_id": (str, "string"),
    "end_offset": (int, "int64"),
}
ALL_FIELDS = {**FIELDS, **V2_TYPES}
_ORDER = {n: i for i, n in enumerate(ALL_FIELDS)}
REQUIRED = ("id", "type", "process", "f", "mono_ns")
# Fields an operation's invoke must carry, by operation.
INVOKE_NEEDS: dict[str, tuple[str, ...]] = {
    "send": ("topic", "partition", "value"),
    "poll": ("topic", "partition"),
    # generation is optional: not every client exposes it (then no fencing check for it).
    "commit": ("topic", "partition", "group", "offset"),
    "assign": ("topic", "partition"),
    "subscribe": ("topic", "partition"),
    "producer_config": (),
    "txn_commit": ("txn",),
    "txn_abort": ("txn",),
}
# Fields only a completion may set (the operation's result); everything else belongs to the
# invoke, and a completion that restates it must agree.
RESULT_FIELDS: dict[str, frozenset[str]] = {
    "send": frozenset({"offset"}),
    "poll": frozenset({"offsets", "values", "end_offset"}),
    "commit": frozenset(),
    "assign": frozenset({"generation", "offset"}),
    "subscribe": frozenset({"generation", "offset"}),
    "producer_config": frozenset(),
    "txn_commit": frozenset(),
    "txn_abort": frozenset(),
}
ALWAYS_OWN = frozenset({"id", "type", "process", "f", "mono_ns", "wall_ns", "error"})


class HistoryError(Exception):
    """Malformed history input; `where` is e.g. 'line 7' or 'row 7' (empty: the whole file)."""

    def __init__(self, path: str, where: str, message: str):
        self.path, self.where, self.message = path, where, message
        super().__init__(f"{path}: {where}: {message}" if where else f"{path}: {message}")


@dataclass(slots=True, eq=False)   # identity: two ops are never "equal"
class Op:
    """One client operation: its invoke merged with its completion. `comp` is None when the
    outcome is unknown for good (an `info` completion or no completion at all): such an
    operation may take effect at any time after `inv`, or never."""
    id: int
    process: int
    f: str
    type: str                       # ok | fail | info
    inv: int                        # monotonic ns of the invoke
    comp: int | None                # monotonic ns of an ok/fail completion, else None
    end: int | None                 # monotonic ns of the completion event, if any (for display)
    topic: str | None = None
    partition: int | None = None
    key: str | None = None
    value: str | None = None
    offset: int | None = None
    offsets: list | None = None
    values: list | None = None
    group: str | None = None
    generation: int | None = None
    final: bool = False
    delivery: str | None = None
    config: dict | None = None      # producer_config: retries, max_in_flight, idempotence, acks,
                                    # transactional_id
    error: str | None = None
    txn: int | None = None          # the transaction this operation belongs to (version 2)
    isolation: str | None = None    # a poll's isolation level (version 2; absent: read_uncommitted)
    # A poll's end of the partition (version 2): at some instant after its invoke and after its
    # records were fetched, before its completion, no record at this offset or later was
    # visible at its isolation level.
    end_offset: int | None = None
    where: str = ""                 # 'line N' / 'row N' of the invoke, for messages
    inv_wall: int | None = None     # wall-clock ns (display only; never used for ordering)
    end_wall: int | None = None

    @property
    def tp(self) -> str:
        return f"{self.topic}-{self.partition}"

    def describe(self) -> str:
        """One line, so that a witness reads like a story."""
        head = f"#{self.id} p{self.process} {self.f}"
        if self.f == "send":
            at = f"@{self.offset}" if self.offset is not None else ""
            body = f" {self.value!r}→{self.tp}{at}"
        elif self.f == "poll":
            pairs = [f"{o}:{v!r}" for o, v in zip(self.offsets or [], self.values or [])]
            if len(pairs) > 4:   # keep a witness line readable: first two … last one
                pairs = pairs[:2] + [f"… {len(pairs) - 3} more …"] + pairs[-1:]
            body = f" {self.tp} [{', '.join(pairs)}]" + (" (final)" if self.final else "")
        elif self.f == "commit":
            body = f" {self.group} {self.tp} offset={self.offset} gen={self.generation}"
        elif self.f in ("assign", "subscribe"):
            body = f" {self.tp} gen={self.generation}" if self.topic is not None else " (no partitions)"
        elif self.f in TXN_FS:
            body = ""
        else:
            cfg = self.config or {}
            body = " " + " ".join(f"{k}={cfg[k]}" for k in sorted(cfg))
        if self.f == "poll" and self.isolation == "read_committed":
            body += " read_committed"
        if self.txn is not None:
            body += f" txn={self.txn}"
        return f"{head}{body} {self.type}"


@dataclass
class History:
    header: dict[str, Any]
    ops: list[Op] = field(default_factory=list)   # sorted by invoke time, then id

    def by_id(self) -> dict[int, Op]:
        return {op.id: op for op in self.ops}

    def __len__(self) -> int:
        return len(self.ops)


def make_header(trace_id: str | None = None, version: int = VERSION, **meta: Any) -> dict[str, Any]:
    h: dict[str, Any] = {"format": FORMAT, "version": version}
    if trace_id is not None:
        h["trace_id"] = trace_id
    if meta:
        h["meta"] = meta
    return h


# ---------------------------------------------------------------------------------------------
# Validation and pairing (shared by both encodings).

def check_header(path: str, where: str, h: Any) -> dict[str, Any]:
    if not isinstance(h, dict) or h.get("format") != FORMAT:
        raise HistoryError(path, where, f"not a {FORMAT} file: the header must carry "
                                        f"\"format\": \"{FORMAT}\"")
    if h.get("version") not in SUPPORTED_VERSIONS:
        raise HistoryError(path, where, f"unsupported format version {h.get('version')!r} "
                                        f"(this kafkaverify reads {', '.join(map(str, SUPPORTED_VERSIONS))})")
    extra = sorted(set(h) - {"format", "version", "trace_id", "meta"})
    if extra:
        raise HistoryError(path, where, f"unknown header field(s) {', '.join(extra)}")
    return h


def check_event(path: str, where: str, ev: Any) -> None:
    """Types and presence of one event's fields (not yet its relation to other events)."""
    if not isinstance(ev, dict):
        raise HistoryError(path, where, "an event must be a JSON object")
    for name, val in ev.items():
        spec = ALL_FIELDS.get(name)
        if spec is None:
            raise HistoryError(path, where, f"unknown field {name!r}")
        want = spec[0]
        # bool is a subclass of int in Python; keep them apart so true is not offset 1.
        if want is int and (not isinstance(val, int) or isinstance(val, bool)):
            raise HistoryError(path, where, f"field {name!r} must be an integer, got {val!r}")
        if want is not int and not isinstance(val, want):
            raise HistoryError(path, where, f"field {name!r} must be a {spec[1]}, got {val!r}")
    missing = [n for n in REQUIRED if n not in ev]
    if missing:
        raise HistoryError(path, where, f"missing field(s) {', '.join(missing)}")
    if ev["type"] not in TYPES:
        raise HistoryError(path, where, f"unknown type {ev['type']!r} (expected one of {', '.join(TYPES)})")
    if ev["f"] not in FS:
        raise HistoryError(path, where, f"unknown operation f={ev['f']!r} (expected one of {', '.join(FS)})")
    if "offsets" in ev and any(not isinstance(o, int) or isinstance(o, bool) for o in ev["offsets"]):
        raise HistoryError(path, where, "'offsets' must be a list of integers")
    # Kafka offsets start at 0: a negative one is a recording bug, not an anomaly to report.
    if "offset" in ev and ev["offset"] < 0:
        raise HistoryError(path, where, f"negative offset {ev['offset']} (offsets start at 0)")
    if "end_offset" in ev and ev["end_offset"] < 0:
        raise HistoryError(path, where, f"field 'end_offset': negative offset {ev['end_offset']} "
                                        "(offsets start at 0)")
    if "offsets" in ev and any(o < 0 for o in ev["offsets"]):
        raise HistoryError(path, where, f"negative offset {min(ev['offsets'])} in 'offsets' "
                                        "(offsets start at 0)")
    if "values" in ev and any(not isinstance(v, str) for v in ev["values"]):
        raise HistoryError(path, where, "'values' must be a list of strings")
    if "isolation" in ev and ev["isolation"] not in ISOLATION_LEVELS:
        raise HistoryError(path, where, f"field 'isolation': unknown isolation level {ev['isolation']!r} "
                                        f"(expected one of {', '.join(ISOLATION_LEVELS)})")
    for name, fs in V2_FIELDS.items():
        if name in ev and ev["f"] not in fs:
            raise HistoryError(path, where, f"field {name!r} does not belong on a {ev['f']} "
                                            f"(only on {', '.join(fs)})")
    if "delivery" in ev and ev["delivery"] not in DELIVERY_MODES:
        raise HistoryError(path, where, f"unknown delivery mode {ev['delivery']!r} "
                                        f"(expected one of {', '.join(DELIVERY_MODES)})")


def pair(path: str, header: dict[str, Any], events: Iterable[tuple[str, dict[str, Any]]],
         fields_checked: bool = False) -> History:
    """Pairs invokes with completions (by `id`) into operations. An invoke never completed is
    an `info` operation: the client may have crashed with the request in flight.
    `fields_checked`: the caller has already held every event to `check_event`'s rules (the
    pipeline does so on whole columns: pipeline/judge.py `fields_hold`), so they are not
    checked again one event at a time; the rules relating events are checked here as ever."""
    pending: dict[int, tuple[str, dict[str, Any]]] = {}
    done: set[int] = set()
    ops: list[Op] = []
    sent: dict[tuple[str, int, str], str] = {}
    v2 = header.get("version", VERSION) >= TXN_VERSION
    txns = _TxnRules(path)
    for where, ev in events:
        if not fields_checked:
            check_event(path, where, ev)
        if not v2:
            late = [n for n in V2_FIELDS if n in ev] + ([f"f={ev['f']}"] if ev["f"] in TXN_FS else [])
            if late:
                raise HistoryError(path, where, f"{', '.join(late)} needs format version {TXN_VERSION} "
                                                f"(the header says version {header.get('version')})")
        oid = ev["id"]
        if ev["type"] == "invoke":
            if oid in pending or oid in done:
                raise HistoryError(path, where, f"operation id {oid} is invoked twice")
            txns.invoke(where, ev)
            need = [n for n in INVOKE_NEEDS[ev["f"]] if n not in ev]
            if v2 and ev["f"] in ("assign", "subscribe") and "topic" not in ev and "partition" not in ev:
                need = []           # an assignment of no partition: revokes every one
            if need:
                raise HistoryError(path, where, f"{ev['f']} invoke lacks field(s) {', '.join(need)}")
            if ev["f"] == "send":
                k = (ev["topic"], ev["partition"], ev["value"])
                if k in sent:
                    # Checkers identify a record by its value, as Jepsen does.
                    raise HistoryError(path, where, f"value {ev['value']!r} was already sent to "
                                                    f"{ev['topic']}-{ev['partition']} ({sent[k]}); "
                                                    "sent values must be unique per partition")
                sent[k] = where
            pending[oid] = (where, ev)
            continue
        if oid not in pending:
            what = "completed twice" if oid in done else "completed without an invoke"
            raise HistoryError(path, where, f"operation id {oid} {what}")
        iwhere, inv = pending.pop(oid)
        done.add(oid)
        for n in ("process", "f"):
            if ev[n] != inv[n]:
                raise HistoryError(path, where, f"completion of operation {oid} has {n}={ev[n]!r} "
                                                f"but its invoke ({iwhere}) has {inv[n]!r}")
        if ev["mono_ns"] < inv["mono_ns"]:
            raise HistoryError(path, where, f"operation {oid} completes (mono_ns={ev['mono_ns']}) "
                                            f"before it is invoked (mono_ns={inv['mono_ns']})")
        results = RESULT_FIELDS[ev["f"]]
        for n, v in ev.items():
            if n in ALWAYS_OWN or n in results:
                continue
            if inv.get(n) != v:
                raise HistoryError(path, where, f"completion of operation {oid} sets {n}={v!r}, "
                                                f"which its invoke ({iwhere}) does not say")
        ops.append(_make_op(path, where, iwhere, inv, ev))
    for oid in sorted(pending, key=lambda i: pending[i][1]["mono_ns"]):
        iwhere, inv = pending[oid]
        ops.append(_make_op(path, iwhere, iwhere, inv, None))
    ops.sort(key=lambda o: (o.inv, o.id))
    return History(header=header, ops=ops)


class _TxnRules:
    """The reader's rules for transactions (version 2): a transaction belongs to one process,
    which must be a transactional producer (its producer_config carries a transactional_id),
    and nothing joins it after its txn_commit or txn_abort was invoked."""

    def __init__(self, path: str):
        self.path = path
        self.txid: dict[int, str | None] = {}          # process -> its transactional_id
        self.owner: dict[int, tuple[int, str]] = {}    # txn -> (process, where first used)
        self.ended: dict[int, str] = {}                # txn -> where its end was invoked

    def invoke(self, where: str, ev: dict[str, Any]) -> None:
        proc = ev["process"]
        if ev["f"] == "producer_config":
            self.txid[proc] = ev.get("transactional_id")
            return
        t = ev.get("txn")
        if t is None:
            return
        if self.txid.get(proc) is None:
            raise HistoryError(self.path, where, f"field 'txn': process {proc} is not a transactional "
                                                 "producer (record a producer_config with a "
                                                 "'transactional_id' before its transactions)")
        first = self.owner.setdefault(t, (proc, where))
        if first[0] != proc:
            raise HistoryError(self.path, where, f"field 'txn': transaction {t} belongs to process "
                                                 f"{first[0]} ({first[1]}), not to process {proc}")
        if t in self.ended:
            raise HistoryError(self.path, where, f"field 'txn': transaction {t} already ended "
                                                 f"({self.ended[t]})")
        if ev["f"] in TXN_FS:
            self.ended[t] = where


def _make_op(path: str, where: str, iwhere: str, inv: dict, comp: dict | None) -> Op:
    f = inv["f"]
    kind = comp["type"] if comp is not None else "info"
    merged = dict(inv)
    if comp is not None:
        for n in RESULT_FIELDS[f]:
            if n in comp:
                merged[n] = comp[n]
    if kind == "fail" and f == "send" and comp is not None and "offset" in comp:
        raise HistoryError(path, where, "field 'offset': a failed send did not happen and has no "
                                        "offset (record a send whose outcome is unknown as info)")
    if kind == "ok":
        if f == "send" and "offset" not in merged:
            raise HistoryError(path, where, "an ok send must carry the acknowledged 'offset' "
                                            "(record acks=0 sends as info)")
        if f == "poll":
            if "offsets" not in merged or "values" not in merged:
                raise HistoryError(path, where, "an ok poll must carry 'offsets' and 'values'")
    if f == "poll" and ("offsets" in merged) != ("values" in merged):
        raise HistoryError(path, where, "a poll carries 'offsets' and 'values' together or neither")
    if f == "poll" and "offsets" in merged and len(merged["offsets"]) != len(merged["values"]):
        raise HistoryError(path, where, "'offsets' and 'values' differ in length")
    config = None
    if f == "producer_config":
        config = {n: merged[n] for n in ("retries", "max_in_flight", "idempotence", "acks",
                                         "transactional_id") if n in merged}
    return Op(
        id=inv["id"], process=inv["process"], f=f, type=kind, inv=inv["mono_ns"],
        comp=comp["mono_ns"] if comp is not None and kind != "info" else None,
        end=comp["mono_ns"] if comp is not None else None,
        topic=merged.get("topic"), partition=merged.get("partition"), key=merged.get("key"),
        value=merged.get("value"), offset=merged.get("offset"),
        # A poll that ended info or fail may still carry the records it returned: they are
        # evidence of the log (checkers use them; they do not move the consumer's position).
        offsets=merged.get("offsets"), values=merged.get("values"),
        group=merged.get("group"), generation=merged.get("generation"),
        final=bool(merged.get("final", False)), delivery=merged.get("delivery"),
        config=config, error=(comp or {}).get("error", inv.get("error")), where=iwhere,
        inv_wall=inv.get("wall_ns"), end_wall=(comp or {}).get("wall_ns"),
        txn=merged.get("txn"), isolation=merged.get("isolation"),
        end_offset=merged.get("end_offset"))


# ---------------------------------------------------------------------------------------------
# JSON lines.

def iter_jsonl(path: str | Path) -> tuple[dict[str, Any], Iterator[tuple[str, dict[str, Any]]]]:
    """Returns the header and an iterator of ('line N', event)."""
    p = str(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise HistoryError(p, "", f"cannot open: {e.strerror}") from None
    try:
        first = f.readline()
        if not first:
            raise HistoryError(p, "", "empty file: no header line")
        header = check_header(p, "line 1", _loads(p, 1, first, at_end=not first.endswith(b"\n")))
    except BaseException:
        f.close()
        raise

    def events() -> Iterator[tuple[str, dict[str, Any]]]:
        with f:
            lineno = 1
            for raw in f:
                lineno += 1
                if not raw.strip():
                    continue
                yield f"line {lineno}", _loads(p, lineno, raw, at_end=not raw.endswith(b"\n"))
    return header, events()


def _loads(path: str, lineno: int, raw: bytes, at_end: bool) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        hint = " — the file looks truncated (its last line is incomplete)" if at_end else ""
        raise HistoryError(path, f"line {lineno}", f"not valid JSON ({e}){hint}") from None


def write_jsonl(path: str | Path, header: dict[str, Any], events: Iterable[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        for ev in events:
            # Canonical key order (FIELDS order): the same events give the same bytes.
            ev = dict(sorted(ev.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER))))
            f.write(json.dumps(ev, separators=(",", ":")) + "\n")


# ---------------------------------------------------------------------------------------------
# Parquet (pyarrow imported lazily: the JSONL path does not need it).

def arrow_schema(trace_column: bool = True, v2: bool = False):
    """The Parquet columns: version 1's, and version 2's after them when `v2`."""
    import pyarrow as pa
    types = {"int64": pa.int64(), "int32": pa.int32(), "string": pa.string(), "bool": pa.bool_(),
             "list<int64>": pa.list_(pa.int64()), "list<string>": pa.list_(pa.string())}
    cols = [pa.field("trace_id", pa.string())] if trace_column else []
    cols += [pa.field(n, types[t], nullable=n not in REQUIRED)
             for n, (_, t) in (ALL_FIELDS if v2 else FIELDS).items()]
    return pa.schema(cols)


def events_to_table(header: dict[str, Any], events: list[dict[str, Any]], trace_column: bool = True):
    """The events as an Arrow table of the schema's columns, led by a `trace_id` column (the
    header's, on every row) unless `trace_column` is false; the header in the metadata."""
    import pyarrow as pa
    v2 = header.get("version", VERSION) >= TXN_VERSION
    schema = arrow_schema(trace_column, v2)
    cols: dict[str, list] = {n: [] for n in schema.names}
    if trace_column:
        cols["trace_id"] = [header.get("trace_id")] * len(events)
    names = list(ALL_FIELDS if v2 else FIELDS)
    for ev in events:
        for n in names:
            cols[n].append(ev.get(n))
    meta = {PARQUET_META_KEY: json.dumps(header, separators=(",", ":")).encode()}
    return pa.Table.from_pydict(cols, schema=schema.with_metadata(meta))


def parquet_write_options(one_history: bool) -> dict[str, Any]:
    """pyarrow.parquet.write_table options of the layout, in one place for every writer.

    One history per file (`write_parquet`): LZ4 (the LZ4_RAW codec) and no `trace_id` column.
    Decoding check-history's columns of a 10^6-operation history costs 0.475 CPU-s cold (0.229
    warm) against 0.554 (0.267) for zstd with a trace_id column, 1.17x, for a file 1.8x the
    size (46 against 26 MiB); no compression decodes 1.19x faster but is 2.8x the size;
    zstd's level, page and row-group sizes, and statistics change nothing measurable, and
    dictionary pages off or for the low-cardinality columns only cost more
    (benchmarks/parquet_layout.py, BENCHMARKS.md). The trace_id is the header's, in
    the metadata; readers take it from there when the column is absent.

    Many histories per file (`write_bulk_parquet`, mining): zstd and the trace_id column,
    which tells the histories apart; these files are read from disk in bulk, where size counts."""
    if one_history:
        return {"compression": "lz4"}
    return {"compression": "zstd"}


def write_parquet(path: str | Path, header: dict[str, Any], events: list[dict[str, Any]]) -> None:
    import pyarrow.parquet as pq
    pq.write_table(events_to_table(header, events, trace_column=False), str(path),
                   **parquet_write_options(True))


def read_events_parquet(path: str | Path) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """Returns the header and ('row N', event) pairs (rows 1-based). One history per file here;
    bulk files with several trace_ids are for mining tools, which group by trace_id."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    p = str(path)
    try:
        table = pq.read_table(p)
    except FileNotFoundError:
        raise HistoryError(p, "", "cannot open: No such file or directory") from None
    except (pa.ArrowException, OSError) as e:
        raise HistoryError(p, "", f"not a readable Parquet file ({e})") from None
    meta = table.schema.metadata or {}
    if PARQUET_META_KEY not in meta:
        raise HistoryError(p, "", f"not a {FORMAT} Parquet file (no '{PARQUET_META_KEY.decode()}' "
                                  "schema metadata)")
    try:
        header = json.loads(meta[PARQUET_META_KEY])
    except json.JSONDecodeError as e:
        raise HistoryError(p, "", f"bad header metadata ({e})") from None
    check_header(p, "metadata", header)
    missing = [n for n in REQUIRED if n not in table.column_names]
    if missing:
        raise HistoryError(p, "", f"missing column(s) {', '.join(missing)}")
    unknown = sorted(set(table.column_names) - set(ALL_FIELDS) - {"trace_id"})
    if unknown:
        raise HistoryError(p, "", f"unknown column(s) {', '.join(unknown)}")
    if "trace_id" in table.column_names:
        ids = sorted(x for x in set(table.column("trace_id").to_pylist()) if x is not None)
        if len(ids) > 1:
            raise HistoryError(p, "", f"the file holds {len(ids)} histories (trace_id "
                                      f"{', '.join(ids[:5])}{', …' if len(ids) > 5 else ''}); "
                                      "check one history per file")
    names = [n for n in table.column_names if n != "trace_id"]
    data = [table.column(n).to_pylist() for n in names]
    out = []
    for i, row in enumerate(zip(*data)):
        ev = {n: v for n, v in zip(names, row) if v is not None}
        out.append((f"row {i + 1}", ev))
    return header, out


def write_bulk_parquet(path: str | Path, histories: Iterable[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:
    """Many histories in one Parquet file (for mining): rows of each history carry its
    trace_id (which must be set and distinct); the schema metadata holds the first header."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    tables, seen = [], set()
    for header, events in histories:
        tid = header.get("trace_id")
        if tid is None or tid in seen:
            raise ValueError(f"bulk histories need distinct trace_ids (got {tid!r})")
        seen.add(tid)
        tables.append(events_to_table(header, events))
    pq.write_table(pa.concat_tables(tables), str(path), **parquet_write_options(False))


def read_bulk_parquet(path: str | Path) -> Iterator[tuple[str, History]]:
    """(trace_id, History) for every history of a bulk file, in trace_id order; events of one
    history keep their file order. Errors name the file's row (1-based)."""
    import pyarrow.parquet as pq
    p = str(path)
    table = pq.read_table(p)
    meta = table.schema.metadata or {}
    if PARQUET_META_KEY not in meta:
        raise HistoryError(p, "", f"not a {FORMAT} Parquet file")
    base = check_header(p, "metadata", json.loads(meta[PARQUET_META_KEY]))
    # A one-history file has no trace_id column: the header's stands for every row.
    ids = (table.column("trace_id").to_pylist() if "trace_id" in table.column_names
           else [base.get("trace_id")] * table.num_rows)
    names = [n for n in table.column_names if n != "trace_id"]
    data = [table.column(n).to_pylist() for n in names]
    rows: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for i, (tid, row) in enumerate(zip(ids, zip(*data))):
        ev = {n: v for n, v in zip(names, row) if v is not None}
        rows.setdefault(tid, []).append((f"row {i + 1}", ev))
    for tid in sorted(rows, key=lambda t: (t is None, t or "")):
        header = {k: v for k, v in base.items() if k not in ("trace_id", "meta")}
        if tid is not None:
            header["trace_id"] = tid
        yield tid, pair(p, header, rows[tid])


# ---------------------------------------------------------------------------------------------
# Entry points.

def detect_format(path: str | Path, fmt: str | None = None) -> str:
    if fmt:
        return fmt
    return "parquet" if str(path).endswith(".parquet") else "jsonl"


def read_events(path: str | Path, fmt: str | None = None) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    if detect_format(path, fmt) == "parquet":
        return read_events_parquet(path)
    header, it = iter_jsonl(path)
    return header, list(it)


def load(path: str | Path, fmt: str | None = None) -> History:
    header, evs = read_events(path, fmt)
    return pair(str(path), header, evs)


def write(path: str | Path, header: dict[str, Any], events: list[dict[str, Any]], fmt: str | None = None) -> None:
    if detect_format(path, fmt) == "parquet":
        write_parquet(path, header, events)
    else:
        write_jsonl(path, header, events)


def op_events(op: Op) -> list[dict[str, Any]]:
    """The invoke and completion events of one operation (inverse of pairing)."""
    inv: dict[str, Any] = {"id": op.id, "type": "invoke", "process": op.process, "f": op.f}
    for n in ("topic", "partition", "key", "value", "group", "delivery", "txn", "isolation"):
        v = getattr(op, n)
        if v is not None:
            inv[n] = v
    if op.f == "commit":
        inv["offset"] = op.offset
        if op.generation is not None:
            inv["generation"] = op.generation
    if op.final:
        inv["final"] = True
    if op.config:
        inv.update(op.config)
    inv["mono_ns"] = op.inv
    if op.inv_wall is not None:
        inv["wall_ns"] = op.inv_wall
    out = [inv]
    if op.end is None:
        return out
    comp: dict[str, Any] = {"id": op.id, "type": op.type, "process": op.process, "f": op.f}
    if op.f == "send" and op.offset is not None:
        comp["offset"] = op.offset
    elif op.f == "poll" and (op.type == "ok" or op.offsets is not None):
        comp["offsets"], comp["values"] = list(op.offsets or []), list(op.values or [])
        if op.end_offset is not None:
            comp["end_offset"] = op.end_offset
    if op.type == "ok":
        if op.f in ("assign", "subscribe"):
            if op.generation is not None:
                comp["generation"] = op.generation
            if op.offset is not None:
                comp["offset"] = op.offset
    if op.error is not None:
        comp["error"] = op.error
    comp["mono_ns"] = op.end
    if op.end_wall is not None:
        comp["wall_ns"] = op.end_wall
    out.append(comp)
    return out


def history_events(ops: Iterable[Op]) -> list[dict[str, Any]]:
    """Events of a set of operations, in time order (used to write generated/shrunk histories)."""
    evs = []
    for op in ops:
        evs.extend(op_events(op))
    evs.sort(key=lambda e: (e["mono_ns"], e["type"] != "invoke", e["id"]))
    return evs
