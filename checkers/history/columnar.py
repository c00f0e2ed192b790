"""The columnar checker kernel: the per-partition history checks over Arrow/polars frames, for
one history (`check-history`) or for many runs at once (`kafkaverify mine`, one bucket of runs
per call), with no Python loop per row.

Shape of the work (each step is whole-column polars; grouping keys always include `trace_id`,
so a frame may hold any number of runs):
1. `screen_input`: the rules of traces/history.py's reader, as column predicates (required
   fields, known types, ids paired once and in order, completions that restate nothing, ok
   sends with offsets, unique values per partition, no negative offsets). A run that fails
   any of them is handed to the object reader, whose HistoryError names the row.
2. `pair`: invokes joined with their completions into one row per operation.
3. `screens`: for every rule of log_checks / linearizable / consumer, a predicate that is
   true for every partition with an anomaly of that rule (it may also be true for a few
   without). Partitions no screen flags are clean, and their verdict is decided here.
4. Flagged (run, partition) pairs only are turned into Op objects and judged by the object
   checkers (checkers/history/*.py, the slow obvious oracle), which build the witnesses and
   explanations. So the anomalies and their witnesses are the oracle's by construction; the
   kernel's job is to never miss a flag (tests/test_history_columnar.py checks both ways).

The cost is linear in events for clean partitions; a flagged partition costs the object
checkers' (near-linear) time for that partition alone. The cross-partition cycle search needs
the whole history as objects: it runs (bounded by cycle_max_ops, as before) only when some
partition is not linearizable; otherwise no cycle exists by locality (see cycles.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from checkers.history.result import Anomaly, CheckResult, Verdict, combine, finish
from traces.history import (ALWAYS_OWN, DELIVERY_MODES, FIELDS, FS, INVOKE_NEEDS, REQUIRED,
                            RESULT_FIELDS, TYPES, History, Op)

CHECK_NAMES = ("offsets", "writes", "polls", "sends", "linearizable", "consumer-offsets", "cycles")
PER_PARTITION = CHECK_NAMES[:-1]
T, TP = "trace_id", "tp"
BIG = 2**62                      # "never" for times (an unread offset's first read)
INT_FIELDS = [n for n, (t, _) in FIELDS.items() if t is int]


class TimeUp(Exception):
    """The deadline passed inside the kernel; the caller reports the unfinished checks unknown."""


def _late(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeUp()


# ---------------------------------------------------------------------------------------------
# 1. Input screen (the reader's rules, vectorised). Returns the runs that break one.

def screen_input(ev: pl.DataFrame) -> set:
    c = pl.col
    bad: list[pl.DataFrame] = []

    def flag(frame: pl.DataFrame, cond: pl.Expr) -> None:
        bad.append(frame.filter(cond).select(T).unique())

    row_bad = pl.any_horizontal([c(n).is_null() for n in REQUIRED])
    row_bad = row_bad | ~c("type").is_in(TYPES) | ~c("f").is_in(FS)
    row_bad = row_bad | (c("delivery").is_not_null() & ~c("delivery").is_in(DELIVERY_MODES))
    row_bad = row_bad | (c("offset") < 0).fill_null(False)
    row_bad = row_bad | (c("offsets").list.min() < 0).fill_null(False)
    # An invoke lacking a field its operation needs.
    for f, need in INVOKE_NEEDS.items():
        if need:
            row_bad = row_bad | ((c("type") == "invoke") & (c("f") == f)
                                 & pl.any_horizontal([c(n).is_null() for n in need]))
    # A completion may carry only its operation's result fields (restating a request field is
    # legal but rare; the object reader checks that it agrees).
    for n in FIELDS:
        if n in ALWAYS_OWN:
            continue
        owners = [f for f, res in RESULT_FIELDS.items() if n in res]
        row_bad = row_bad | ((c("type") != "invoke") & c(n).is_not_null() & ~c("f").is_in(owners))
    flag(ev, row_bad)

    inv = ev.filter(c("type") == "invoke")
    comp = ev.filter(c("type") != "invoke")
    flag(inv, pl.struct(T, "id").is_duplicated())
    flag(comp, pl.struct(T, "id").is_duplicated())
    j = comp.join(inv.select(T, "id", "process", "f", "mono_ns", "row", "offset", "offsets", "values"),
                  on=[T, "id"], how="left", suffix="_i")
    flag(j, c("row_i").is_null() | (c("row_i") > c("row")) | (c("process") != c("process_i"))
         | (c("f") != c("f_i")) | (c("mono_ns") < c("mono_ns_i")))
    ok = j.filter(c("type") == "ok")
    flag(ok, (c("f") == "send") & c("offset").is_null() & c("offset_i").is_null())
    offs = pl.coalesce("offsets", "offsets_i")
    vals = pl.coalesce("values", "values_i")
    flag(ok, (c("f") == "poll") & (offs.is_null() | vals.is_null()
                                   | (offs.list.len() != vals.list.len()).fill_null(True)))
    sends = inv.filter(c("f") == "send")
    flag(sends, pl.struct(T, "topic", "partition", "value").is_duplicated())
    return set(pl.concat(bad).get_column(T).to_list()) if bad else set()


# ---------------------------------------------------------------------------------------------
# 2. Pairing: one row per operation, in (trace_id, invoke time, id) order.

def pair(ev: pl.DataFrame) -> pl.DataFrame:
    c = pl.col
    inv = ev.filter(c("type") == "invoke").drop("type")
    comp = ev.filter(c("type") != "invoke").select(
        T, "id", c("type").alias("ctype"), c("mono_ns").alias("end"), c("wall_ns").alias("end_wall"),
        c("error").alias("cerror"), c("offset").alias("coffset"), c("offsets").alias("coffsets"),
        c("values").alias("cvalues"), c("generation").alias("cgen"))
    ops = inv.join(comp, on=[T, "id"], how="left")
    kind = pl.coalesce("ctype", pl.lit("info"))
    ops = ops.with_columns(
        kind.alias("type"),
        pl.when(kind != "info").then(c("end")).otherwise(None).alias("comp"),
        c("mono_ns").alias("inv"), c("wall_ns").alias("inv_wall"),
        # The merged operation: a completion's result fields override the invoke's.
        pl.coalesce("coffset", "offset").alias("offset"),
        pl.when(kind == "ok").then(pl.coalesce("coffsets", "offsets")).otherwise(None).alias("offsets"),
        pl.when(kind == "ok").then(pl.coalesce("cvalues", "values")).otherwise(None).alias("values"),
        pl.coalesce("cgen", "generation").alias("generation"),
        pl.coalesce("cerror", "error").alias("error"),
        (c("topic") + "-" + c("partition").cast(pl.String)).alias(TP),
    ).drop("ctype", "coffset", "coffsets", "cvalues", "cgen", "cerror", "mono_ns", "wall_ns")
    return ops.sort(T, "inv", "id")


# ---------------------------------------------------------------------------------------------
# 3. Screens. Each returns a frame of (trace_id, tp) to hand to the object checkers.

@dataclass
class Frames:
    ops: pl.DataFrame
    sends: pl.DataFrame
    acked: pl.DataFrame
    polls: pl.DataFrame          # ok polls
    recs: pl.DataFrame           # one row per record of an ok poll
    logoffs: pl.DataFrame        # distinct (run, tp, offset) with rank in log order
    assigns: pl.DataFrame        # ok/info assign + subscribe
    commits: pl.DataFrame        # ok commits
    group_of: pl.DataFrame       # (run, process) -> group
    modes: pl.DataFrame          # (run, group) -> delivery mode


def frames(ops: pl.DataFrame) -> Frames:
    c = pl.col
    p = ops.filter(c("f") != "producer_config")
    sends = p.filter(c("f") == "send").select(T, TP, "id", "process", "type", "inv", "comp", "offset", "value")
    acked = sends.filter(c("type") == "ok")
    polls = p.filter((c("f") == "poll") & (c("type") == "ok")).select(
        T, TP, "id", "process", "inv", "comp", c("final").fill_null(False), "offsets", "values")
    recs = (polls.select(T, TP, c("id").alias("pid"), "process", "comp", "final", "offsets", "values")
            .explode(["offsets", "values"]).drop_nulls("offsets")
            .rename({"offsets": "offset", "values": "value"}))
    logoffs = (pl.concat([acked.select(T, TP, "offset"), recs.select(T, TP, "offset")])
               .unique().sort(T, TP, "offset")
               .with_columns(pl.int_range(pl.len()).over(T, TP).alias("rank")))
    assigns = p.filter(c("f").is_in(["assign", "subscribe"]) & (c("type") != "fail")).select(
        T, TP, "id", "process", "type", "inv", "comp", "group", "generation", "offset", "delivery")
    commits = p.filter((c("f") == "commit") & (c("type") == "ok")).select(
        T, TP, "id", "group", "offset", "generation", "inv", "comp")
    group_of = (assigns.filter(c("group").is_not_null())
                .group_by(T, "process").agg(c("group").last()))
    modes = (assigns.filter(c("group").is_not_null() & c("delivery").is_not_null()).sort(T, TP, "inv", "id")
             .group_by(T, "group").agg(c("delivery").first(), c("delivery").n_unique().alias("n_modes")))
    return Frames(ops, sends, acked, polls, recs, logoffs, assigns, commits, group_of, modes)


def _keys(df: pl.DataFrame) -> pl.DataFrame:
    return df.select(T, TP).unique()


def screen_offsets(fr: Frames) -> pl.DataFrame:
    c = pl.col
    log = pl.concat([fr.acked.select(T, TP, "offset", "value"), fr.recs.select(T, TP, "offset", "value")])
    conf = log.group_by(T, TP, "offset").agg(c("value").n_unique().alias("n")).filter(c("n") > 1)
    dup = log.group_by(T, TP, "value").agg(c("offset").n_unique().alias("n")).filter(c("n") > 1)
    return pl.concat([_keys(conf), _keys(dup)])


def screen_writes(fr: Frames) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Flags, and the count per run of acknowledged writes nobody read with no final read
    after them (those make the check unknown: lost or lagging cannot be told apart)."""
    c = pl.col
    readset = fr.recs.select(T, TP, "value").unique()
    maxread = fr.recs.group_by(T, TP).agg(c("offset").max().alias("max_read"))
    finals = fr.polls.filter(c("final"))
    last_final = finals.group_by(T, TP).agg(c("inv").max().alias("last_final"),
                                            c("inv").min().alias("first_final"))
    unread = (fr.acked.join(readset, on=[T, TP, "value"], how="anti")
              .join(maxread, on=[T, TP], how="left").with_columns(c("max_read").fill_null(-1))
              .join(last_final, on=[T, TP], how="left"))
    lost = unread.filter(c("offset") < c("max_read"))
    above = unread.filter(c("offset") >= c("max_read"))
    decided = c("last_final").is_not_null() & (c("last_final") > c("comp"))
    unseen = above.filter(decided)
    undecided = above.filter(~decided).group_by(T).agg(pl.len().alias("undecided"))
    failed = fr.sends.filter(c("type") == "fail").join(readset, on=[T, TP, "value"], how="semi")
    # A final read that returns less than what was already read (log_checks.lost_reads).
    foffs = fr.recs.filter(c("final")).select(T, TP, "offset").unique()
    early = (fr.recs.filter(~c("final")).join(last_final, on=[T, TP], how="inner")
             .filter(c("comp") < c("first_final"))
             .join(foffs, on=[T, TP, "offset"], how="anti"))
    return pl.concat([_keys(lost), _keys(unseen), _keys(failed), _keys(early)]), undecided


