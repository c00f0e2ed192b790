"""The polars screen: the per-partition history rules over Arrow/polars frames, as whole-column
predicates that flag partitions, for one history (`check-history`) or for many runs at once
(`kafkaverify mine`), with no Python loop per row. A screen decides no anomaly: a flag means
"the oracle must look" (checkers/history/oracle); the pipeline (checkers/history/pipeline)
joins the two.

Shape of the work (each step is whole-column polars, or a one-pass scan in C over the same
Arrow columns where polars would sort or join: `_scan`, checkers/history/screens/_scan.c;
grouping keys always include `trace_id`, so a frame may hold any number of runs):
1. `encode` and `prepare` (together `lean_plan`): events to an encoded frame (enums, 64-bit
   hashes of topics, groups and values; the Spark job builds the same frame in the JVM with
   xxhash64), plus the poll-list summaries and the reader's row rules. The screens never hold
   strings.
2. `pair`: invokes joined with their completions into one row per operation, under the rules
   of traces/history.py's reader as column predicates (required fields, known types, ids
   paired once and in order, completions that restate nothing, ok sends with offsets, unique
   values per partition, no negative offsets). A run that fails any of them is marked bad
   (`Paired.bad`): the object reader, whose HistoryError names the row, must read it.
3. `flag_partitions` / `screen`: for every rule of the oracle's log_checks / linearizable /
   consumer, a predicate that is true for every partition with an anomaly of that rule (it may
   also be true for a few without). A `Screen` holds the flagged partitions, the counts the
   verdicts of the clean ones need, and the rows of the flagged ones; screens of disjoint
   partition sets merge by addition.
4. `screen_runs` / `clean_status`: the statuses of runs with nothing flagged, decided in
   columns (mining).

The screen's one duty is to never miss: every partition in which the oracle reports an anomaly
or a note is flagged (tests/test_history_columnar.py checks it against the oracle). The cost
is linear in events.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

import polars as pl

from traces.history import (ALWAYS_OWN, DELIVERY_MODES, FIELDS, FS, INVOKE_NEEDS, REQUIRED,
                            RESULT_FIELDS, TXN_FS, TYPES, V2_FIELDS)

def _scan_missing(e: ImportError) -> str:
    """Why the compiled scans cannot be imported, and what to do: a checkout never built, or a
    Spark executor whose Python cannot load the module built for the driver's."""
    import glob
    import sys
    import sysconfig
    here = os.path.dirname(os.path.abspath(__file__))
    tag = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    shipped = [p for d in sys.path if d and os.path.isdir(d) and not d.endswith(".zip")
               for p in glob.glob(os.path.join(d, "_scan.*.so"))]
    if os.path.isfile(__file__) and not shipped:
        return ("checkers.history.screens._scan (checkers/history/screens/_scan.c) is not built: run "
                "`pip install -e .` (make setup) or `python setup.py build_ext --inplace`; "
                "it needs a C compiler and Python's headers (make system-deps)"
                f" [{here}: {e}]")
    return (f"the compiled scans shipped to this Spark executor ({', '.join(map(os.path.basename, shipped)) or 'none'}) "
            f"cannot be loaded by its Python {sys.version_info[0]}.{sys.version_info[1]} (which needs "
            f"_scan{tag}): executors must run the driver's Python version on the same platform "
            f"(set PYSPARK_PYTHON); {e}")


try:
    from checkers.history.screens import _scan
except ImportError as e:
    try:
        # On a Spark executor the packages come as a zip (spark_job._ship), from which no
        # extension module can be imported; the built file is shipped to a directory on the
        # executor's path, as a module of its own.
        import _scan  # type: ignore[no-redef]
    except ImportError:
        _scan = None
    if _scan is None or getattr(_scan, "__name__", "") != "checkers.history.screens._scan":
        raise ImportError(_scan_missing(e)) from e


def scans_file() -> str:
    """The built file of the compiled scans: what the Spark job ships to its executors, which
    cannot import an extension module from the packages' zip (spark_job._ship)."""
    return _scan.__file__


T = "trace_id"
BIG = 2**62                      # "never", for a time (an offset nobody read)
LIMIT32 = 2**32
CONFIG = ("retries", "max_in_flight", "idempotence", "acks")


class TimeUp(Exception):
    """The deadline passed inside a screen; the caller reports the unfinished checks unknown."""


def raise_if_late(deadline: float | None) -> None:
    """Raises TimeUp once the deadline (time.monotonic()) has passed."""
    if deadline is not None and time.monotonic() > deadline:
        raise TimeUp()


def _runs_of(df: pl.DataFrame, cond: pl.Expr) -> set[int]:
    return set(df.select("run", cond.alias("_b")).filter(pl.col("_b")).get_column("run").unique().to_list())


def _by(df: pl.DataFrame, key: str) -> pl.DataFrame:
    """`df` sorted by `key` and flagged so: joins on two flagged keys merge instead of hashing
    (about 10x cheaper on one core). Already sorted (invokes by id, usually) costs one check."""
    if df.get_column(key).is_sorted():
        return df.set_sorted(key)
    return df.sort(key)


def _in_time_order(df: pl.DataFrame) -> bool:
    """Whether the rows are sorted by (inv, id): one pass, no sort."""
    return _scan.time_ordered(df.get_column("inv").cast(pl.Int64), df.get_column("id").cast(pl.Int64))


# Row kinds for _scan.order_scan.
_SKIP, _POLL, _RESET, _ACKED = 0, 1, 2, 3


def _positions(table: pl.Series, probe: pl.Series) -> pl.Series | None:
    """Each `probe` value's row in `table` (UInt32, null where absent), or None when `table`
    repeats a value (then the caller joins). The compiled hash lookup (_scan.c): one pass
    over each column, where a polars join on one core sorts both sides or hashes with more
    bookkeeping (about 0.27 CPU-s at 10^6 operations for the record join)."""
    pos = _scan.lookup(table, probe)
    return None if pos is None else pl.Series(pos)


