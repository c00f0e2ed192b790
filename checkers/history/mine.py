"""Mining a bucket of runs: the pipeline (checkers/history/pipeline/judge.py: the polars screens,
then the oracle on flagged partitions) over the events of many runs at once, as one call. Spark's mapInArrow calls `mine_batches` once per task (a set of
whole files, traces/runs.py); the local engine calls it per file. Both return the same two
Arrow tables, so `kafkaverify mine` and `check-history` cannot disagree by construction
other than through this module (and a test runs both on the same runs).

  verdicts:   trace_id, status (valid|invalid|unknown|corrupt), ops, events, types (list<string>),
              file, error (corrupt runs: the reader's message with its row)
  violations: trace_id, partition, type, witness (list<int64>), witness_len, explanation,
              witness_ops (one line per witness operation), file

Only invalid runs produce violations; clean runs are decided in columns (no Python per run).
A run whose events break the format (a corrupt row) is reported, with the file and the row
the object reader names, as status 'corrupt': not dropped, not checked.
"""
from __future__ import annotations

from typing import Iterable, Iterator

import polars as pl
import pyarrow as pa

from checkers.history.oracle.check import check_history
from checkers.history.pipeline.judge import judge
from checkers.history.screens.columnar import encode, pair, prepare, screen_runs
from traces.runs import VERSION_COLUMN
from traces.history import ALL_FIELDS, FORMAT, TXN_VERSION, V2_TYPES, VERSION, HistoryError
from traces.history import pair as pair_events

VERDICT_SCHEMA = pa.schema([
    ("trace_id", pa.string()), ("status", pa.string()), ("ops", pa.int64()), ("events", pa.int64()),
    ("types", pa.list_(pa.string())), ("file", pa.string()), ("error", pa.string())])
VIOLATION_SCHEMA = pa.schema([
    ("trace_id", pa.string()), ("partition", pa.string()), ("type", pa.string()),
    ("witness", pa.list_(pa.int64())), ("witness_len", pa.int32()), ("explanation", pa.string()),
    ("witness_ops", pa.string()), ("file", pa.string())])
# One output schema for Spark (mapInArrow yields one kind of batch): both tables as rows of
# a union with a `kind` column ("verdict" | "violation").
OUT_SCHEMA = pa.schema([("kind", pa.string())] + [f for f in VERDICT_SCHEMA]
                       + [f for f in VIOLATION_SCHEMA if f.name not in ("trace_id", "file")])


