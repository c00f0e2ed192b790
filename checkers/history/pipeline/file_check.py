"""One history file, end to end: what `check-history` runs. Entry point: `check_file`.

The pipeline for one file: reads it through traces/history_columnar.py under the same deadline
as checking; then the screens, cheapest first:
1. the fused C screen (screens/fused.py over screens/_fused.c) reads the decoded columns in one
   pass, slice by slice as they are decoded: a history in which it flags nothing is decided
   from its counts (`decide_unflagged`: the verdict the polars screens would give, as they would
   flag nothing either);
2. a history it flags in some partitions goes straight to the oracle with those partitions'
   operations and the settings operations (`_kernel_on_flagged`), the other partitions' counts
   from the fused screen; a history-wide flag, or a flag in every partition, sends the whole
   history to the polars screens;
3. what they flag goes to the oracle (checkers/history/oracle) through pipeline/judge.py, whose
   verdict and witnesses are then the answer.
Above CHUNK_EVENTS events the polars screens run in chunks of partitions (`_check_chunked`: one
read in slices, spilled per chunk), so memory is bounded by a chunk. Input the screens do not
accept goes to the object reader (which names the bad line or row) and the oracle
(`_object_path`). tests/test_fused.py and tests/test_history_columnar.py check that the verdicts
are the oracle's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import polars as pl

from checkers.history.oracle.check import check_history
from checkers.history.pipeline.judge import decide, judge
from checkers.history.result import CHECK_NAMES, Verdict, combine, finish
from checkers.history.screens import fused
from checkers.history.screens.cycles import acyclic_nodes
from checkers.history.screens.columnar import (LIMIT32, NEEDED, SETTINGS, SPILL_DROPS, Screen, TimeUp,
                                               lean, pair, raise_if_late, screen, unspill)
from checkers.history.screens.fused import Fused, fused_screen, grouped_screen
from traces.history import FIELDS, TXN_VERSION, VERSION, History, Op


@dataclass
class FileCheck:
    verdict: Verdict
    ops: int
    witness_ops: dict[int, Op]
    engine: str                          # "columnar", or "object: <why>"
    history: History | None = None       # set when the object reader was used


def _all_unknown(why: str) -> Verdict:
    return combine([finish(n, 0, [], unknown=why, limited=True) for n in CHECK_NAMES], 0)


def check_file(path: str, fmt: str | None = None, deadline: float | None = None,
               cycle_max_ops: int = 200_000, screen_group_events: int | None = None) -> FileCheck:
    """Reads and checks one history under one deadline (reading included). Input the
    columnar screens do not accept goes to the object reader (which raises HistoryError with
    the line or row) and the oracle. `screen_group_events` (check-history
    --low-memory): above CHUNK_EVENTS, the fused screen in groups of partitions of about that
    many events (see screens/fused.py SCREEN_GROUP_EVENTS)."""
    from traces import history_columnar as hc
    if _version(path, fmt) >= TXN_VERSION:
        return _object_path(path, fmt, deadline, cycle_max_ops, V2_WHY)
    try:
        header, src, where = hc.read(path, fmt, deadline, lazy=True)
    except hc.TimeUp:
        return FileCheck(_all_unknown("time limit reached while reading"), 0, {}, "columnar")
    except hc.NotColumnar:
        return _object_path(path, fmt, deadline, cycle_max_ops, "not plainly columnar")
    why = _oracle_only(header, src, path, where)
    if why:
        return _object_path(path, fmt, deadline, cycle_max_ops, why)
    # `_i`: the event's position in the file; `row` is for messages. Only the lean columns
    # are decoded (Parquet: scanned); the full rows are fetched again for flagged partitions.
    full = src.with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i"))
    screened = False
    try:
        n_events = full.select(pl.len()).collect().item()
        if n_events > CHUNK_EVENTS and where == "row" and not hc.one_trace(src):
            return _object_path(path, fmt, deadline, cycle_max_ops, "several histories in one file")
        if n_events > CHUNK_EVENTS:
            # The fused screen over slices, each decoded and dropped in turn.
            if where == "row":
                slices = (hc.scan_parquet(str(path), None, off, SLICE_EVENTS)[1].select(*NEEDED).collect()
                          for off in range(0, n_events, SLICE_EVENTS))
            else:
                slices = (src.slice(off, SLICE_EVENTS).select(*NEEDED).collect()
                          for off in range(0, n_events, SLICE_EVENTS))
            group_events = screen_group_events or fused.SCREEN_GROUP_EVENTS
            k = min(fused.SCREEN_GROUPS_MAX, -(-n_events // group_events)) if group_events else 1
            fr = grouped_screen(slices, k, deadline) if k > 1 else fused_screen(slices, deadline)
            if fr is not None and fr.counts.get("evidence"):
                return _object_path(path, fmt, deadline, cycle_max_ops, EVIDENCE_WHY)
            if fr is not None and fr.clean:
                return decide_unflagged(fr, header, deadline, f"columnar (fused screen, {-(-n_events // SLICE_EVENTS)} slices"
                                                   + (f", {k} groups)" if k > 1 else ")"))
            if fr is None and deadline is not None and time.monotonic() > deadline:
                return FileCheck(_all_unknown("time limit reached while reading"), 0, {}, "columnar")
            if where == "row":      # Parquet: each slice is its own scan (see hc.scan_parquet)
                def part(off, n):
                    lf = hc.scan_parquet(str(path), None, off, n)[1]
                    return lf.with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i"))
            else:
                def part(off, n):
                    return full.slice(off, n)
            return _check_chunked(path, fmt, full, part, header, where, n_events, deadline, cycle_max_ops)
        if where == "row" and "trace_id" in pl.read_parquet_schema(str(path)):
            # One scan feeds both the decoded columns and the one-history test.
            raw, tids = pl.collect_all([src.select(*NEEDED, "row"), src.select(pl.col("trace_id").n_unique())],
                                       engine="streaming")
            if tids.item() > 1:
                return _object_path(path, fmt, deadline, cycle_max_ops, "several histories in one file")
        elif where == "row":
            # No trace_id column (one history per file, the header's: traces.history
            # parquet_write_options): nothing to test; building and counting a column of the
            # header's id for every row cost 0.03-0.06 CPU-s per 10^6 operations.
            # The screen first, over slices each decoded and released in turn: the decoded
            # columns are some 200 bytes an event (string views of 16 bytes, null or not), and
            # a slice's pages are reused by the next instead of faulted in fresh (at 10^6
            # operations 123 k page faults -> 55 k, ~0.1 CPU-s: docs/benchmarks/histories.md).
            # A history with a flag is then decoded whole for the kernel (once more: ~0.5 CPU-s
            # per 10^6 operations, next to the kernel's seconds on any flagged history).
            slices = (hc.scan_parquet(str(path), None, off, SCREEN_SLICE_EVENTS)[1].select(*NEEDED).collect(
                          engine="streaming") for off in range(0, n_events, SCREEN_SLICE_EVENTS))
            fr, screened = (fused_screen(slices, deadline) if n_events else None), True
            if fr is not None and fr.counts.get("evidence"):
                return _object_path(path, fmt, deadline, cycle_max_ops, EVIDENCE_WHY)
            if fr is not None and fr.clean:
                return decide_unflagged(fr, header, deadline)
            if fr is None and deadline is not None and time.monotonic() > deadline:
                return FileCheck(_all_unknown("time limit reached while reading"), 0, {}, "columnar")
            if fr is not None and not fr.why and len(fr.flagged) < len(fr.counts["parts"]):
                # Some partitions flagged: only their operations and the settings are
                # decoded (every field, for the oracle), by two filtered scans of the file
                # instead of decoding the whole history.
                r = _kernel_on_flagged([src], fr, header, full, where, deadline, cycle_max_ops)
                return r if r is not None else _object_path(path, fmt, deadline, cycle_max_ops,
                                                             "the input screen flagged rows")
            # Every field (not only the screens' NEEDED): the flagged partitions' operations
            # are then taken from these columns for the oracle, not scanned from the file again.
            raw = src.select(*FIELDS, "row").collect(engine="streaming")
        else:
            raw = src.select(*FIELDS, "row").collect()
    except (pl.exceptions.PolarsError, OSError):
        return _object_path(path, fmt, deadline, cycle_max_ops, "not plainly columnar")
    if deadline is not None and time.monotonic() > deadline:
        return FileCheck(_all_unknown("time limit reached while reading"), raw.height, {}, "columnar")
    if raw.height == 0:
        return _object_path(path, fmt, deadline, cycle_max_ops, "no events")
    if not screened:
        fr = fused_screen([raw], deadline)
    if (fr.counts.get("evidence") if fr is not None else _evidence(raw)):
        return _object_path(path, fmt, deadline, cycle_max_ops, EVIDENCE_WHY)
    if fr is not None and fr.clean:
        return decide_unflagged(fr, header, deadline)
    if deadline is not None and time.monotonic() > deadline:
        return FileCheck(_all_unknown("time limit reached while reading"), raw.height, {}, "columnar")
    if fr is not None and not fr.why and len(fr.flagged) < len(fr.counts["parts"]):
        held = [raw]            # handed over, not kept (as to pair below)
        del raw
        r = _kernel_on_flagged(held, fr, header, full, where, deadline, cycle_max_ops)
        return r if r is not None else _object_path(path, fmt, deadline, cycle_max_ops,
                                                     "the input screen flagged rows")
    # Flagged history-wide (or every partition): the kernel on the whole history, from the
    # columns already decoded.
    try:
        ev = lean(raw.lazy().with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i")))
    except pl.exceptions.PolarsError:
        return _object_path(path, fmt, deadline, cycle_max_ops, "not plainly columnar")
    del raw
    # Handed over, not kept: pair releases the events once it has taken what it needs.
    held = [ev]
    del ev
    pd = pair(held.pop())
    if pd.bad:
        return _object_path(path, fmt, deadline, cycle_max_ops, "the input screen flagged rows")
    base = 1 if where == "row" else 2
    (r,) = judge(pd, lambda sel: full.filter(sel).collect(), {0: header}, deadline, cycle_max_ops,
                 where, base).values()
    return FileCheck(r.verdict, r.ops, r.witness_ops, "columnar")


# Evidence the screens do not use yet, which only the oracle judges: the records of polls that
# ended info or fail, and the offsets of unacknowledged sends (of failed sends: which the
# object reader refuses, naming the line). A history with any goes to the
# oracle whole (as does any history of format version 2: transactions and assignment sets).
# The fused screen counts them as it reads (its "evidence" count); _EVIDENCE is the same test
# on decoded columns, for when the fused screen did not run.
EVIDENCE_WHY = "records of info/fail polls or offsets of info sends (judged by the oracle)"
_EVIDENCE = (((pl.col("f") == "send") & pl.col("type").is_in(["info", "fail"]) & pl.col("offset").is_not_null())
             | ((pl.col("f") == "poll") & pl.col("type").is_in(["info", "fail"])
                & pl.col("offsets").is_not_null()))


def _evidence(df: pl.DataFrame) -> bool:
    return bool(df.select(_EVIDENCE.any()).item())


V2_WHY = "format version 2: transactions and assignment sets are judged by the oracle"


def _version(path: str, fmt: str | None) -> int:
    """The header's format version, from the first line or the Parquet footer (1 if it cannot
    be told here: the readers then say what is wrong)."""
    import json
    from traces.history import PARQUET_META_KEY, detect_format
    try:
        if detect_format(path, fmt) == "parquet":
            h = json.loads(pl.read_parquet_metadata(str(path))[PARQUET_META_KEY.decode()])
        else:
            with open(path, "rb") as f:
                h = json.loads(f.readline())
        v = h.get("version", VERSION)
        return v if isinstance(v, int) else VERSION
    except (OSError, ValueError, KeyError, AttributeError, pl.exceptions.PolarsError):
        return VERSION


def _oracle_only(header: dict, src: pl.LazyFrame, path: str, where: str) -> str:
    """Why the history goes to the oracle whole before any screen, or "": format version 2
    (transactions and assignment sets, which the screens do not know; `_version` usually said
    so before reading). Version-2 fields in a version-1 file never get here: the columnar
    readers' schema is version 1's, so such a file is not plainly columnar and the object
    reader names the line or row."""
    if header.get("version", VERSION) >= TXN_VERSION:
        return V2_WHY
    return ""


def decide_unflagged(fr: Fused, header: dict, deadline: float | None,
                     engine: str = "columnar") -> FileCheck:
    """The verdict of a history the fused screen flags nothing in, as pipeline.judge's `decide`
    gives it from the polars screens' counts (the oracle does not run: nothing is flagged)."""
    k = fr.counts
    sc = Screen(True, set(),
                pl.DataFrame({"run": [0], "undecided": [k["undecided"]],
                              "consumer_examined": [k["consumer_examined"]], "records": [k["records"]]}),
                pl.DataFrame({"run": [0], "sends": [k["sends"]], "polls": [k["polls"]], "ops": [k["ops"]]}),
                pl.Series("_i", [], pl.UInt32))
    (r,) = decide(sc, lambda sel: None, {0: header}, deadline).values()
    return FileCheck(r.verdict, r.ops, r.witness_ops, engine)


