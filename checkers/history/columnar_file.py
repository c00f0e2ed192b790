"""One history file, end to end: what `check-history` runs. Reads the file through
traces/history_columnar.py, hands it to the columnar kernel (checkers/history/columnar.py) in
one piece or, above CHUNK_EVENTS events, in chunks of partitions, and falls back to the object
reader and checkers for input the kernel's screens do not accept (the object reader then names
the bad line or row). Reading is under the same deadline as checking.

Before the kernel, the fused screen (checkers/history/_fused.c) reads the decoded columns in
one C pass, slice by slice as they are decoded, with no polars frame work: a history in which
it flags nothing is decided from its counts (the same verdict the kernel gives: the kernel
would flag nothing either, and the checks' examined counts are the ones it computes); a
history it flags in some partitions goes to the kernel with those partitions' operations and
the settings operations (_kernel_on_flagged), the other partitions' counts from the screen;
a history-wide flag, or a flag in every partition, sends the whole history to the kernel as
before. The kernel's verdict and witnesses are then the answer. tests/test_fused.py checks
that the screen never misses a partition the checkers report an anomaly or a note in."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import polars as pl

from checkers.history.columnar import (CHECK_NAMES, LIMIT32, NEEDED, SETTINGS, SPILL_DROPS, Screen,
                                       TimeUp, _late, decide, encode, judge, pair, prepare, screen,
                                       unspill)
from checkers.history.result import Verdict, combine, finish
from traces.history import History, Op


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
    the line or row) and the object checkers. `screen_group_events` (check-history
    --low-memory): above CHUNK_EVENTS, the fused screen in groups of partitions of about that
    many events (see SCREEN_GROUP_EVENTS)."""
    from traces import history_columnar as hc
    try:
        header, src, where = hc.read(path, fmt, deadline, lazy=True)
    except hc.TimeUp:
        return FileCheck(_all_unknown("time limit reached while reading"), 0, {}, "columnar")
    except hc.NotColumnar:
        return _object_path(path, fmt, deadline, cycle_max_ops, "not plainly columnar")
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
            group_events = screen_group_events or SCREEN_GROUP_EVENTS
            k = min(SCREEN_GROUPS_MAX, -(-n_events // group_events)) if group_events else 1
            fr = grouped_screen(slices, k, deadline) if k > 1 else fused_screen(slices, deadline)
            if fr is not None and fr.clean:
                return fr.decide(header, deadline, f"columnar (fused screen, {-(-n_events // SLICE_EVENTS)} slices"
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
            # operations 123 k page faults -> 55 k, ~0.1 CPU-s: BENCHMARKS.md, seventh round).
            # A history with a flag is then decoded whole for the kernel (once more: ~0.5 CPU-s
            # per 10^6 operations, next to the kernel's seconds on any flagged history).
            slices = (hc.scan_parquet(str(path), None, off, SCREEN_SLICE_EVENTS)[1].select(*NEEDED).collect(
                          engine="streaming") for off in range(0, n_events, SCREEN_SLICE_EVENTS))
            fr, screened = (fused_screen(slices, deadline) if n_events else None), True
            if fr is not None and fr.clean:
                return fr.decide(header, deadline)
            if fr is None and deadline is not None and time.monotonic() > deadline:
                return FileCheck(_all_unknown("time limit reached while reading"), 0, {}, "columnar")
            raw = src.select(*NEEDED, "row").collect(engine="streaming")
        else:
            raw = src.select(*NEEDED, "row").collect()
    except (pl.exceptions.PolarsError, OSError):
        return _object_path(path, fmt, deadline, cycle_max_ops, "not plainly columnar")
    if deadline is not None and time.monotonic() > deadline:
        return FileCheck(_all_unknown("time limit reached while reading"), raw.height, {}, "columnar")
    if raw.height == 0:
        return _object_path(path, fmt, deadline, cycle_max_ops, "no events")
    if not screened:
        fr = fused_screen([raw], deadline)
    if fr is not None and fr.clean:
        return fr.decide(header, deadline)
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
        ev = _lean(raw.lazy().with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i")))
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


@dataclass
class Fused:
    """What the fused screen found: `why` is the history-wide reason to hand the history to
    the kernel (or ""), `flagged` the partitions it flags ((topic, partition, [rule, ...])),
    `counts` what the kernel's screens would count on a history with nothing flagged."""
    why: str
    flagged: list
    counts: dict

    @property
    def clean(self) -> bool:
        return not self.why and not self.flagged

    def decide(self, header: dict, deadline: float | None, engine: str = "columnar") -> FileCheck:
        """The verdict of a history with nothing flagged, as the kernel's `decide` gives it
        from its screen's counts (no object checker runs: nothing is flagged)."""
        k = self.counts
        sc = Screen(True, set(),
                    pl.DataFrame({"run": [0], "undecided": [k["undecided"]],
                                  "consumer_examined": [k["consumer_examined"]], "records": [k["records"]]}),
                    pl.DataFrame({"run": [0], "sends": [k["sends"]], "polls": [k["polls"]], "ops": [k["ops"]]}),
                    pl.Series("_i", [], pl.UInt32))
        (r,) = decide(sc, lambda sel: None, {0: header}, deadline).values()
        return FileCheck(r.verdict, r.ops, r.witness_ops, engine)


def _kernel_on_flagged(held: list[pl.DataFrame], fr: Fused, header: dict, full: pl.LazyFrame, where: str,
                       deadline: float | None, cycle_max_ops: int) -> FileCheck | None:
    """The kernel on the flagged partitions' operations and the history's settings operations
    (producers' configurations, assigns and subscribes: the groups, generations and modes the
    consumer rules consult; as a chunk of the chunked path has them), with the counts of the
    other partitions from the screen: the same verdict as the kernel on the whole history,
    whose screens are per partition. `held` holds the decoded columns, released once the
    subset is taken. None when the kernel's input screen flags a row (the caller then hands
    the history to the object reader, which names it or judges it; the screen hands such
    histories over whole, so only the kernel's own hash collisions and its bound on partition
    keys lead here)."""
    c = pl.col
    raw = held.pop()
    keys = pl.DataFrame({"topic": [t for t, _, _ in fr.flagged], "partition": [p for _, p, _ in fr.flagged]},
                        schema={"topic": pl.String, "partition": pl.Int32})
    inv = raw.lazy().filter(c("type") == "invoke")
    ids = pl.concat([inv.filter(c("f").is_in(SETTINGS)).select("id"),
                     inv.join(keys.lazy(), on=["topic", "partition"], how="semi").select("id")]).collect()
    sub = raw.lazy().filter(c("id").is_in(ids.get_column("id").implode()))
    ev = _lean(sub.with_columns(pl.lit(0, pl.Int64).alias("run"), c("row").alias("_i")))
    del raw, sub, inv, ids
    pd = pair(ev)
    del ev
    if pd.bad:
        return None
    sc = screen(pd, deadline)
    del pd
    flagged = {(t, p) for t, p, _ in fr.flagged}
    rest = [(n, u) for t, p, n, u in fr.counts["parts"] if (t, p) not in flagged]
    k = next(iter(sc.counts.iter_rows(named=True)), {})
    # records and undecided writes add up over partitions; the other counts are the
    # history's (consumer offsets examined: ok commits, and polls times at-most-once groups).
    counts = pl.DataFrame({"run": [0], "undecided": [(k.get("undecided") or 0) + sum(u for _, u in rest)],
                           "consumer_examined": [fr.counts["consumer_examined"]],
                           "records": [(k.get("records") or 0) + sum(n for n, _ in rest)]})
    stats = pl.DataFrame({"run": [0], "sends": [fr.counts["sends"]], "polls": [fr.counts["polls"]],
                          "ops": [fr.counts["ops"]]})
    base = 1 if where == "row" else 2
    (r,) = decide(Screen(sc.done, sc.flagged, counts, stats, sc.rows),
                  lambda sel: full.filter(sel).collect(), {0: header}, deadline, cycle_max_ops, where,
                  base).values()
    return FileCheck(r.verdict, r.ops, r.witness_ops, "columnar")


# Whether check_file runs the fused screen first (tests turn it off to drive the kernel alone).
FUSED_SCREEN = True


def fused_screen(frames, deadline: float | None = None) -> Fused | None:
    """The fused screen over `frames` (the events' NEEDED columns, slices in file order), or
    None when the time ran out, a frame is not of the schema's types, or FUSED_SCREEN is off."""
    if not FUSED_SCREEN:
        return None
    try:
        from checkers.history import _fused
    except ImportError as e:        # a checkout whose extensions were built before this one
        raise ImportError("checkers.history._fused (checkers/history/_fused.c) is not built: run "
                          "`pip install -e .` (make setup) or `python setup.py build_ext --inplace`") from e
    st = _fused.new()
    frames = iter(frames)
    try:
        while (df := next(frames, None)) is not None:
            # Each frame released before the next is decoded (its pages are then reused).
            cols = [df.get_column(n) for n in _fused.COLUMNS]
            del df
            _fused.feed(st, cols)
            del cols
            if deadline is not None and time.monotonic() > deadline:
                return None
    except (TypeError, ValueError, pl.exceptions.PolarsError, OSError):
        return None
    r = _fused.finish(st)
    return Fused(r["global"] or "", r["flagged"], r)


# Above SCREEN_GROUP_EVENTS events (when set) the fused screen runs in groups of partitions, so
# that its state (about 56 bytes per offset of the log: BENCHMARKS.md, seventh round) is
# bounded by a group's share of the log instead of by the whole log. At most SCREEN_GROUPS_MAX
# groups: each group's state still has the screen's table of 4 bytes per operation id of the
# history, and its dense layouts need ids within 8 times the group's events (_fused.c
# DENSE_SLACK); beyond that bound the groups grow with the history. Off (None) by default:
# routing and spilling the decoded columns through polars (a filter per group, an IPC write
# and read) made the whole check 3.0x dearer in CPU at 10^7 operations (4.2x at 2*10^7) for a
# peak of 515-546 MiB instead of 970-1,578 (BENCHMARKS.md, seventh round, last paragraph);
# 1 << 22 is the setting measured, which `check-history --low-memory` passes.
SCREEN_GROUP_EVENTS: int | None = None
SCREEN_GROUPS_MAX = 8
_ALL = 255      # a settings operation's events: in every group


def grouped_screen(frames, k: int, deadline: float | None = None) -> Fused | None:
    """The fused screen in `k` groups of partitions: one pass over `frames` (the NEEDED
    columns, slices in file order) writes each event to its group's spill files (Arrow IPC,
    uncompressed, in a temporary directory): an invoke by its (topic, partition), round robin
    in order of first appearance; a completion by its invoke's group (a table of one byte per
    operation id); a settings operation (producers' configurations, assigns, subscribes: the
    groups, generations and modes the consumer rules consult) to every group, as the kernel's
    chunked path has them. Then each group is screened with a state of its own, released
    before the next, and the results merged: every rule of the screen is per partition or
    reads only the settings, so the flags, counts and history-wide reasons are those of one
    pass, except for the reasons that compare events of different partitions (row fields,
    time order, invokes at one time in id order, an id invoked twice, ids too sparse), which
    the routing tests itself on the whole history. None as for fused_screen."""
    if not FUSED_SCREEN:
        return None
    import shutil
    import tempfile
    from checkers.history import _fused
    c = pl.col
    tmp = Path(tempfile.mkdtemp(prefix="kv-screen-"))
    try:
        files: list[list[Path]] = [[] for _ in range(k)]
        home = pl.Series("home", [], pl.UInt8)      # per id: 0 no invoke yet, group + 1, or _ALL
        keys: dict[tuple, int] = {}
        rows = n_settings = 0
        last_t, last_inv = None, None               # (mono_ns), (mono_ns, id) of the last invoke
        frames = iter(frames)
        while (df := next(frames, None)) is not None:
            if df.height == 0:
                continue
            rows += df.height
            if any(df.get_column(n).null_count() for n in ("id", "type", "process", "f", "mono_ns")):
                return Fused("a row lacks a required field", [], {})
            ids, t = df.get_column("id"), df.get_column("mono_ns")
            if ids.min() < 0 or ids.max() >= 8 * rows + (1 << 20):      # _fused.c's bound
                return Fused("ids too sparse for the dense layout", [], {})
            if (last_t is not None and t[0] < last_t) or not t.is_sorted():
                return Fused("events not in time order", [], {})
            last_t = t[-1]
            is_inv = c("type") == "invoke"
            inv = df.lazy().filter(is_inv).select("id", "f", "topic", "partition", "mono_ns").collect()
            if inv.height:
                it, iid = inv.get_column("mono_ns"), inv.get_column("id")
                if ((it == it.shift(1)) & (iid < iid.shift(1))).any() or (
                        last_inv is not None and it[0] == last_inv[0] and iid[0] < last_inv[1]):
                    return Fused("invokes at one time not in id order", [], {})
                last_inv = (it[-1], iid[-1])
                setting = inv.get_column("f").is_in(SETTINGS)
                n_settings += int(setting.sum())
                for tp in inv.filter(~setting).select("topic", "partition").unique(maintain_order=True).iter_rows():
                    if tp not in keys:
                        keys[tp] = len(keys) % k
                tab = pl.DataFrame({"topic": [tp[0] for tp in keys], "partition": [tp[1] for tp in keys],
                                    "g": list(keys.values())},
                                   schema={"topic": inv.schema["topic"], "partition": inv.schema["partition"],
                                           "g": pl.UInt8})
                g = (inv.select("topic", "partition").join(tab, on=["topic", "partition"], how="left",
                                                          maintain_order="left")
                     .get_column("g").fill_null(0) + 1).cast(pl.UInt8)
                g = pl.select(pl.when(setting).then(pl.lit(_ALL, pl.UInt8)).otherwise(g)).to_series()
                top = iid.max()
                if top >= home.len():
                    home = home.extend_constant(0, max(top + 1, 2 * home.len()) - home.len())
                if iid.n_unique() != iid.len() or (home.gather(iid) != 0).any():
                    return Fused("an id invoked twice", [], {})
                home.scatter(iid, g)
            del inv
            # An event whose id has no invoke yet goes to group 0, whose screen flags it.
            idx = ids.clip(upper_bound=max(home.len() - 1, 0))
            g = home.gather(idx) if home.len() else pl.zeros(df.height, pl.UInt8, eager=True)
            g = pl.select(pl.when(ids < home.len()).then(g).otherwise(pl.lit(0, pl.UInt8))).to_series()
            for j in range(k):
                part = df.filter(g.is_in([j + 1, _ALL] + ([0] if j == 0 else [])))
                if part.height:
                    f = tmp / f"g{j}-{len(files[j])}.arrow"
                    part.write_ipc(f, compression="uncompressed")
                    files[j].append(f)
                del part
            del df, g, ids, t
            if deadline is not None and time.monotonic() > deadline:
                return None
        del home
        merged, groups = None, 0
        flags: dict[tuple, list] = {}
        parts: dict[tuple, tuple] = {}
        for j in range(k):
            if not files[j]:
                continue
            groups += 1
            st = _fused.new()
            for f in files[j]:
                df = pl.read_ipc(f)
                cols = [df.get_column(n) for n in _fused.COLUMNS]
                del df
                _fused.feed(st, cols)
                del cols
                f.unlink()
                if deadline is not None and time.monotonic() > deadline:
                    return None
            r = _fused.finish(st)
            del st
            if r["global"]:
                return Fused(r["global"], [], r)
            # A partition an assign names is known to every group (with no log in the groups
            # that do not own it): its counts and flags are the sum and union over groups.
            for t, p, why in r["flagged"]:
                flags.setdefault((t, p), [])
                flags[t, p] += [w for w in why if w not in flags[t, p]]
            for t, p, n, u in r["parts"]:
                a, b = parts.get((t, p), (0, 0))
                parts[t, p] = (a + n, b + u)
            if merged is None:
                merged = r
            else:
                merged["pool"] = max(merged["pool"], r["pool"])
                for n in ("ops", "sends", "polls", "records", "undecided", "consumer_examined"):
                    merged[n] += r[n]
        if merged is None:
            return None
        merged["flagged"] = [(t, p, why) for (t, p), why in flags.items()]
        merged["parts"] = [(t, p, n, u) for (t, p), (n, u) in parts.items()]
        # Settings operations were screened in every group: counted once.
        merged["ops"] -= (groups - 1) * n_settings
        return Fused("", merged["flagged"], merged)
    except (TypeError, ValueError, pl.exceptions.PolarsError, OSError):
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _lean_plan(part: pl.LazyFrame) -> pl.LazyFrame:
    return prepare(encode(part.select("run", "_i", *NEEDED)))


lean_plan = _lean_plan   # public: benchmarks/kernel_ab.py times it


def _lean(part: pl.LazyFrame) -> pl.DataFrame:
    """The needed columns decoded and the lean ones derived in one streaming plan. On one core
    this costs the same CPU as decoding first and deriving in memory (polars 2.1, measured
    side by side at 10^6 operations; the in-memory engine's one fused plan was 1.7x dearer),
    and the streaming engine can share the scan with other outputs (check_file's one-history
    test). It keeps row order, which pairing relies on only for speed (`_i` carries the order)."""
    return _lean_plan(part).collect(engine="streaming")


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
            _late(deadline)
            ev = _lean(part(off, SLICE_EVENTS))
            if ev.get_column("bad").any():
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
            _late(deadline)
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


def _object_path(path, fmt, deadline, cycle_max_ops, why) -> FileCheck:
    from checkers.history.run import check_history
    from traces.history import load
    h = load(path, fmt)          # raises HistoryError on bad input: exit 3 with the place
    v = check_history(h, cycle_max_ops=cycle_max_ops, deadline=deadline)
    by_id = h.by_id()
    wit = {i: by_id[i] for a in v.anomalies + v.notes for i in a.witness if i in by_id}
    return FileCheck(v, len(h.ops), wit, f"object: {why}", h)