def mine_frame(ev: pl.DataFrame, file_col: str = "file") -> tuple[pa.Table, pa.Table]:
    """Checks every run in `ev` (trace_id, the history columns, row, file); runs must be whole
    and contiguous (the layout guarantees it per file)."""
    c = pl.col
    if ev.height == 0:
        return VERDICT_SCHEMA.empty_table(), VIOLATION_SCHEMA.empty_table()
    if file_col not in ev.columns:
        ev = ev.with_columns(pl.lit(None, pl.String).alias(file_col))
    # A run is contiguous: its integer code counts the changes of trace_id (no hashing).
    ev = ev.with_columns(((c("trace_id") != c("trace_id").shift(1)).fill_null(True)
                          .cast(pl.Int64).cum_sum() - 1).alias("run")).with_row_index("_i")
    runs = ev.group_by("run").agg(c("trace_id").first(), c(file_col).first().alias("file"),
                                  pl.len().alias("events"))
    tid = dict(zip(runs.get_column("run").to_list(), runs.get_column("trace_id").to_list()))
    fil = dict(zip(runs.get_column("run").to_list(), runs.get_column("file").to_list()))
    nev = dict(zip(runs.get_column("run").to_list(), runs.get_column("events").to_list()))
    # Transactional runs (history format version 2, traces/runs.py): the screens do not know
    # transactions or assignment sets; the oracle judges each such run whole.
    v2: dict[int, pl.DataFrame] = {}
    if VERSION_COLUMN in ev.columns:
        runs2 = ev.filter(c(VERSION_COLUMN) >= TXN_VERSION).get_column("run").unique().to_list()
        if runs2:
            keep2 = c("run").is_in(pl.Series(runs2, dtype=pl.Int64).implode())
            v2 = ev.filter(keep2).partition_by("run", as_dict=True, include_key=True)
            v2 = {k[0]: d for k, d in v2.items()}
            ev = ev.filter(~keep2)
        ev = ev.drop(*[n for n in (*V2_TYPES, VERSION_COLUMN) if n in ev.columns])
    pd = pair(prepare(encode(ev.lazy())).collect()) if ev.height else None
    bad = pd.bad if pd is not None else set()
    verdicts: list[dict] = []
    violations: list[dict] = []
    headers = {r: {"format": FORMAT, "version": VERSION, "trace_id": tid[r]} for r in tid}

    def emit(run: int, v, n_ops: int, witness_ops: dict) -> None:
        verdicts.append({"trace_id": tid[run], "status": v.status, "ops": n_ops, "events": nev[run],
                         "types": sorted(v.types()), "file": fil[run], "error": None})
        for a in v.anomalies:
            lines = "\n".join(f"{witness_ops[i].describe()}  ({witness_ops[i].where})"
                              for i in a.witness if i in witness_ops)
            violations.append({"trace_id": tid[run], "partition": a.partition, "type": a.type,
                               "witness": list(a.witness), "witness_len": len(a.witness),
                               "explanation": a.explanation, "witness_ops": lines, "file": fil[run]})

    # Runs the input screen flagged, and transactional runs: the object reader decides (and
    # names the row).
    for run in sorted(bad | set(v2)):
        part = v2[run] if run in v2 else ev.filter(c("run") == run)
        names = [n for n in ALL_FIELDS if n in part.columns]
        evs = [(f"row {r['row'] + 1}", {n: r[n] for n in names if r[n] is not None})
               for r in part.sort("row").select(*names, "row").iter_rows(named=True)]
        header = dict(headers[run], version=TXN_VERSION) if run in v2 else headers[run]
        try:
            h = pair_events(fil[run] or "", header, evs)
        except HistoryError as e:
            verdicts.append({"trace_id": tid[run], "status": "corrupt", "ops": 0, "events": nev[run], "types": [],
                             "file": fil[run], "error": str(e)})
            continue
        v = check_history(h)
        by_id = h.by_id()
        emit(run, v, len(h.ops), by_id)
    if bad:
        keep = ~c("run").is_in(pl.Series(sorted(bad), dtype=pl.Int64).implode())
        ev, pd = ev.filter(keep), pd.without(bad)
    clean: list[pl.DataFrame] = []
    if pd is not None and pd.ops.height:
        for run, r in judge(pd, ev.filter, headers, clean=clean).items():
            emit(run, r.verdict, r.ops, r.witness_ops)
    vt = pa.Table.from_pylist(verdicts, VERDICT_SCHEMA)
    if clean and clean[0].height:
        cl = clean[0].with_columns(
            c("run").replace_strict(list(tid), list(tid.values()), return_dtype=pl.String).alias("trace_id"),
            c("run").replace_strict(list(fil), list(fil.values()), return_dtype=pl.String).alias("file"),
            c("run").replace_strict(list(nev), list(nev.values()), return_dtype=pl.Int64).alias("events"),
            pl.lit([], pl.List(pl.String)).alias("types"), pl.lit(None, pl.String).alias("error"))
        vt = pa.concat_tables([vt, cl.select(VERDICT_SCHEMA.names).to_arrow().cast(VERDICT_SCHEMA)])
    return vt, pa.Table.from_pylist(violations, VIOLATION_SCHEMA)


# -- The lean pass (Spark): the JVM ships the encoded columns only (checkers/history/screens/columnar.py
# ENCODED, strings as xxhash64, the small enums packed into `tags`) and each run's screen
# verdict comes back; the full rows of the runs a screen flags are fetched in a second,
# filtered pass and checked by `mine_batches`, exactly as the local engine checks them.

# Bit layout of `tags` (one int per event): type (3 bits: 0 = absent or unknown, else 1 +
# its index in TYPES), f (3 bits, FS), delivery (2 bits: 0 absent, 1 + index in
# DELIVERY_MODES, 3 unknown), final (2 bits: 0 absent, 1 false, 2 true), extra (1 bit: some
# PRESENCE_ONLY field present), v2 (1 bit: an event of a transactional run, traces/runs.py).
TAG_SHIFT = {"type": 0, "f": 3, "delivery": 6, "final": 8, "extra": 10, "v2": 11}
LEAN_OUT_SCHEMA = pa.schema([("th", pa.int64()), ("file", pa.string()), ("status", pa.string()),
                             ("ops", pa.int64()), ("events", pa.int64())])
FLAGGED = "flagged"