def _kernel_on_flagged(held: list[pl.DataFrame | pl.LazyFrame], fr: Fused, header: dict, full: pl.LazyFrame,
                       where: str, deadline: float | None, cycle_max_ops: int) -> FileCheck | None:
    """The oracle on the partitions the fused screen flags, with the history's settings
    operations (producers' configurations, assigns and subscribes: the groups, generations
    and modes the consumer rules consult; as a chunk of the chunked path has them), and the
    counts of the other partitions from the fused screen: the same verdict as the oracle on
    the whole history, whose rules are per partition (the cross-partition cycle search, when
    it runs, reads the whole history: pipeline/judge.py). The flagged partitions' undecided
    writes are the oracle's own count. Their operations are taken from `held` (the decoded
    columns, released once the subset is taken) when it has every field, else fetched from
    the file. The polars screens do not run again on the flagged partitions: the oracle judges
    every flagged partition (a partition the fused screen flags but the polars screens would
    pass costs the oracle's time, and gets the oracle's verdict, which is the reference).
    `held` may instead hold the file's lazy frame (Parquet): the subset is then scanned from
    it, the ids first (a few columns), then every field of those ids' events only."""
    c = pl.col
    raw = held.pop()
    lazy = isinstance(raw, pl.LazyFrame)
    engine = "streaming" if lazy else "auto"
    src = raw.select(*FIELDS, "row") if lazy else raw.lazy()
    keys = pl.DataFrame({"topic": [t for t, _, _ in fr.flagged], "partition": [p for _, p, _ in fr.flagged]},
                        schema={"topic": pl.String, "partition": pl.Int32})
    inv = src.select("id", "type", "f", "topic", "partition").filter(c("type") == "invoke")
    ids = (inv.filter(c("f").is_in(SETTINGS) | pl.struct("topic", "partition").is_in(keys.to_struct().implode()))
           .select("id").collect(engine=engine))
    sub = (src.filter(c("id").is_in(ids.get_column("id").implode()))
           .with_columns(pl.lit(0, pl.Int64).alias("run"), c("row").alias("_i")).collect(engine=engine))
    del raw, src, inv, ids
    flagged = {(t, p) for t, p, _ in fr.flagged}
    rest = [(n, u) for t, p, n, u in fr.counts["parts"] if (t, p) not in flagged]
    # records and undecided writes add up over the unflagged partitions (the flagged ones':
    # the oracle's); the other counts are the history's (consumer offsets examined: ok
    # commits, and polls times at-most-once groups).
    counts = pl.DataFrame({"run": [0], "undecided": [sum(u for _, u in rest)],
                           "consumer_examined": [fr.counts["consumer_examined"]],
                           "records": [sum(n for n, _ in rest)]})
    stats = pl.DataFrame({"run": [0], "sends": [fr.counts["sends"]], "polls": [fr.counts["polls"]],
                          "ops": [fr.counts["ops"]]})
    base = 1 if where == "row" else 2
    have_all = all(n in sub.columns for n in FIELDS)
    rows = sub.get_column("_i")
    done = deadline is None or time.monotonic() <= deadline
    (r,) = decide(Screen(done, {0}, counts, stats, rows),
                  lambda sel: full.filter(sel).collect(), {0: header}, deadline, cycle_max_ops, where,
                  base, fetch_flagged=(lambda sel: sub.filter(sel)) if have_all else None,
                  oracle_undecided=True).values()
    return FileCheck(r.verdict, r.ops, r.witness_ops, "columnar")


