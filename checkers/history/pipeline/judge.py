"""The pipeline over a frame of runs: the screens first (checkers/history/screens), then the
oracle (checkers/history/oracle) on the flagged partitions only. Entry points: `judge` (a paired
frame of one or many runs -> run -> RunResult) and `decide` (verdicts from a Screen already
computed, e.g. by chunks or by the fused screen's counts).

Flagged (run, partition) pairs only are turned into Op objects (through the object reader's
own pairing) and judged by the oracle, which builds the witnesses and explanations: so the
anomalies and witnesses are the oracle's by construction, and a partition no screen flags is
clean, its verdict decided from the screens' counts. A flagged partition costs the oracle's
(near-linear) time for that partition alone. The cross-partition cycle search needs the whole
run as objects: it runs (bounded by cycle_max_ops) only when some partition is not
linearizable; otherwise no cycle exists by locality (see oracle/cycles.py).
tests/test_history_columnar.py checks that the pipeline's verdicts are the oracle's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import repeat
from typing import Callable

import polars as pl

from checkers.history.oracle import consumer, cycles, linearizable, log_checks
from checkers.history.oracle.index import build
from checkers.history.result import PER_PARTITION, CheckResult, Verdict, combine, finish
from checkers.history.screens.columnar import Paired, Screen, clean_status, screen
from traces.history import (ALWAYS_OWN, DELIVERY_MODES, FIELDS, FS, INVOKE_NEEDS, REQUIRED, RESULT_FIELDS,
                            TXN_FS, TXN_VERSION, TYPES, VERSION, History, Op)
from traces.history import pair as pair_events


def to_histories(ev: pl.DataFrame, headers: dict[int, dict], where: str, base: int) -> dict[int, History]:
    """The object reader's History of each run in `ev` (some of its events): the one per-row
    path, taken only for what a screen flagged (or for the cycle search of a small history).
    One pass over the rows for all runs: no per-run filtering of the frame. The reader's rules
    for single events are tested on whole columns first (`fields_hold`); where they hold, the
    reader skips them event by event (a third of its time) and checks only the rules that
    relate events."""
    checked = fields_hold(ev)
    out: dict[int, History] = {}
    if checked:
        # Version-1 runs whose every reader rule holds on whole columns: their operations
        # straight from the paired columns (`ops_from_columns`), no event objects.
        for (run,), part in ev.partition_by("run", as_dict=True).items():
            header = headers.get(run, {})
            if header.get("version", VERSION) < TXN_VERSION:
                h = ops_from_columns(part, header, where, base)
                if h is not None:
                    out[run] = h
        if out:
            ev = ev.filter(~pl.col("run").is_in(pl.Series(sorted(out), dtype=ev.schema["run"]).implode()))
            if ev.height == 0:
                return out
    ev = ev.sort("_i").with_row_index("_pos")
    n = ev.height
    where_of: list = [None] * n
    event_of: list = [None] * n
    run_of: list = [None] * n
    # By kind of event (operation and type), whose fields are mostly the same on every row,
    # column by column: the fields present on every row of a kind are zipped in without a
    # test for null, the others set where present.
    for part in ev.select("_pos", "run", "row", *FIELDS).partition_by("f", "type", maintain_order=False):
        cols = [c for c in FIELDS if part.get_column(c).null_count() < part.height]
        full = [c for c in cols if part.get_column(c).null_count() == 0]
        dicts = [dict(zip(full, r)) for r in zip(*(part.get_column(c).to_list() for c in full))]
        for c in cols:
            if c not in full:
                for d, v in zip(dicts, part.get_column(c).to_list()):
                    if v is not None:
                        d[c] = v
        for pos, run, r, d in zip(part.get_column("_pos").to_list(), part.get_column("run").to_list(),
                                  part.get_column("row").to_list(), dicts):
            where_of[pos] = f"{where} {r + base}"
            event_of[pos] = d
            run_of[pos] = run
    per: dict[int, list] = {}
    for run, w, d in zip(run_of, where_of, event_of):
        per.setdefault(run, []).append((w, d))
    out.update({run: pair_events("", headers.get(run, {}), evs,
                                 fields_checked=checked and headers.get(run, {}).get("version", VERSION) < TXN_VERSION)
                for run, evs in per.items()})
    return out


_CONFIG = ("retries", "max_in_flight", "idempotence", "acks")
# The order in which ops_from_columns passes Op's fields (positionally): Op's own.
_OP_FIELDS = ("id", "process", "f", "type", "inv", "comp", "end", "topic", "partition", "key", "value",
              "offset", "offsets", "values", "group", "generation", "final", "delivery", "config", "error",
              "txn", "isolation", "end_offset", "where", "inv_wall", "end_wall")
assert Op.__slots__ == _OP_FIELDS, "traces.history.Op's fields changed: update ops_from_columns"


def ops_from_columns(ev: pl.DataFrame, header: dict, where: str, base: int) -> History | None:
    """The History traces.history.pair would build from one version-1 run's events (`ev`:
    columns FIELDS, `row`, `_i`; `fields_hold` true), built from columns: invokes joined with
    their completions, every rule of pair and of its _make_op tested on whole columns first.
    None if any rule is broken (the caller then pairs the events one by one, and the reader
    names the row). tests/test_history_judge.py holds the two to the same operations."""
    c = pl.col
    ev = ev.select(*FIELDS, "row", "_i")
    inv = ev.filter(c("type") == "invoke")
    comp = ev.filter(c("type") != "invoke")
    ids = inv.get_column("id")
    if ids.n_unique() != ids.len() or comp.get_column("id").n_unique() != comp.height:
        return None                                 # invoked twice, or completed twice
    if inv.get_column("f").is_in(list(TXN_FS)).any():
        return None                                 # version 2's operations
    j = inv.join(comp, on="id", how="left", suffix="_c")
    has_comp = c("type_c").is_not_null()
    if j.select(has_comp.sum()).item() != comp.height:
        return None                                 # a completion without an invoke
    bad = has_comp & ((c("_i_c") < c("_i")) | (c("process_c") != c("process")) | (c("f_c") != c("f"))
                      | (c("mono_ns_c") < c("mono_ns")))
    # A completion restating an invoke's field must agree with it (result fields excepted).
    for n in FIELDS:
        if n in ALWAYS_OWN:
            continue
        owners = [f for f, res in RESULT_FIELDS.items() if n in res]
        restated = c(f"{n}_c").is_not_null() & ~c("f").is_in(owners)
        differs = c(n).is_null() | (c(f"{n}_c") != c(n)).fill_null(True)
        bad = bad | (restated & differs)
    for f, need in INVOKE_NEEDS.items():
        if need and f not in TXN_FS:
            bad = bad | ((c("f") == f) & pl.any_horizontal([c(n).is_null() for n in need]))
    merged = {}
    for n in FIELDS:
        owners = [f for f, res in RESULT_FIELDS.items() if n in res]
        merged[n] = (pl.when(c("f").is_in(owners)).then(pl.coalesce(f"{n}_c", n)).otherwise(c(n))
                     if owners else c(n))
    kind = pl.coalesce("type_c", pl.lit("info"))
    j = j.with_columns(kind.alias("kind"), *[e.alias(f"m_{n}") for n, e in merged.items()
                                             if n in ("offset", "offsets", "values", "generation")])
    bad = bad | ((c("kind") == "fail") & (c("f") == "send") & c("offset_c").is_not_null())
    bad = bad | ((c("kind") == "ok") & (c("f") == "send") & c("m_offset").is_null())
    bad = bad | ((c("kind") == "ok") & (c("f") == "poll") & (c("m_offsets").is_null() | c("m_values").is_null()))
    bad = bad | ((c("f") == "poll") & (c("m_offsets").is_null() != c("m_values").is_null()))
    bad = bad | ((c("f") == "poll") & (c("m_offsets").list.len() != c("m_values").list.len()).fill_null(False))
    if j.select(bad.any()).item():
        return None
    sends = j.filter(c("f") == "send").select("topic", "partition", "value")
    if sends.height and sends.is_duplicated().any():
        return None                                 # a value sent twice to one partition
    j = j.sort("mono_ns", "id")
    # Each Op's fields as columns, derived in polars (the completion time only for ok/fail,
    # the message place as one string column), then the objects built positionally in one
    # map over the columns: no per-operation Python beyond Op's own constructor.
    info = c("kind") == "info"
    j = j.with_columns(pl.when(info).then(None).otherwise(c("mono_ns_c")).alias("_comp"),
                       c("final").fill_null(False).cast(pl.Boolean).alias("_final"),
                       pl.coalesce("error_c", "error").alias("_error"),
                       pl.format(f"{where} {{}}", c("row") + base).alias("_where"))
    n = j.height

    def col(name):
        return j.get_column(name).to_list()
    none = repeat(None, n)
    # producer_config only: its settings as a dict (the other operations have none).
    config: list = [None] * n
    cfg_rows = j.with_row_index("_r").filter(c("f") == "producer_config").select("_r", *_CONFIG)
    for r, *vals in cfg_rows.iter_rows():
        config[r] = {k: v for k, v in zip(_CONFIG, vals) if v is not None}
    # Op's fields in declaration order (traces/history.py): id, process, f, type, inv, comp,
    # end, topic, partition, key, value, offset, offsets, values, group, generation, final,
    # delivery, config, error, txn, isolation, end_offset, where, inv_wall, end_wall.
    ops = list(map(Op, col("id"), col("process"), col("f"), col("kind"), col("mono_ns"), col("_comp"),
                   col("mono_ns_c"), col("topic"), col("partition"), col("key"), col("value"),
                   col("m_offset"), col("m_offsets"), col("m_values"), col("group"), col("m_generation"),
                   col("_final"), col("delivery"), config, col("_error"), none, repeat(None, n),
                   repeat(None, n), col("_where"), col("wall_ns"), col("wall_ns_c")))
    return History(header=header, ops=ops)


def _dtype_holds(dt: pl.DataType, want: str) -> bool:
    """Whether every non-null value of a column of polars type `dt` reads back (to_list) as the
    Python type the reader wants for a field of Arrow type `want` (traces/history.py FIELDS)."""
    if dt == pl.Null:
        return True
    if want.startswith(("int", "uint")):
        return dt.is_integer()
    if want == "string":
        return dt in (pl.String, pl.Categorical) or isinstance(dt, pl.Enum)
    if want == "bool":
        return dt == pl.Boolean
    if want.startswith("list<"):
        inner = want[5:-1]
        return isinstance(dt, pl.List) and _dtype_holds(dt.inner, inner) and dt.inner != pl.Null
    return False


def fields_hold(ev: pl.DataFrame) -> bool:
    """Whether every row of `ev` (columns FIELDS; a null is an absent field) passes
    traces.history.check_event: the column types are the fields' (so each value has the
    Python type the reader wants), the required fields are present, types, operations and
    delivery modes are known, no offset is negative, and no list holds a null. Whole-column
    tests, no Python per row."""
    c = pl.col
    if any(n not in ev.columns or not _dtype_holds(ev.schema[n], FIELDS[n][1]) for n in FIELDS):
        return False
    if ev.height == 0:
        return True
    bad = pl.any_horizontal([c(n).is_null() for n in REQUIRED])
    bad = bad | ~c("type").cast(pl.String).is_in(list(TYPES)) | ~c("f").cast(pl.String).is_in(list(FS))
    bad = bad | (c("offset") < 0).fill_null(False)
    bad = bad | ~(c("delivery").cast(pl.String).is_in(list(DELIVERY_MODES)) | c("delivery").is_null())
    for n in ("offsets", "values"):
        if ev.schema[n] != pl.Null:
            bad = bad | c(n).list.eval(pl.element().is_null()).list.any().fill_null(False)
    if ev.schema["offsets"] != pl.Null:
        bad = bad | (c("offsets").list.min() < 0).fill_null(False)
    return not ev.select(bad.any()).item()


def c_row_in(rows: pl.Series) -> pl.Expr:
    return pl.col("_i").is_in(rows.implode())


# fetch(selection) -> the full events (run, _i, row and every schema column) that the
# selection (an expression over `run` and `_i`) picks: the oracle's input, asked only for
# flagged partitions or the cycle search, so the screens themselves never hold strings.
Fetch = Callable[[pl.Expr], pl.DataFrame]


@dataclass
class RunResult:
    run: int
    verdict: Verdict
    ops: int
    witness_ops: dict[int, Op] = field(default_factory=dict)   # every op some witness names


def judge(pd: Paired, fetch: Fetch, headers: dict[int, dict], deadline: float | None = None,
          cycle_max_ops: int = 200_000, where: str = "row", base: int = 1,
          clean: list | None = None) -> dict[int, RunResult]:
    """Checks every run of a paired frame, screens first: returns run -> RunResult (anomalies
    and witnesses are the oracle's, on the flagged partitions). With `clean` (a list), only runs
    with a flagged partition get a RunResult; the others' statuses are appended to `clean`
    as one frame (run, status), decided in columns: no Python per clean run (mining)."""
    sc = screen(pd, deadline)
    if clean is not None and sc.done:
        c = pl.col
        p = pd.ops.filter(c("pk").is_not_null() & (c("f") != "producer_config"))
        runs_f = set(pd.ops.filter(c("pk").is_in(pl.Series(sorted(sc.flagged), dtype=pl.Int64).implode()))
                     .get_column("run").unique().to_list())
        clean.append(clean_status(pd.ops, p, sc.counts, runs_f))
    return decide(sc, fetch, headers, deadline, cycle_max_ops, where, base,
                  only_flagged=clean is not None and sc.done)


def decide(sc: Screen, fetch: Fetch, headers: dict[int, dict], deadline: float | None = None,
           cycle_max_ops: int = 200_000, where: str = "row", base: int = 1,
           only_flagged: bool = False, fetch_flagged: Fetch | None = None,
           oracle_undecided: bool = False) -> dict[int, RunResult]:
    """Verdicts from a screen: the oracle on the flagged partitions' events (fetched by row),
    the oracle's cycle search where some partition is not linearizable, the screen's counts
    elsewhere. `fetch_flagged`, if given, fetches the flagged partitions' rows (`sc.rows`)
    instead of `fetch` (e.g. from columns the caller already decoded); `fetch` still serves
    the cycle search's whole runs. With `oracle_undecided`, the flagged partitions' undecided
    writes are the oracle's count, added to the screen's (which then counts the others only)."""
    c = pl.col
    done, flagged, counts = sc.done, sc.flagged, sc.counts
    stats = {r["run"]: r for r in sc.stats.iter_rows(named=True)}
    n_ops = {run: r["ops"] for run, r in stats.items()}
    cnt = {r["run"]: r for r in counts.iter_rows(named=True)}
    found: dict[int, dict[str, tuple[list, list]]] = {}
    histories: dict[int, History] = {}
    if flagged:
        for run, h in to_histories((fetch_flagged or fetch)(c_row_in(sc.rows)), headers, where, base).items():
            histories[run] = h
            idx = build(h)
            res = log_checks.check_log(idx) + [linearizable.check(idx), consumer.check(idx)]
            found[run] = {r.name: (r.anomalies, r.notes) for r in res}
            found[run]["_records"] = res[0].examined      # offsets of the flagged partitions
            if oracle_undecided:
                found[run]["_undecided"] = sum(log_checks.unseen_writes(p)[1] for p in idx.sorted_parts())
    # Runs that need the cross-partition cycle search (some partition not linearizable, the
    # run small enough): all their events as objects, in one pass.
    full: dict[int, History] = {}
    if done:
        # (not above cycle_max_ops operations: the search is not run there, below; building a
        # history of 10^6 objects for nothing cost 20 CPU-s)
        need = [run for run, fnd in found.items() if fnd.get("linearizable", ([], []))[0]
                and _graph_ops(stats.get(run)) <= cycle_max_ops]
        if need:
            full = to_histories(fetch(c("run").is_in(pl.Series(need, dtype=pl.Int64).implode())),
                                headers, where, base)
    out: dict[int, RunResult] = {}
    to_judge = sorted(found) if only_flagged else sorted(n_ops)
    for run in to_judge:
        st = stats.get(run, {"sends": 0, "polls": 0})
        k = cnt.get(run, {})
        fnd = found.get(run, {})
        if fnd.get("_undecided"):
            k = dict(k, undecided=(k.get("undecided") or 0) + fnd["_undecided"])
        examined = {"offsets": (k.get("records") or 0) + fnd.get("_records", 0), "writes": st["sends"], "polls": st["polls"],
                    "sends": st["sends"], "linearizable": st["sends"] + st["polls"],
                    "consumer-offsets": k.get("consumer_examined") or 0}
        results: list[CheckResult] = []
        for name in PER_PARTITION:
            if not done:
                results.append(finish(name, 0, [], unknown="time limit reached before this check",
                                      limited=True))
                continue
            anomalies, notes = fnd.get(name, ([], []))
            unknown = ""
            if name == "writes" and k.get("undecided"):
                unknown = (f"{k['undecided']} acknowledged write(s) were never read and no final "
                           "read began after them: lost or merely lagging cannot be told apart")
            results.append(finish(name, examined[name], anomalies, notes, unknown=unknown,
                                  limited=bool(unknown)))
        n = examined["linearizable"]
        lin = next(r for r in results if r.name == "linearizable")
        h = histories.get(run)
        if n == 0:
            results.append(finish("cycles", 0, []))      # nothing to examine, as the oracle says
        elif lin.status == "valid":
            r = finish("cycles", n, [])
            r.reason = "no cycle by locality: every partition is linearizable"
            results.append(r)
        elif lin.status == "unknown" or (deadline is not None and time.monotonic() > deadline):
            results.append(finish("cycles", 0, [], unknown="time limit reached before this check",
                                  limited=True))
        elif n > cycle_max_ops:
            results.append(finish("cycles", 0, [], unknown=f"graph not built ({n} ops > "
                                  f"{cycle_max_ops}) and some partition is not linearizable",
                                  limited=True))
        else:
            # Some partition is not linearizable and the run is small: the whole run as
            # objects, for the cross-partition graph (bounded by cycle_max_ops, as before).
            h = full[run]
            results.append(cycles.check(build(h), lin_ok=False, max_ops=cycle_max_ops,
                                        deadline=deadline))
        v = combine(results, n_ops[run])
        wit = {}
        if h is not None:
            by_id = h.by_id()
            wit = {i: by_id[i] for a in v.anomalies + v.notes for i in a.witness if i in by_id}
        out[run] = RunResult(run, v, n_ops[run], wit)
    return out


def _graph_ops(st: dict | None) -> int:
    """The operations the cycle search's graph would hold (sends and polls): the number the
    search is bounded by."""
    return (st or {}).get("sends", 0) + (st or {}).get("polls", 0)