def _dup_runs(df: pl.DataFrame, key: str) -> set[int]:
    """Runs holding a repeated `key` (the cheap unique-count test first: the usual answer)."""
    if df.get_column(key).n_unique() == df.height:
        return set()
    return _runs_of(df, pl.col(key).is_duplicated())


# ---------------------------------------------------------------------------------------------
# 1-2. Input screen and pairing. `prepare` turns events (the schema's columns, `run`, an integer
# per history, and optionally `_i`, the event's position: runs contiguous and in file order)
# into a lean frame: no strings (type, f and delivery as enums, topic and group as integer
# codes, values as 64-bit hashes), the poll lists' summaries, and one `bad` flag per row for
# every row rule of the reader. It is lazy, so a Parquet scan decodes only what it needs.

# The columns `encode` reads (never key's text, error, wall clocks or trace_id).
NEEDED = tuple(n for n in FIELDS if n not in ("error", "wall_ns"))
# Version 1's operations: a transaction operation is unknown here (the row is flagged, and the
# object reader refuses it in a version-1 file; a version-2 file never reaches the screens).
V1_FS = tuple(f for f in FS if f not in TXN_FS)
# Fields the screens read for their presence only: no operation needs them on its invoke or
# has them as a result, so their one rule (a completion must not carry them) needs one flag,
# `extra`. Everything else the screens read is a column of the encoded frame.
PRESENCE_ONLY = ("key", "retries", "max_in_flight", "idempotence", "acks")
assert not any(n in need for need in INVOKE_NEEDS.values() for n in PRESENCE_ONLY)
assert not any(n in res for res in RESULT_FIELDS.values() for n in PRESENCE_ONLY)
assert not set(PRESENCE_ONLY) & ALWAYS_OWN
# A field's presence in the encoded frame: its hash for hashed strings, `extra` for the
# presence-only fields, else the column itself.
PRESENT_AS = {"topic": "tc", "value": "vh", "values": "vhs", **{n: "extra" for n in PRESENCE_ONLY}}
# The encoded frame, whichever engine produced it (`encode` here with polars' hash; the Spark
# job's lean select with the JVM's xxhash64): strings are 64-bit hashes (null stays null) or
# enums (an unknown name is null, with `dunk` marking an unknown delivery mode).
ENCODED = ("run", "_i", "id", "type", "process", "f", "tc", "partition", "vh", "offset", "offsets",
           "vhs", "group", "generation", "final", "delivery", "dunk", "extra", "mono_ns")


def _enum(name: str, names) -> pl.Expr:
    """A string column as an Enum of `names`, an unknown name null: the same as a non-strict
    cast, by equality tests (about 2.5x cheaper than the cast's lookup, with polars 2.1)."""
    dt = pl.Enum(names)
    e = pl.lit(None, dt)
    for n in reversed(names):
        e = pl.when(pl.col(name) == n).then(pl.lit(n, dt)).otherwise(e)
    return e.alias(name)