def decode_lean(tb: pa.Table) -> pl.DataFrame:
    """The Spark lean select's columns (th, file on each file's first row, tags, ints, hashes,
    lists) to the encoded frame of checkers/history/screens/columnar.py, with `th` and `file` kept."""
    from traces.history import DELIVERY_MODES, FS, TYPES
    c = pl.col
    df = pl.from_arrow(tb)
    tags = df.get_column("tags").cast(pl.Int64)

    def field(name, bits):
        return (tags // (1 << TAG_SHIFT[name])) % (1 << bits)

    def enum(name, names, bits):
        code = field(name, bits)
        idx = pl.select(pl.when((code > 0) & (code <= len(names))).then(code - 1)).to_series()
        return pl.Series(names, dtype=pl.Enum(names)).gather(idx).alias(name)
    fin = field("final", 2)
    dcode = field("delivery", 2)
    return df.with_columns(
        enum("type", TYPES, 3), enum("f", FS, 3), enum("delivery", DELIVERY_MODES, 2),
        (dcode == 3).alias("dunk"),
        pl.select(pl.when(fin > 0).then(fin == 2)).to_series().alias("final"),
        (field("extra", 1) == 1).alias("extra"),
        (field("v2", 1) == 1).alias("v2"),
        c("file").forward_fill(),
        # A run is contiguous: its integer code counts the changes of its hash.
        ((c("th") != c("th").shift(1)).fill_null(True).cast(pl.Int64).cum_sum() - 1).alias("run"),
    ).drop("tags").with_row_index("_i")


def screen_lean(ev: pl.DataFrame) -> pa.Table:
    """One row per run of `ev` (decoded lean events): its hash, file, events, operations and
    either its verdict (valid | unknown, decided in columns) or FLAGGED (broken input or a
    flagged partition: the object checkers decide, from the full rows)."""
    c = pl.col
    runs = ev.group_by("run").agg(c("th").first(), c("file").first(), pl.len().cast(pl.Int64).alias("events"))
    st = screen_runs(pair(prepare(ev.lazy()).collect()))
    out = runs.join(st, on="run", how="left").with_columns(
        c("status").fill_null(FLAGGED), c("ops").fill_null(0).cast(pl.Int64))
    if "v2" in ev.columns:      # transactional runs: the oracle judges them (mine_frame)
        v2 = ev.filter(c("v2")).get_column("run").unique()
        out = out.with_columns(pl.when(c("run").is_in(v2.implode())).then(pl.lit(FLAGGED))
                               .otherwise(c("status")).alias("status"))
    return out.select(LEAN_OUT_SCHEMA.names).to_arrow().cast(LEAN_OUT_SCHEMA)


def screen_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The lean pass's mapInArrow function: all batches of a task (whole files) as one bucket."""
    import gc
    gc.disable()
    try:
        tb = pa.Table.from_batches(list(batches))
        if tb.num_rows == 0:
            return
        yield from screen_lean(decode_lean(tb)).to_batches(max_chunksize=1 << 16)
    finally:
        gc.enable()


def _as_frame(batches: Iterable[pa.RecordBatch]) -> pl.DataFrame:
    tb = pa.Table.from_batches(list(batches))
    return pl.from_arrow(tb) if tb.num_rows else pl.DataFrame()


def union_table(vt: pa.Table, xt: pa.Table) -> pa.Table:
    """Both tables as rows of OUT_SCHEMA (for one mapInArrow output)."""
    def widen(t: pa.Table, kind: str) -> pa.Table:
        cols = {"kind": pa.array([kind] * t.num_rows, pa.string())}
        for f in OUT_SCHEMA:
            if f.name == "kind":
                continue
            cols[f.name] = t.column(f.name) if f.name in t.column_names else pa.nulls(t.num_rows, f.type)
        return pa.table(cols, schema=OUT_SCHEMA)
    return pa.concat_tables([widen(vt, "verdict"), widen(xt, "violation")])


def mine_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The mapInArrow function: all batches of a task (whole files), checked as one bucket."""
    import gc
    gc.disable()    # the kernel builds no cycles; Op objects exist only for flagged runs
    try:
        ev = _as_frame(batches)
        if ev.height == 0:
            return
        vt, xt = mine_frame(ev)
        yield from union_table(vt, xt).to_batches(max_chunksize=1 << 16)
    finally:
        gc.enable()


def read_file(path: str) -> pl.DataFrame:
    """One events file as the kernel reads it (the same in every engine): every column, the
    file's path in `file`."""
    return pl.read_parquet(path).with_columns(pl.lit(str(path)).alias("file")).drop("bucket", strict=False)


def mine_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The mapInArrow function of Spark's executor-read job: each row names an events file,
    which this Python worker reads itself (polars) and checks as one bucket, as the local
    engine does; the JVM never converts an event."""
    import gc
    gc.disable()
    try:
        for b in batches:
            for path in b.column("path").to_pylist():
                vt, xt = mine_frame(read_file(path))
                yield from union_table(vt, xt).to_batches(max_chunksize=1 << 16)
    finally:
        gc.enable()


def mine_local(dataset: str, out: str | None = None, progress=None):
    """The same job without Spark: one file at a time through the kernel, in this process
    (memory: one file's events). Returns the summary (checkers/history/mine_report.py)."""
    import time
    from pathlib import Path
    from checkers.history.mine_report import aggregate_local
    from traces.runs import check_dataset, read_runs
    t0 = time.perf_counter()
    files, _ = check_dataset(dataset)
    runs = pl.from_arrow(read_runs(dataset))
    vts, xts, events = [], [], 0
    for i, f in enumerate(files):
        ev = read_file(str(f))
        events += ev.height
        vt, xt = mine_frame(ev)
        vts.append(vt)
        xts.append(xt)
        if progress:
            progress(i + 1, len(files))
    verdicts = pl.from_arrow(pa.concat_tables(vts))
    violations = pl.from_arrow(pa.concat_tables(xts))
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        violations.write_parquet(Path(out) / "violations.parquet")
        verdicts.write_parquet(Path(out) / "verdicts.parquet")
    return aggregate_local(verdicts, violations, runs, events, time.perf_counter() - t0, "local kernel")