def _ranked(fr: Frames) -> pl.DataFrame:
    return fr.recs.join(fr.logoffs, on=[T, TP, "offset"], how="left", maintain_order="left")


def screen_polls(fr: Frames, ranked: pl.DataFrame) -> pl.DataFrame:
    c = pl.col
    # Within one poll, records must be successive in log order.
    inner = ranked.filter((c("rank") - c("rank").shift(1).over(T, "pid")) != 1)
    per_poll = ranked.group_by(T, "pid").agg(c("rank").first().alias("r0"), c("rank").last().alias("rl"))
    polls = fr.polls.join(per_poll, left_on=[T, "id"], right_on=[T, "pid"], how="inner")
    seq = pl.concat([
        polls.select(T, TP, "process", "inv", "id", pl.lit(False).alias("is_assign"), "r0", "rl"),
        fr.assigns.select(T, TP, "process", "inv", "id", pl.lit(True).alias("is_assign"),
                          pl.lit(None, pl.Int64).alias("r0"), pl.lit(None, pl.Int64).alias("rl")),
    ]).sort(T, TP, "process", "inv", "id")
    # An assign or subscribe resets the consumer's position: segments between them.
    seq = seq.with_columns(c("is_assign").cast(pl.Int64).cum_sum().over(T, TP, "process").alias("seg"))
    seq = seq.filter(~c("is_assign")).with_columns(
        c("rl").shift(1).over(T, TP, "process", "seg").alias("prev"))
    across = seq.filter(c("prev").is_not_null() & (c("r0") != c("prev") + 1))
    return pl.concat([_keys(inner), _keys(across)])