# Histories of more events than this are checked in chunks of partitions, so that memory is
# bounded by a chunk (plus 2 bytes per operation id while reading, or 17 bytes per operation when
# ids are sparse) instead of by the history. One partition is never split: a history whose
# events are all in one partition needs that partition's memory.
CHUNK_EVENTS = 2_500_000
SLICE_EVENTS = 1 << 20          # events decoded at a time while sorting events into chunks
SCREEN_SLICE_EVENTS = 1 << 19   # events decoded at a time for the screen (up to CHUNK_EVENTS)
# Ids below DENSE_IDS_PER_EVENT per event plus DENSE_MARGIN are routed by a dense table
# indexed by id; sparser ids by a join.
DENSE_IDS_PER_EVENT = 4
DENSE_MARGIN = 1 << 16


class _Fallback(Exception):
    """The chunked screen found a reader rule broken: the object reader will name the row."""


class _DenseRouter:
    """Each event's chunk, for ids in [0, size): a table of (invoke's chunk + 1) indexed by id,
    2 bytes per id, so a completion finds its invoke's chunk by one gather (no join). An id
    invoked twice is caught here, across slices."""

    def __init__(self, size: int):
        self.home = pl.zeros(size, pl.UInt16, eager=True)

    def route(self, ev: pl.DataFrame, home: pl.Expr) -> pl.Series:
        c = pl.col
        inv = ev.lazy().filter(c("type") == "invoke").select("id", home.alias("chunk")).collect()
        ids = inv.get_column("id")
        if ids.n_unique() != ids.len() or (self.home.gather(ids) != 0).any():
            raise _Fallback()           # an id invoked twice: the object reader names it
        self.home.scatter(ids, (inv.get_column("chunk") + 1).cast(pl.UInt16))
        # An event whose id has no invoke yet (a completion first: the pairing screen of chunk
        # 0 flags it) goes to chunk 0.
        return (self.home.gather(ev.get_column("id")).cast(pl.Int64) - 1).clip(lower_bound=0)

    def done(self) -> None:
        pass