def encode(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Events (the schema's columns, `run`, optionally `_i`) to the encoded frame, with polars'
    64-bit hash. The hashes are compared only with hashes of the same frame, so any 64-bit
    hash does; what a collision can do to a verdict is said at `prepare`."""
    c = pl.col
    if "_i" not in lf.collect_schema().names():
        lf = lf.with_row_index("_i")

    def h(n):
        return pl.when(c(n).is_not_null()).then(c(n).hash())
    dl = _enum("delivery", DELIVERY_MODES)
    return lf.select(
        "run", "_i", "id", _enum("type", TYPES), "process",
        _enum("f", V1_FS), h("topic").alias("tc"), "partition",
        h("value").alias("vh"), "offset", "offsets", c("values").list.eval(pl.element().hash()).alias("vhs"),
        h("group").alias("group"), "generation", "final", dl.alias("delivery"),
        (c("delivery").is_not_null() & dl.is_null()).alias("dunk"),
        pl.any_horizontal([c(n).is_not_null() for n in PRESENCE_ONLY]).alias("extra"), "mono_ns")


def prepare(lf: pl.LazyFrame) -> pl.LazyFrame:
    """The encoded frame (ENCODED) to the lean frame the pairing reads: the poll lists'
    summaries and one `bad` flag per row for every row rule of the reader.

    Hash collisions (two distinct strings, one hash) can only merge: two values, topics or
    groups look like one. Where the screens ask "are these distinct?" (ids, values of one
    partition) a merge flags the run, and the object reader decides from the full rows. Where
    they ask "are these the same?" (a record's value against the acknowledged one at its
    offset, a topic's or group's identity) a merge could hide an anomaly: that takes a 64-bit
    collision between the two strings compared (about 2^-64 per comparison for input not
    crafted against the hash)."""
    c = pl.col

    def has(n):
        return c(PRESENT_AS.get(n, n)).is_not_null()
    inv = c("type") == "invoke"
    # type and f: an unknown name is null in the encoded frame, so REQUIRED covers it.
    bad = pl.any_horizontal([~has(n) for n in REQUIRED]) | c("dunk").fill_null(True)
    bad = bad | (c("offset") < 0).fill_null(False) | (c("offset") >= LIMIT32).fill_null(False)
    bad = bad | (c("offsets").list.min() < 0).fill_null(False)
    bad = bad | (c("offsets").list.max() >= LIMIT32).fill_null(False)
    # Packed keys need small non-negative ids, processes and partitions (else: object reader).
    for n in ("id", "process"):
        bad = bad | (c(n) < 0) | (c(n) >= LIMIT32)
    bad = bad | (c("partition") < 0).fill_null(False)
    for op, need in INVOKE_NEEDS.items():
        # (the transaction operations' needs are version-2 fields, not columns here: the
        # pipeline hands a history that has them to the oracle, pipeline/file_check.py)
        if need and not any(n in V2_FIELDS for n in need):
            bad = bad | (inv & (c("f") == op) & pl.any_horizontal([~has(n) for n in need]))
    # A completion may carry only its operation's result fields (restating a request field is
    # legal but rare; the object reader checks that it agrees with the invoke).
    # Fields with the same owners are tested together: one membership test per owner set.
    by_owners: dict[tuple, list[pl.Expr]] = {(): [c("extra")]}   # PRESENCE_ONLY: no owner
    for n in FIELDS:
        if n in ALWAYS_OWN or n in PRESENCE_ONLY:
            continue
        owners = tuple(o for o, res in RESULT_FIELDS.items() if n in res)
        by_owners.setdefault(owners, []).append(has(n))
    for owners, present in by_owners.items():
        foreign = pl.lit(True) if not owners else ~c("f").is_in(list(owners))
        bad = bad | (~inv & pl.any_horizontal(present) & foreign)
    # An ok poll carries its records: offsets and values of one length.
    bad = bad | ((c("type") == "ok") & (c("f") == "poll") & (
        c("offsets").is_null() | c("vhs").is_null()
        | (c("offsets").list.len() != c("vhs").list.len())))
    return lf.select(
        "run", "_i", "id", "type", "process", "f", "tc", "partition", "vh",
        "offset", "offsets", "vhs", *poll_summaries(),
        "group", "generation", "final", "delivery", "mono_ns",
        bad.fill_null(True).alias("bad"))


def poll_summaries() -> list[pl.Expr]:
    """A poll's records summarised for the screens: how many, the first, last and highest
    offset (null where the event has no offsets)."""
    o = pl.col("offsets")
    return [o.list.len().alias("n"), o.list.first().alias("o0"), o.list.last().alias("ol"),
            o.list.max().alias("omax")]



def lean_plan(part: pl.LazyFrame) -> pl.LazyFrame:
    """The encoded, prepared frame the screens read, as a plan over events (run, _i, NEEDED)."""
    return prepare(encode(part.select("run", "_i", *NEEDED)))


def lean(part: pl.LazyFrame) -> pl.DataFrame:
    """The needed columns decoded and the lean ones derived in one streaming plan. On one core
    this costs the same CPU as decoding first and deriving in memory (polars 2.1, measured
    side by side at 10^6 operations; the in-memory engine's one fused plan was 1.7x dearer),
    and the streaming engine can share the scan with other outputs (check_file's one-history
    test). It keeps row order, which pairing relies on only for speed (`_i` carries the order)."""
    return lean_plan(part).collect(engine="streaming")

# What a chunk's spill keeps of the lean frame: `run` (one history: 0), `bad` (no row is, or
# the check has left the kernel) and the poll summaries (derived again from `offsets` when read
# back) are not written: a quarter fewer bytes to split, write and read (_check_chunked).
SPILL_DROPS = ("run", "bad", "n", "o0", "ol", "omax")


def unspill(df: pl.DataFrame) -> pl.DataFrame:
    """A chunk's spilled rows back as the lean frame `pair` reads (its columns, by name)."""
    return df.with_columns(pl.lit(0, pl.Int64).alias("run"), *poll_summaries(), pl.lit(False).alias("bad"))


@dataclass
class Paired:
    ops: pl.DataFrame        # one row per operation (lean columns, `pk` per topic-partition)
    recs: pl.DataFrame       # one row per record read by an ok poll
    bad: set[int]            # runs whose events break a rule of the reader

    def without(self, runs: set[int]) -> "Paired":
        if not runs:
            return self
        keep = ~pl.col("run").is_in(pl.Series(sorted(runs), dtype=pl.Int64).implode())
        return Paired(self.ops.filter(keep), self.recs.filter(keep), set())


def _attach(inv: pl.DataFrame, comp: pl.DataFrame) -> tuple[pl.DataFrame, set[int]]:
    """Each invoke with its completion's columns (null if none), and the runs holding a
    completion without an invoke. Invokes usually come in id order: then each completion's
    invoke is found by binary search and its columns scattered there (about 3x cheaper than
    sorting the completions for a merge join, on one core); else a merge join."""
    ik = inv.get_column("ik")
    cik = comp.get_column("ik")
    if not ik.is_sorted():
        ops = _by(inv, "ik").join(_by(comp, "ik"), on="ik", how="left")
        if ops.get_column("comp_row").is_not_null().sum() == comp.height:
            return ops, set()
        orphan = comp.join(inv.select("ik"), on="ik", how="anti")
        return ops, set((orphan.get_column("ik") // LIMIT32).unique().to_list())
    orphans: set[int] = set()
    if ik.len() == 0:
        pos = pl.Series("pos", [], pl.UInt32)
        found = pl.Series([False] * cik.len())
    else:
        lo, hi = ik[0], ik[-1]
        if hi - lo == ik.len() - 1:
            # Consecutive keys (one history with ids 0..n-1, the usual case): a completion's
            # invoke is at its key's distance from the first, no search (about 3x cheaper).
            pos = (cik - lo).clip(0, ik.len() - 1).cast(pl.UInt32)
        else:
            pos = ik.search_sorted(cik, side="left").clip(upper_bound=ik.len() - 1)
        found = ik.gather(pos) == cik
    if not found.all():
        orphans = set((cik.filter(~found) // LIMIT32).unique().to_list())
        comp, pos = comp.filter(found), pos.filter(found)
    cols = []
    for name in comp.columns:
        if name == "ik":
            continue
        col = comp.get_column(name)
        empty = pl.select(pl.repeat(None, ik.len(), dtype=col.dtype)).to_series().alias(name)
        cols.append(empty.scatter(pos, col) if pos.len() else empty)
    return inv.with_columns(cols), orphans


def pair(ev: pl.DataFrame, codes: list | None = None, pmax: int | None = None) -> Paired:
    """One row per operation (invoke joined with its completion by id), the records the ok
    polls read, and the runs whose events break a rule of the reader (traces/history.py
    pair/check_event): those runs go to the object reader, which names the row. `ev` is a
    prepared (lean) frame. Keys are packed into single integers (run << 32 | id, and so on):
    single-column joins are several times cheaper than multi-column ones. `codes` (the topic
    codes, sorted) and `pmax` fix the partition keys when `ev` is one chunk of a history."""
    c = pl.col
    bad: set[int] = set()
    if ev.get_column("bad").any():
        bad |= _runs_of(ev, c("bad"))
    ik = ((c("run").cast(pl.Int64) * LIMIT32) + c("id")).alias("ik")
    is_inv = c("type") == "invoke"
    # Project before filtering: a filter gathers every column it is given; no list column
    # goes through the join (the records are joined to their polls afterwards).
    inv = ev.lazy().filter(is_inv).select(
        "run", ik, "id", "process", "f", "tc", "partition", "vh", "offset", "group",
        "generation", "final", "delivery", c("mono_ns").alias("inv"), c("_i").alias("inv_row")).collect()
    comp = ev.lazy().filter(~is_inv).select(
        ik, c("type"), c("process").alias("process_c"), c("f").alias("f_c"), c("mono_ns").alias("end"),
        c("_i").alias("comp_row"), c("offset").alias("offset_c"), "n", "o0", "ol", "omax",
        c("generation").alias("generation_c")).collect()
    # What the records need of `ev`, taken now so that `ev` is released before the operations
    # are built (the caller passes it without keeping a reference: the frame is most of the
    # peak memory, and every page of the peak is a page fault on this path).
    i = ev.get_column("_i")
    step = _scan.steps(i.cast(pl.Int64))        # 2: consecutive, 1: increasing, 0: neither
    if i.len() and step == 2:
        # `_i` counts rows (one history, whole): each poll's lists are at its completion's
        # row, a gather instead of a join (about 2x cheaper on one core).
        i0, rows, lists = i[0], None, ev.select("offsets", "vhs")
    elif i.len() and step == 1:
        # `_i` increases (a chunk of a history, in file order): the completion's row is found
        # by binary search in `_i`, then the same gather (no filter and join of the lists).
        i0, rows, lists = None, i, ev.select("offsets", "vhs")
    else:
        i0, rows, lists = None, None, ev.lazy().filter((c("type") == "ok") & (c("f") == "poll") & (c("n") > 0)).select(
            c("_i").alias("comp_row"), "offsets", "vhs").collect()
    del ev, i, step
    bad |= _dup_runs(inv, "ik") | _dup_runs(comp, "ik")
    ops, orphans = _attach(inv, comp)
    if orphans:                     # completions without an invoke (rare): which runs
        bad |= orphans
    kind = pl.coalesce("type", pl.lit("info", pl.Enum(TYPES)))
    ok = kind == "ok"
    ops = ops.with_columns(
        kind.alias("type"),
        pl.when(kind != "info").then(c("end")).otherwise(None).alias("comp"),
        pl.coalesce("offset_c", "offset").alias("offset"),
        *[pl.when(ok).then(c(n)).otherwise(None).alias(n) for n in ("n", "o0", "ol", "omax")],
        pl.coalesce("generation_c", "generation").alias("generation"),
        c("final").fill_null(False))
    bad |= _runs_of(ops, c("comp_row").is_not_null() & (
        (c("comp_row") < c("inv_row")) | (c("process_c") != c("process")) | (c("f_c") != c("f"))
        | (c("end") < c("inv"))))
    bad |= _runs_of(ops, (c("type") == "ok") & (c("f") == "send") & c("offset").is_null())
    ops = ops.drop("offset_c", "generation_c", "process_c", "f_c", "end")
    # One key per partition of a run: run * (partitions) + partition, per topic.
    if codes is None:
        codes = ops.get_column("tc").drop_nulls().unique().sort()
        pmax = (ops.get_column("partition").max() or 0) + 1
    codes = pl.Series("tc", codes, dtype=ops.schema["tc"])
    if codes.len() <= 1:
        tcode = pl.lit(0, pl.Int64)
    else:
        tcode = c("tc").replace_strict(codes.to_list(), list(range(codes.len())),
                                       default=None, return_dtype=pl.Int64)
    ops = ops.with_columns(((c("run").cast(pl.Int64) * max(codes.len(), 1) + tcode) * pmax
                            + c("partition").cast(pl.Int64)).alias("pk"))
    if (ops.get_column("pk").max() or 0) >= 2**30:
        bad |= set(ops.get_column("run").unique().to_list())
    # Values are unique per partition (the checkers identify records by value); compared by
    # 64-bit hash here, the object reader decides if two hashes meet.
    sends = ops.filter(c("f") == "send").select("run", "pk", "vh")
    if sends.group_by("pk").agg(c("vh").n_unique()).get_column("vh").sum() != sends.height:
        bad |= _runs_of(sends, pl.struct("pk", "vh").is_duplicated())
    # The records: each ok poll's (offset, value hash) pairs, with its operation's columns.
    polls = ops.filter((c("f") == "poll") & (c("type") == "ok") & (c("n") > 0)).select(
        "run", "pk", c("id").alias("pid"), "process", "comp", "final", "comp_row")
    if i0 is not None or rows is not None:
        cr = polls.get_column("comp_row")
        at = cr - i0 if i0 is not None else rows.search_sorted(cr, side="left")
        recs = polls.drop("comp_row").with_columns(lists.get_column("offsets").gather(at),
                                                   lists.get_column("vhs").gather(at))
    else:
        recs = _by(polls, "comp_row").join(_by(lists, "comp_row"), on="comp_row", how="inner").drop("comp_row")
    del lists, rows
    recs = (recs.explode(["offsets", "vhs"])
            .rename({"offsets": "offset", "vhs": "vh"})
            .with_columns((c("pk") * LIMIT32 + c("offset")).alias("rk")))
    # A null inside a poll's lists (a record without offset or value): the object reader.
    if recs.get_column("offset").has_nulls() or recs.get_column("vh").has_nulls():
        bad |= _runs_of(recs, c("offset").is_null() | c("vh").is_null())
    # The pairing key and the partition's parts are not read past here (pk stands for them):
    # dropped, their memory is reused by what follows instead of fresh pages.
    return Paired(ops.drop("ik", "tc", "partition"), recs, bad)


# ---------------------------------------------------------------------------------------------
# 3. Screens: each returns the partition keys (pk) to hand to the oracle. The union
# is what matters: a flagged partition gets every object check.

def _partition_ops(ops: pl.DataFrame) -> pl.DataFrame:
    """The operations on a partition (producer configurations name none), without the event
    rows (only the flagged partitions' rows are wanted, and those are taken from `ops`)."""
    return (ops.lazy().select(pl.exclude("inv_row", "comp_row"))
            .filter(pl.col("pk").is_not_null() & (pl.col("f") != "producer_config")).collect())


def flag_partitions(pd: Paired, deadline: float | None = None,
                    assigns: pl.DataFrame | None = None,
                    p: pl.DataFrame | None = None) -> tuple[set[int], pl.DataFrame]:
    """(flagged pks, per-run counts: undecided writes, consumer-offsets examined). `assigns`:
    every assign/subscribe of the runs when `pd` holds only some of their partitions (a
    consumer's group and a group's generations and mode span partitions). `p`: the partition
    operations (_partition_ops), if the caller has them."""
    c = pl.col
    ops, recs = pd.ops, pd.recs
    flags: list[pl.Series] = []
    if p is None:
        p = _partition_ops(ops)
    rk = (c("pk") * LIMIT32 + c("offset")).alias("rk")
    sp = (c("pk") * LIMIT32 + c("process")).alias("sp")
    sends = p.filter(c("f") == "send").select("pk", "id", "type", "inv", "comp", "offset", "process", "vh")
    acked = sends.filter(c("type") == "ok").with_columns(rk, sp).with_row_index("ai")
    polls = p.filter((c("f") == "poll") & (c("type") == "ok")).select(
        "run", "pk", "id", "process", "inv", "comp", "final", "n", "o0", "ol", "omax")
    # Each record's acknowledgement (`ai`, its row in `acked`) by the compiled hash lookup when
    # each offset is acknowledged once (the usual case): no sort of the records.
    unique_acks = acked.get_column("rk").n_unique() == acked.height
    # Rows in (inv, id) order (the usual case: a file in time order): then the order scan
    # below reads them as they are, with no sort.
    timed = _in_time_order(p)
    raise_if_late(deadline)
    # Two acknowledgements of one offset.
    if acked.get_column("rk").n_unique() != acked.height:
        flags.append(acked.filter(c("rk").is_duplicated()).get_column("pk"))
    # Records that disagree with the acknowledgement at their offset ("odd": an info send's
    # value, or a contradiction). Every other record is an acknowledged send read in place.
    pos = _positions(acked.get_column("rk"), recs.get_column("rk")) if unique_acks else None
    if pos is not None:
        m = recs.with_columns(pos.alias("ai"), acked.get_column("vh").gather(pos).alias("avh"))
    else:
        m = _by(recs, "rk").join(_by(acked, "rk").select("rk", "ai", c("vh").alias("avh")), on="rk", how="left")
    odd = m.filter(c("avh").is_null() | (c("avh") != c("vh")))
    placed = pl.DataFrame(schema={"pk": pl.Int64, "offset": pl.Int64, "inv": pl.Int64, "sid": pl.Int64})
    if odd.height:
        # Values are unique per partition: at most one send matches; only info sends place.
        o = odd.join(sends.filter(c("type") == "info").select(
            "pk", "vh", c("id").alias("sid"), c("type").alias("stype"), c("inv").alias("sinv")),
            on=["pk", "vh"], how="left")
        flags.append(o.filter(c("stype").is_null() | c("avh").is_not_null()).get_column("pk"))
        pl_ = o.filter(c("stype") == "info").select("pk", "sid", "offset", c("sinv").alias("inv")).unique()
        flags.append(pl_.filter(pl.struct("pk", "sid").is_duplicated()).get_column("pk"))
        flags.append(pl_.filter(pl.struct("pk", "offset").is_duplicated()).get_column("pk"))
        placed = pl_.select("pk", "offset", "inv", "sid")
        # Send order with the unacknowledged sends that were read: per producer and
        # partition, offsets in log order must come with increasing invokes.
        if placed.height:
            eff = pl.concat([acked.select("pk", "offset", "inv", "process"),
                             placed.join(sends.select(c("id").alias("sid"), "process"), on="sid")
                             .select("pk", "offset", "inv", "process")])
            eff = eff.sort("pk", "process", "offset")
            same = (c("pk") == c("pk").shift(1)) & (c("process") == c("process").shift(1))
            flags.append(eff.filter(same & (c("inv") < c("inv").shift(1))).get_column("pk"))
    raise_if_late(deadline)
    # writes: acknowledged, never read (lost below the highest read offset; unseen above it
    # when a final read began after the acknowledgement; else undecided).
    read_ai = m.get_column("ai").drop_nulls().unique()
    unread = acked.filter(~c("ai").is_in(read_ai.implode()))
    finals = polls.filter(c("final"))
    fstat = finals.group_by("pk").agg(c("inv").max().alias("last_final"),
                                      c("inv").min().alias("first_final"))
    undecided = pl.DataFrame(schema={"run": pl.Int64, "undecided": pl.UInt32})
    if unread.height:
        maxread = recs.group_by("pk").agg(c("offset").max().alias("max_read"))
        u = (unread.join(maxread, on="pk", how="left").with_columns(c("max_read").fill_null(-1))
             .join(fstat, on="pk", how="left"))
        flags.append(u.filter(c("offset") < c("max_read")).get_column("pk"))
        above = u.filter(c("offset") >= c("max_read"))
        decided = c("last_final").is_not_null() & (c("last_final") > c("comp"))
        flags.append(above.filter(decided).get_column("pk"))
        undecided = (above.filter(~decided).join(ops.select("pk", "run").unique("pk"), on="pk")
                     .group_by("run").agg(pl.len().alias("undecided")))
    # lost-read: records read before the final reads began must be in them. Contiguous final
    # offsets (the usual case) need only their range.
    frec = recs.filter(c("final"))
    fr = frec.group_by("pk").agg(c("offset").min().alias("fmin"), c("offset").max().alias("fmax"),
                                 c("rk").n_unique().alias("fn"))
    early = (recs.filter(~c("final")).join(fstat, on="pk", how="inner")
             .filter(c("comp") < c("first_final")).join(fr, on="pk", how="left"))
    contiguous = (c("fmax") - c("fmin") + 1) == c("fn")
    flags.append(early.filter(contiguous & ((c("offset") > c("fmax")) | (c("offset") < c("fmin"))))
                 .get_column("pk"))
    gappy = early.filter(~contiguous.fill_null(False))
    if gappy.height:
        flags.append(gappy.join(frec.select("rk"), on="rk", how="anti").get_column("pk"))
    early_nf = early.filter(c("fn").is_null())          # read, but no final record at all
    flags.append(early_nf.get_column("pk"))
    raise_if_late(deadline)
    # Log order: partitions whose observed offsets have gaps go to the oracle (which
    # rank offsets); elsewhere rank = offset - base, so rank steps are offset steps.
    logs = pl.concat([acked.select("pk", "offset"), placed.select("pk", "offset")])
    ls = logs.group_by("pk").agg(c("offset").min().alias("lo"), c("offset").max().alias("hi"),
                                 pl.len().alias("n"))
    flags.append(ls.filter(c("hi") - c("lo") + 1 != c("n")).get_column("pk"))
    # polls: within a poll, successive offsets; across a consumer's polls (reset by assign or
    # subscribe), each resumes right after the previous one.
    step = c("offset") - c("offset").shift(1)
    flags.append(recs.filter((c("pid") == c("pid").shift(1)) & (step != 1)).get_column("pk"))
    resets = c("f").is_in(["assign", "subscribe"])
    if assigns is None:
        assigns = p.filter(resets)
    assigns = assigns.filter(c("type") != "fail")
    # sends: each producer's acknowledged offsets increase in send order. Both rules in one
    # compiled pass over the rows in (inv, id) order (_scan.c order_scan), per `sp`.
    if timed:
        # Polls, resets and sends are all rows of `p`, already in (inv, id) order. (A reset
        # counts only for its own topic-partition, `sp`, so a chunk's own assigns are all it
        # needs of the history-wide ones.)
        is_poll = (c("f") == "poll") & (c("type") == "ok") & (c("n") > 0)
        kind = (pl.when(is_poll).then(pl.lit(_POLL, pl.UInt32))
                .when(resets & (c("type") != "fail")).then(pl.lit(_RESET, pl.UInt32))
                .when((c("f") == "send") & (c("type") == "ok")).then(pl.lit(_ACKED, pl.UInt32))
                .otherwise(pl.lit(_SKIP, pl.UInt32)))
        seq = p.select(sp, "pk", kind.alias("kind"),
                       pl.when(is_poll).then(c("o0")).otherwise(c("offset")).alias("first"),
                       c("ol").alias("last"))
    else:
        def part(df, k, first, last):
            return df.select(sp, "pk", "inv", "id", pl.lit(k, pl.UInt32).alias("kind"),
                             first.cast(pl.Int64).alias("first"), last.cast(pl.Int64).alias("last"))
        none = pl.lit(None, pl.Int64)
        seq = pl.concat([part(polls.filter(c("n") > 0), _POLL, c("o0"), c("ol")),
                         part(assigns, _RESET, none, none),
                         part(acked, _ACKED, c("offset"), none)]).sort("inv", "id")
    rows = pl.Series(_scan.order_scan(*(seq.get_column(n).cast(pl.Int64 if n != "kind" else pl.UInt32)
                                        for n in ("sp", "kind", "first", "last"))))
    flags.append(seq.get_column("pk").gather(rows))
    # linearizable (offsets as the witness, linearizable.py): a deadline (an append's own
    # completion, or that of a poll whose highest record is there) before the latest invoke
    # of an append at or below it. One compiled pass over the log's offsets and one over the
    # polls (_scan.c lin_scan), in any order: each partition's offsets are laid out densely.
    if placed.height:
        # `ai` numbers the placed offsets after the acknowledgements (for _consumer's table).
        at = (pl.concat([acked.select("pk", "offset", "inv", "comp", "ai"),
                         placed.select("pk", "offset", "inv", pl.lit(None, pl.Int64).alias("comp"),
                                       (pl.int_range(pl.len(), dtype=pl.UInt32) + acked.height).alias("ai"))])
              .with_columns(rk))
    else:
        at = acked.select("pk", "offset", "inv", "comp", "rk", "ai")
    pm = polls.filter(c("n") > 0).select("pk", "omax", "comp")
    i64 = pl.Int64
    log_rows, poll_rows = _scan.lin_scan(
        *(at.get_column(n).cast(i64) for n in ("pk", "offset", "inv", "comp")),
        *(pm.get_column(n).cast(i64) for n in ("pk", "omax", "comp")))
    flags.append(at.get_column("pk").gather(pl.Series(log_rows)))
    flags.append(pm.get_column("pk").gather(pl.Series(poll_rows)))
    raise_if_late(deadline)
    # consumer offsets.
    # `m` (the records with the acknowledgement at their offset) stands for the records where
    # each offset is acknowledged once.
    cflags, examined = _consumer(ops, p, polls, recs, assigns, at,
                                 m if unique_acks else None,
                                 acked.height)
    flags += cflags
    counts = undecided.join(examined, on="run", how="full", coalesce=True)
    flagged = set(pl.concat(flags).unique().to_list()) if flags else set()
    # Distinct observed offsets per run, for unflagged partitions (acknowledged + placed;
    # every record of such a partition is one of those): the offsets check's "examined".
    clean = ls.filter(~c("pk").is_in(pl.Series(sorted(flagged), dtype=pl.Int64).implode()))
    records = (clean.join(ops.select("pk", "run").unique("pk"), on="pk")
               .group_by("run").agg(c("n").sum().alias("records")))
    return flagged, counts.join(records, on="run", how="full", coalesce=True)


# The at-least-once screen's first-read table: at most this many entries (offsets of the log
# times groups), 8 bytes each; beyond, the join it replaces.
TABLE_MAX = 1 << 24


def _consumer(ops, p, polls, recs, assigns, at, m=None, n_acked=0):
    """The consumer-offset screens. `at`: the log's offsets (acknowledged, then placed, `ai`
    numbering them); `m`: the records with `ai` of the acknowledgement at their offset, when
    each offset is acknowledged once (else None)."""
    c = pl.col
    out: list[pl.Series] = []
    cm = p.filter((c("f") == "commit") & (c("type") == "ok")).select(
        "run", "pk", "id", "group", "offset", "generation", "inv", "comp")
    grouped = assigns.filter(c("group").is_not_null())
    group_of = grouped.sort("run", "inv", "id").group_by("run", "process").agg(c("group").last())
    # (The order of `first` matters not: a group with two modes goes to the oracle.)
    modes = (grouped.filter(c("delivery").is_not_null())
             .group_by("run", "group").agg(c("delivery").first(), c("delivery").n_unique().alias("nm")))
    # A group declaring two modes (rare): every partition of that run to the oracle.
    mixed = modes.filter(c("nm") > 1).select("run")
    out.append(ops.join(mixed, on="run", how="semi").get_column("pk").drop_nulls())
    amo = modes.filter(c("delivery") == "at-most-once").select("run", "group")
    n_polls = polls.group_by("run").agg(pl.len().alias("np"))
    examined = (ops.select("run").unique()
                .join(cm.group_by("run").agg(pl.len().alias("nc")), on="run", how="left")
                .join(amo.group_by("run").agg(pl.len().alias("na")), on="run", how="left")
                .join(n_polls, on="run", how="left")
                .select("run", (c("nc").fill_null(0) + c("na").fill_null(0) * c("np").fill_null(0))
                        .alias("consumer_examined")))
    if cm.height == 0 and amo.height == 0:
        return out, examined
    # commit-regression: the highest offset of the group's commits completed before this one
    # began must not exceed it.
    done = (cm.select("pk", "group", c("comp").alias("t"), "offset").sort("t")
            .with_columns(c("offset").cum_max().over("pk", "group").alias("top")))
    left = cm.with_columns(c("inv").alias("t")).sort("t")
    reg = left.join_asof(done.select("pk", "group", "t", "top"), on="t", by=["pk", "group"], strategy="backward",
                         allow_exact_matches=False, check_sortedness=False)
    out.append(reg.filter(c("top") > c("offset")).get_column("pk"))
    # fenced-commit: a newer generation of the group had completed before the commit began.
    gens = (assigns.filter(c("group").is_not_null() & (c("type") == "ok") & c("generation").is_not_null())
            .select("run", "group", c("comp").alias("t"), "generation").sort("t")
            .with_columns(c("generation").cum_max().over("run", "group").alias("newest")))
    fen = (left.filter(c("generation").is_not_null())
           .join_asof(gens.select("run", "group", "t", "newest"), on="t", by=["run", "group"], strategy="backward",
                      allow_exact_matches=False, check_sortedness=False))
    out.append(fen.filter(c("newest") > c("generation")).get_column("pk"))
    # (record, group) as one integer key when it fits: ((pk * groups + group) << 32) + offset;
    # single-integer group-bys and joins cost a fraction of two-column ones.
    gl = grouped.get_column("group").unique().sort()
    pkmax = (ops.get_column("pk").max() or 0) + 1
    if gl.len() and pkmax * gl.len() < 2**30:
        gd = c("group").replace_strict(gl.to_list(), list(range(gl.len())), default=None,
                                       return_dtype=pl.Int64)
        rgk = ((c("pk") * gl.len() + gd) * LIMIT32 + c("offset")).alias("rgk")
        rg = ["rgk"]
    else:
        rgk, rg = c("rk").alias("rk"), ["rk", "group"]

    def grp_recs() -> pl.DataFrame:
        """The records read by group members, not final, with their (record, group) key."""
        return recs.filter(~c("final")).join(group_of, on=["run", "process"], how="inner").with_columns(rgk)
    # delivery-at-least-once: every log offset from the group's start below a commit was first
    # read by a member before the commit began.
    alo = modes.filter(c("delivery") == "at-least-once").select("run", "group")
    acm = cm.join(alo, on=["run", "group"], how="semi")
    if acm.height:
        starts = (assigns.filter((c("type") == "ok") & c("offset").is_not_null() & c("group").is_not_null())
                  .group_by("pk", "group").agg(c("offset").min().alias("start")))
        pairs = acm.select("pk", "group").unique()
        lo = (at.select("pk", "offset", "rk", *(["ai"] if "ai" in at.columns else []))
              .join(pairs, on="pk", how="inner")
              .join(starts, on=["pk", "group"], how="left")
              .filter(c("offset") >= c("start").fill_null(0)))
        size = (at.get_column("ai").max() or 0) + 1
        groups = gl.len()
        if m is not None and rg == ["rgk"] and size * groups <= TABLE_MAX:
            # The first read of each (offset of `at`, group) by a table indexed by the
            # offset's number `ai` and the group's (ai * groups + group): `m` gives each record
            # the acknowledgement's `ai`; a placed offset's comes by a join of the few records
            # with none. A gather instead of a join on the (record, group) key over every row.
            # The same rows meet: a record at no offset of `at` meets none either way.
            mine = m.filter(~c("final")).join(group_of, on=["run", "process"], how="inner")
            fa = mine.filter(c("ai").is_not_null()).select("ai", "group", "comp")
            placed_at = at.filter(c("ai") >= n_acked).select("rk", "ai")
            if placed_at.height:
                fa = pl.concat([fa, mine.filter(c("ai").is_null()).select("rk", "group", "comp")
                                .join(placed_at, on="rk", how="inner").select("ai", "group", "comp")])
            gk = (c("ai").cast(pl.Int64) * groups + gd).alias("gk")
            fa = fa.group_by(gk).agg(c("comp").min().alias("first"))
            table = pl.repeat(None, size * groups, dtype=pl.Int64, eager=True).scatter(
                fa.get_column("gk"), fa.get_column("first"))
            lo = lo.with_columns(table.gather(lo.select(gk).to_series()).alias("first"))
        else:
            first = grp_recs().group_by(rg).agg(c("comp").min().alias("first"))
            lo = lo.with_columns(rgk).join(first, on=rg, how="left")
        lo = (lo.with_columns(c("first").fill_null(BIG))
              .sort("offset")
              .with_columns(c("first").cum_max().over("pk", "group").alias("prefix")))
        chk = (acm.sort("offset")
               .join_asof(lo.select("pk", "group", "offset", "prefix"), on="offset", by=["pk", "group"], strategy="backward",
                          allow_exact_matches=False, check_sortedness=False))
        out.append(chk.filter(c("prefix") > c("inv")).get_column("pk"))
    # delivery-at-most-once: no offset delivered to the group by two polls.
    if amo.height:
        twice = (grp_recs().join(amo, on=["run", "group"], how="semi")
                 .group_by(rg).agg(c("pid").n_unique().alias("n"), c("pk").first())
                 .filter(c("n") > 1))
        out.append(twice.get_column("pk"))
    return out, examined


# ---------------------------------------------------------------------------------------------
# 4. The screens' result over some partitions, and the statuses of runs with nothing flagged.

SETTINGS = ("producer_config", "assign", "subscribe")


@dataclass
class Screen:
    """What the screens decided over some partitions (all of them, or one chunk's): the
    flagged partitions, per-run counts and statistics, and the event rows the oracle
    need for the flagged partitions. Screens of disjoint partition sets merge by addition."""
    done: bool
    flagged: set[int]
    counts: pl.DataFrame                 # run, undecided, consumer_examined, records
    stats: pl.DataFrame                  # run, sends, polls, ops
    rows: pl.Series                      # `_i` of the flagged partitions' events

    @staticmethod
    def merge(parts: list["Screen"]) -> "Screen":
        c = pl.col
        counts = pl.concat([s.counts for s in parts], how="diagonal_relaxed")
        counts = counts.group_by("run").agg(c(n).sum() for n in counts.columns if n != "run")
        stats = pl.concat([s.stats for s in parts]).group_by("run").agg(c("sends", "polls", "ops").sum())
        return Screen(all(s.done for s in parts), set().union(*(s.flagged for s in parts)), counts,
                      stats, pl.concat([s.rows for s in parts]).unique().sort())


def screen(pd: Paired, deadline: float | None = None, assigns: pl.DataFrame | None = None) -> Screen:
    c = pl.col
    ops = pd.ops
    done = True
    p = _partition_ops(ops)
    try:
        flagged, counts = flag_partitions(pd, deadline, assigns, p)
    except TimeUp:
        done, flagged, counts = False, set(), pl.DataFrame(schema={"run": pl.Int64})
    sends = (c("f") == "send").sum().cast(pl.Int64).alias("sends")
    polls = ((c("f") == "poll") & (c("type") == "ok")).sum().cast(pl.Int64).alias("polls")
    run = ops.get_column("run")
    if ops.height and run.min() == run.max():
        # One run (check-history): sums, no group-by and join.
        stats = p.select(pl.lit(run[0], run.dtype).alias("run"), sends, polls,
                         pl.lit(ops.height, pl.Int64).alias("ops"))
    else:
        stats = (ops.group_by("run").agg(pl.len().cast(pl.Int64).alias("ops"))
                 .join(p.group_by("run").agg(sends, polls), on="run", how="left")
                 .with_columns(c("sends", "polls").fill_null(0)).select("run", "sends", "polls", "ops"))
    rows = pl.Series("_i", [], ops.schema["inv_row"])
    if flagged:
        fl = pl.Series("pk", sorted(flagged), dtype=pl.Int64)
        runs_f = ops.filter(c("pk").is_in(fl.implode())).get_column("run").unique()
        # The flagged partitions' operations, plus every producer_config and assign/subscribe
        # of their runs (the settings, group members and generations the rules consult).
        sel = ops.filter(c("run").is_in(runs_f.implode()) & (
            c("pk").is_in(fl.implode()) | c("f").is_in(SETTINGS)))
        rows = pl.concat([sel.get_column("inv_row"), sel.get_column("comp_row").drop_nulls()])
    return Screen(done, flagged, counts, stats, rows)


def screen_runs(pd: Paired) -> pl.DataFrame:
    """run, status, ops for every run of a paired frame: 'flagged' for a run whose input
    breaks a reader rule or with a partition some screen flags (the oracle must
    judge it), else its status decided in columns (valid | unknown, as pipeline.judge decides it)."""
    c = pl.col
    bad = pd.bad
    sc = screen(pd.without(bad))
    ops = pd.ops
    runs_f = set(bad)
    if sc.flagged:
        runs_f |= set(ops.filter(c("pk").is_in(pl.Series(sorted(sc.flagged), dtype=pl.Int64).implode()))
                      .get_column("run").unique().to_list())
    clean_ops = ops.filter(~c("run").is_in(pl.Series(sorted(bad), dtype=pl.Int64).implode())) if bad else ops
    p = clean_ops.filter(c("pk").is_not_null() & (c("f") != "producer_config"))
    clean = clean_status(clean_ops, p, sc.counts, runs_f)
    flagged = pl.DataFrame({"run": sorted(runs_f), "status": ["flagged"] * len(runs_f)},
                           schema={"run": pl.Int64, "status": pl.String})
    return pl.concat([clean.select("run", "status", c("ops").cast(pl.Int64)),
                      flagged.with_columns(pl.lit(0, pl.Int64).alias("ops"))], how="vertical_relaxed")


def clean_status(ops: pl.DataFrame, p: pl.DataFrame, counts: pl.DataFrame, flagged: set) -> pl.DataFrame:
    """Statuses of runs with no flagged partition, as combine() would decide them: unknown if
    some acknowledged write is undecided (no final read after it) or no check examined
    anything; valid otherwise."""
    c = pl.col
    st = (ops.group_by("run").agg(pl.len().alias("ops"))
          .join(p.group_by("run").agg(((c("f") == "send") | ((c("f") == "poll") & (c("type") == "ok")))
                                      .sum().alias("n_p")), on="run", how="left")
          .join(counts, on="run", how="left")
          .filter(~c("run").is_in(pl.Series(sorted(flagged), dtype=pl.Int64).implode())))
    examined_any = c("n_p").fill_null(0) + c("consumer_examined").fill_null(0) > 0
    return st.select("run", "ops", pl.when(c("undecided").fill_null(0) > 0).then(pl.lit("unknown"))
                     .when(examined_any).then(pl.lit("valid")).otherwise(pl.lit("unknown"))
                     .alias("status"))