def screen_sends(fr: Frames) -> pl.DataFrame:
    c = pl.col
    a = fr.acked.with_columns(c("offset").shift(1).over(T, TP, "process").alias("prev"))
    return _keys(a.filter(c("offset") <= c("prev")))


def screen_linearizable(fr: Frames) -> pl.DataFrame:
    c = pl.col
    acks = fr.acked.select(T, TP, "offset", c("value").alias("aval"), c("inv"), c("comp"))
    two = acks.group_by(T, TP, "offset").agg(pl.len().alias("n")).filter(c("n") > 1)
    odd = (fr.recs.select(T, TP, "offset", "value", "pid")
           .join(acks.select(T, TP, "offset", "aval").unique([T, TP, "offset"]),
                 on=[T, TP, "offset"], how="left")
           .filter(c("aval").is_null() | (c("aval") != c("value"))))
    odd = odd.join(fr.sends.select(T, TP, "value", c("id").alias("sid"), c("type").alias("stype"),
                                   c("inv").alias("sinv")), on=[T, TP, "value"], how="left")
    wrong = odd.filter(c("stype").is_null() | (c("stype") != "info") | c("aval").is_not_null())
    placed = odd.filter(c("stype") == "info").select(T, TP, "sid", "offset", "sinv").unique()
    twice = placed.group_by(T, TP, "sid").agg(pl.len().alias("n")).filter(c("n") > 1)
    shared = placed.group_by(T, TP, "offset").agg(pl.len().alias("n")).filter(c("n") > 1)
    # Offsets as the linearisation witness (linearizable.py): some deadline (an append's own
    # completion, or the completion of a poll whose highest record is at that offset) earlier
    # than the latest invoke of an append at or below it.
    at = (pl.concat([acks.select(T, TP, "offset", "inv", "comp"),
                     placed.select(T, TP, "offset", c("sinv").alias("inv"),
                                   pl.lit(None, pl.Int64).alias("comp"))])
          .sort(T, TP, "offset")
          .with_columns(c("inv").cum_max().over(T, TP).alias("latest")))
    at = at.with_columns(c("latest").shift(1).over(T, TP).alias("below"))
    own = at.filter(c("comp").is_not_null() & (c("below") > c("comp")))
    pmax = fr.recs.group_by(T, TP, "pid").agg(c("offset").max(), c("comp").first())
    pm = pmax.join(at.select(T, TP, "offset", "latest"), on=[T, TP, "offset"], how="left")
    by_poll = pm.filter(c("latest").is_null() | (c("latest") > c("comp")))
    return pl.concat([_keys(two), _keys(wrong), _keys(twice), _keys(shared), _keys(own), _keys(by_poll)])