class _JoinRouter:
    """Each event's chunk by joining completions with the invokes still awaiting one (ids too
    sparse for a table): 9 bytes per pending operation and 8 per invoke for the twice-invoked
    test at the end."""

    def __init__(self):
        self.pending = pl.DataFrame(schema={"id": pl.Int64, "chunk": pl.Int64})
        self.ids: list[pl.Series] = []

    def route(self, ev: pl.DataFrame, home: pl.Expr) -> pl.Series:
        c = pl.col
        inv = ev.lazy().filter(c("type") == "invoke").select("id", home.alias("chunk")).collect()
        self.ids.append(inv.get_column("id"))
        known = pl.concat([self.pending, inv])
        comp = ev.lazy().filter(c("type") != "invoke").select("id").collect()
        self.pending = known.join(comp, on="id", how="anti")
        # Invokes appear once in `known` (twice-invoked ids are refused in `done`).
        return (ev.select("id").join(known.unique("id", keep="first"), on="id", how="left",
                                     maintain_order="left")
                .get_column("chunk").fill_null(0))

    def done(self) -> None:
        every = pl.concat(self.ids) if self.ids else pl.Series("id", [], pl.Int64)
        if every.n_unique() != every.len():
            raise _Fallback()
        self.ids = []


def _check_chunked(path, fmt, full: pl.LazyFrame, part: Callable[[int, int], pl.LazyFrame],
                   header: dict, where: str, n_events: int,
                   deadline: float | None, cycle_max_ops: int) -> FileCheck:
    """Pass 1 reads the file once, a slice at a time, and writes each event's lean row to its
    chunk's spill file (Arrow IPC, uncompressed, in a temporary directory): an invoke by its
    topic-partition, a completion by its invoke's (completions carry no partition; their
    invokes come earlier in a valid file). Pass 2 pairs and screens one chunk at a time with
    the history-wide topic codes and settings operations (producers' configurations, assigns
    and subscribes), and merges the screens."""
    import shutil
    import tempfile
    c = pl.col
    k = -(-n_events // CHUNK_EVENTS)
    tmp = Path(tempfile.mkdtemp(prefix="kv-chunks-"))
    try:
        files: dict[int, list[Path]] = {i: [] for i in range(k)}
        side, codes, pmax = [], set(), 0
        top = full.select(c("id").max()).collect(engine="streaming").item()
        dense = top is not None and 0 <= top < DENSE_IDS_PER_EVENT * n_events + DENSE_MARGIN
        router = _DenseRouter(top + 1) if dense else _JoinRouter()
        home = ((c("tc").fill_null(0) % 1_000_003).cast(pl.Int64) * 131
                + c("partition").fill_null(0).cast(pl.Int64)) % k
        for n, off in enumerate(range(0, n_events, SLICE_EVENTS)):
            raise_if_late(deadline)
            ev = lean(part(off, SLICE_EVENTS))
            if ev.get_column("bad").any() or _evidence(ev):
                raise _Fallback()
            codes |= set(ev.get_column("tc").drop_nulls().unique().to_list())
            pmax = max(pmax, (ev.get_column("partition").max() or 0) + 1)
            ev = ev.with_columns(router.route(ev, home).alias("chunk"))
            side.append(ev.filter(c("f").is_in(SETTINGS)).drop("chunk"))
            ev = ev.drop(*SPILL_DROPS)
            for (i,), rows in ev.partition_by("chunk", as_dict=True, include_key=False).items():
                f = tmp / f"c{i}-{n}.arrow"
                rows.write_ipc(f, compression="uncompressed")
                files[i].append(f)
            del ev
        router.done()
        del router
        codes_l = sorted(codes)
        settings = pair(pl.concat(side), codes_l, pmax)
        if settings.bad:
            raise _Fallback()
        assigns = settings.ops.filter(c("f").is_in(["assign", "subscribe"]))
        screens = []
        for i in range(k):
            raise_if_late(deadline)
            if not files[i]:
                continue
            pd = pair(unspill(pl.concat([pl.read_ipc(f) for f in files[i]])), codes_l, pmax)
            if pd.bad:
                raise _Fallback()
            screens.append(screen(pd, deadline, assigns))
            del pd
        sc = Screen.merge(screens)
        if sc.flagged:       # the settings of the run go with any flagged partition
            sc.rows = pl.concat([sc.rows, settings.ops.get_column("inv_row"),
                                 settings.ops.get_column("comp_row").drop_nulls()]).unique().sort()
    except _Fallback:
        shutil.rmtree(tmp, ignore_errors=True)
        return _object_path(path, fmt, deadline, cycle_max_ops, "the input screen flagged rows")
    except TimeUp:
        shutil.rmtree(tmp, ignore_errors=True)
        return FileCheck(_all_unknown("time limit reached while reading"), 0, {}, "columnar")
    shutil.rmtree(tmp, ignore_errors=True)
    base = 1 if where == "row" else 2
    (r,) = decide(sc, lambda sel: full.filter(sel).collect(), {0: header}, deadline, cycle_max_ops,
                  where, base).values()
    return FileCheck(r.verdict, r.ops, r.witness_ops, f"columnar ({k} chunks)")


def check_jepsen_file(path: str, deadline: float | None = None, cycle_max_ops: int = 200_000,
                      producer_config: dict | None = None,
                      isolation: str = "read_committed") -> FileCheck:
    """A Jepsen Kafka history.edn, read streaming into format version 2 (traces/history_jepsen.py)
    and judged by the oracle (the screens do not know transactions yet)."""
    from traces import history_jepsen
    h = history_jepsen.load(path, producer_config, isolation)   # HistoryError: exit 3
    return _judged(h, deadline, cycle_max_ops, "object: Jepsen history (format version 2)")


def _object_path(path, fmt, deadline, cycle_max_ops, why) -> FileCheck:
    from traces.history import load
    h = load(path, fmt)          # raises HistoryError on bad input: exit 3 with the place
    return _judged(h, deadline, cycle_max_ops, f"object: {why}")


def _judged(h: History, deadline, cycle_max_ops, engine: str) -> FileCheck:
    v = check_history(h, cycle_max_ops=cycle_max_ops, deadline=deadline, acyclic=acyclic_nodes)
    by_id = h.by_id()
    wit = {i: by_id[i] for a in v.anomalies + v.notes for i in a.witness if i in by_id}
    return FileCheck(v, len(h.ops), wit, engine, h)