def screen_consumer(fr: Frames) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Flags, and examined counts per run (commits, plus polls per at-most-once group)."""
    c = pl.col
    cm = fr.commits
    out = []
    # commit-regression: the highest offset among the group's commits completed before this
    # one began (strictly) must not exceed it.
    done = (cm.select(T, TP, "group", c("comp").alias("t"), "offset").sort("t")
            .with_columns(c("offset").cum_max().over(T, TP, "group").alias("top")))
    left = cm.with_columns(c("inv").alias("t")).sort("t")
    reg = left.join_asof(done.select(T, TP, "group", "t", "top"), on="t", by=[T, TP, "group"],
                         strategy="backward", allow_exact_matches=False, check_sortedness=False)
    out.append(_keys(reg.filter(c("top") > c("offset"))))
    # fenced-commit: a newer generation of the group completed before the commit began.
    gens = (fr.assigns.filter(c("group").is_not_null() & (c("type") == "ok") & c("generation").is_not_null())
            .select(T, "group", c("comp").alias("t"), "generation").sort("t")
            .with_columns(c("generation").cum_max().over(T, "group").alias("newest")))
    fen = left.filter(c("generation").is_not_null()).join_asof(
        gens.select(T, "group", "t", "newest"), on="t", by=[T, "group"], strategy="backward",
        allow_exact_matches=False, check_sortedness=False)
    out.append(_keys(fen.filter(c("newest") > c("generation"))))
    # A group with two declared modes: rare and ambiguous; let the oracle decide every partition.
    mixed = fr.modes.filter(c("n_modes") > 1).select(T)
    out.append(fr.logoffs.join(mixed, on=T, how="semi").select(T, TP).unique())
    grp_recs = (fr.recs.filter(~c("final")).join(fr.group_of, on=[T, "process"], how="inner"))
    # delivery-at-least-once: every offset from the group's start below a commit was first
    # read (by a member's poll) before the commit began.
    alo = fr.modes.filter(c("delivery") == "at-least-once").select(T, "group")
    acm = cm.join(alo, on=[T, "group"], how="semi")
    starts = (fr.assigns.filter((c("type") == "ok") & c("offset").is_not_null() & c("group").is_not_null())
              .group_by(T, TP, "group").agg(c("offset").min().alias("start")))
    first = grp_recs.group_by(T, TP, "group", "offset").agg(c("comp").min().alias("first"))
    pairs = acm.select(T, TP, "group").unique()
    lo = (fr.logoffs.select(T, TP, "offset").join(pairs, on=[T, TP], how="inner")
          .join(starts, on=[T, TP, "group"], how="left")
          .filter(c("offset") >= c("start").fill_null(0))
          .join(first, on=[T, TP, "group", "offset"], how="left")
          .with_columns(c("first").fill_null(BIG)).sort("offset")
          .with_columns(c("first").cum_max().over(T, TP, "group").alias("prefix")))
    chk = acm.sort("offset").join_asof(lo.select(T, TP, "group", "offset", "prefix"), on="offset",
                                       by=[T, TP, "group"], strategy="backward",
                                       allow_exact_matches=False, check_sortedness=False)
    out.append(_keys(chk.filter(c("prefix") > c("inv"))))
    # delivery-at-most-once: no offset delivered to the group by two polls.
    amo = fr.modes.filter(c("delivery") == "at-most-once").select(T, "group")
    twice = (grp_recs.join(amo, on=[T, "group"], how="semi")
             .group_by(T, TP, "group", "offset").agg(c("pid").n_unique().alias("n"))
             .filter(c("n") > 1))
    out.append(_keys(twice))
    n_polls = fr.polls.group_by(T).agg(pl.len().alias("np"))
    examined = (cm.group_by(T).agg(pl.len().alias("nc"))
                .join(amo.group_by(T).agg(pl.len().alias("namo")), on=T, how="full", coalesce=True)
                .join(n_polls, on=T, how="left")
                .select(T, (c("nc").fill_null(0) + c("namo").fill_null(0) * c("np").fill_null(0))
                        .alias("consumer-offsets")))
    return pl.concat(out), examined


# ---------------------------------------------------------------------------------------------
# 4. Objects for flagged partitions, and the verdict.

_OP_COLS = ("id", "process", "f", "type", "inv", "comp", "end", "topic", "partition", "key", "value",
            "offset", "offsets", "values", "group", "generation", "final", "delivery", "retries",
            "max_in_flight", "idempotence", "acks", "error", "inv_wall", "end_wall", "row")
_CONFIG = ("retries", "max_in_flight", "idempotence", "acks")


def to_ops(ops: pl.DataFrame, where: str = "row", row_base: int = 1) -> list[Op]:
    """Op objects for some rows of a paired frame (flagged partitions only: this is the one
    per-row loop, and it runs on what a screen flagged)."""
    out = []
    for r in ops.select(_OP_COLS).iter_rows(named=True):
        config = None
        if r["f"] == "producer_config":
            config = {n: r[n] for n in _CONFIG if r[n] is not None}
        out.append(Op(
            id=r["id"], process=r["process"], f=r["f"], type=r["type"], inv=r["inv"], comp=r["comp"],
            end=r["end"], topic=r["topic"], partition=r["partition"], key=r["key"], value=r["value"],
            offset=r["offset"], offsets=r["offsets"], values=r["values"], group=r["group"],
            generation=r["generation"], final=bool(r["final"]), delivery=r["delivery"], config=config,
            error=r["error"], where=f"{where} {r['row'] + row_base}", inv_wall=r["inv_wall"],
            end_wall=r["end_wall"]))
    out.sort(key=lambda o: (o.inv, o.id))
    return out


@dataclass
class RunResult:
    trace_id: Any
    verdict: Verdict
    ops: int
    witness_ops: dict[int, Op] = field(default_factory=dict)   # every op some witness names


def judge(ops: pl.DataFrame, header: dict | None = None, deadline: float | None = None,
          cycle_max_ops: int = 200_000, where: str = "row", row_base: int = 1,
          full_history=None) -> dict[Any, RunResult]:
    """Checks every run of a paired frame; returns trace_id -> RunResult. `full_history`
    (trace_id -> History), if given, is used for the cycle search instead of rebuilding."""
    from checkers.history import consumer, cycles, linearizable, log_checks
    from checkers.history.index import build
    c = pl.col
    runs = ops.select(T).unique().get_column(T).to_list()
    fr = frames(ops)
    flags: dict[str, pl.DataFrame] = {}
    done: list[str] = []
    undecided = consumer_examined = None
    try:
        _late(deadline)
        flags["offsets"] = screen_offsets(fr)
        _late(deadline)
        flags["writes"], undecided = screen_writes(fr)
        done += ["offsets", "writes"]
        _late(deadline)
        flags["polls"] = screen_polls(fr, _ranked(fr))
        done.append("polls")
        _late(deadline)
        flags["sends"] = screen_sends(fr)
        done.append("sends")
        _late(deadline)
        flags["linearizable"] = screen_linearizable(fr)
        done.append("linearizable")
        _late(deadline)
        flags["consumer-offsets"], consumer_examined = screen_consumer(fr)
        done.append("consumer-offsets")
    except TimeUp:
        pass
    # Examined counts per run, as the object checkers count them.
    p = fr.ops.filter(c("f") != "producer_config")
    counts = (p.group_by(T).agg((c("f") == "send").sum().alias("sends"),
                                ((c("f") == "poll") & (c("type") == "ok")).sum().alias("polls"),
                                pl.len().alias("ops_p"))
              .join(fr.logoffs.group_by(T).agg(pl.len().alias("records")), on=T, how="left"))
    n_ops = dict(fr.ops.group_by(T).agg(pl.len()).iter_rows())
    cnt = {r[T]: r for r in counts.iter_rows(named=True)}
    und = dict(undecided.iter_rows()) if undecided is not None else {}
    cex = dict(consumer_examined.iter_rows()) if consumer_examined is not None else {}
    flagged = pl.concat(list(flags.values())).unique() if flags else pl.DataFrame(schema={T: pl.String, TP: pl.String})
    by_run: dict[Any, set] = {}
    for tid, tp in flagged.iter_rows():
        by_run.setdefault(tid, set()).add(tp)
    # Objects: the flagged partitions' ops, plus every producer_config and assign/subscribe of
    # those runs (the producer settings, the groups' members and generations they consult).
    found: dict[Any, dict[str, tuple[list[Anomaly], list[Anomaly]]]] = {}
    histories: dict[Any, History] = {}
    if by_run:
        sel = flagged.join(ops.select(T).unique(), on=T, how="semi")
        sub = pl.concat([
            ops.join(sel, on=[T, TP], how="semi"),
            ops.join(sel.select(T).unique(), on=T, how="semi").filter(
                c("f").is_in(["producer_config", "assign", "subscribe"])
                & ~pl.struct(T, TP).is_in(sel.select(pl.struct(T, TP)).to_series().implode())),
        ])
        for (tid,), part in sub.group_by(T):
            h = History(header or {}, to_ops(part, where, row_base))
            histories[tid] = h
            idx = build(h)
            res = log_checks.check_log(idx) + [linearizable.check(idx), consumer.check(idx)]
            found[tid] = {r.name: (r.anomalies, r.notes) for r in res}
    out: dict[Any, RunResult] = {}
    for tid in runs:
        k = cnt.get(tid, {"sends": 0, "polls": 0, "records": 0})
        examined = {"offsets": k["records"] or 0, "writes": k["sends"], "polls": k["polls"],
                    "sends": k["sends"], "linearizable": k["sends"] + k["polls"],
                    "consumer-offsets": cex.get(tid, 0)}
        fnd = found.get(tid, {})
        results: list[CheckResult] = []
        for name in PER_PARTITION:
            if name not in done:
                results.append(finish(name, 0, [], unknown="time limit reached before this check",
                                      limited=True))
                continue
            anomalies, notes = fnd.get(name, ([], []))
            unknown = ""
            if name == "writes" and und.get(tid):
                unknown = (f"{und[tid]} acknowledged write(s) were never read and no final read "
                           "began after them: lost or merely lagging cannot be told apart")
            results.append(finish(name, examined[name], anomalies, notes, unknown=unknown,
                                  limited=bool(unknown)))
        n = examined["linearizable"]
        lin = next(r for r in results if r.name == "linearizable")
        h = histories.get(tid)
        if lin.status == "valid":
            r = finish("cycles", n, [])
            r.reason = "no cycle by locality: every partition is linearizable"
            results.append(r)
        elif lin.status == "unknown":
            results.append(finish("cycles", 0, [], unknown="time limit reached before this check",
                                  limited=True))
        elif n > cycle_max_ops:
            results.append(finish("cycles", 0, [], unknown=f"graph not built ({n} ops > "
                                  f"{cycle_max_ops}) and some partition is not linearizable",
                                  limited=True))
        elif deadline is not None and time.monotonic() > deadline:
            results.append(finish("cycles", 0, [], unknown="time limit reached before this check",
                                  limited=True))
        else:
            # Some partition is not linearizable and the history is small: the whole of it
            # as objects, for the cross-partition graph (bounded by cycle_max_ops).
            full = (full_history or {}).get(tid)
            if full is None:
                full = History(header or {}, to_ops(ops.filter(c(T) == tid), where, row_base))
            results.append(cycles.check(build(full), lin_ok=False, max_ops=cycle_max_ops,
                                        deadline=deadline))
            h = full
        v = combine(results, n_ops[tid])
        wit = {}
        if h is not None:
            by_id = h.by_id()
            wit = {i: by_id[i] for a in v.anomalies + v.notes for i in a.witness if i in by_id}
        out[tid] = RunResult(tid, v, n_ops[tid], wit)
    return out


# ---------------------------------------------------------------------------------------------
# One history file, end to end (what check-history runs).

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
               cycle_max_ops: int = 200_000) -> FileCheck:
    """Reads and checks one history under one deadline (reading included). Input the
    columnar screens do not accept goes to the object reader (which raises HistoryError with
    the line or row) and the object checkers."""
    from traces import history_columnar as hc
    try:
        header, ev, where = hc.read(path, fmt, deadline)
    except hc.TimeUp:
        return FileCheck(_all_unknown("time limit reached while reading"), 0, {}, "columnar")
    except hc.NotColumnar:
        return _object_path(path, fmt, deadline, cycle_max_ops, "not plainly columnar")
    if deadline is not None and time.monotonic() > deadline:
        return FileCheck(_all_unknown("time limit reached while reading"), ev.height, {}, "columnar")
    if ev.height == 0 or screen_input(ev):
        return _object_path(path, fmt, deadline, cycle_max_ops, "the input screen flagged rows")
    ops = pair(ev)
    del ev
    base = 1 if where == "row" else 2
    (r,) = judge(ops, header, deadline, cycle_max_ops, where, base).values()
    return FileCheck(r.verdict, r.ops, r.witness_ops, "columnar")


def _object_path(path, fmt, deadline, cycle_max_ops, why) -> FileCheck:
    from checkers.history.run import check_history
    from traces.history import load
    h = load(path, fmt)          # raises HistoryError on bad input: exit 3 with the place
    v = check_history(h, cycle_max_ops=cycle_max_ops, deadline=deadline)
    by_id = h.by_id()
    wit = {i: by_id[i] for a in v.anomalies + v.notes for i in a.witness if i in by_id}
    return FileCheck(v, len(h.ops), wit, f"object: {why}", h)
