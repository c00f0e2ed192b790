"""One history file tiled into a larger one: copies of it, each on its own topics, processes,
groups and ids, one after the other in time. A valid history stays valid and partitions stay
independent, so a history of 10^7 operations comes from a generated one of 10^6 (the generator
holds every operation as an object: 10^7 of them would need some 7 GiB). The end-to-end
benchmark (benchmarks/history_e2e.py) and the chunked checker's tests use it.
"""
from __future__ import annotations

import json
from pathlib import Path

from traces.history import FIELDS, PARQUET_META_KEY, arrow_schema, parquet_write_options


def tile(src: Path, dst: Path, copies: int, trace_column: bool = False, jsonl: Path | None = None) -> None:
    """`copies` copies of one Parquet history file, each on its own topics, processes, groups
    and ids, one after the other in time (so each copy's events keep their order). Written in
    the layout of traces.history.write_parquet, or with `trace_column` in the one with a
    trace_id column and zstd (the many-histories layout, which was the one-history layout
    before LZ4); and with `jsonl` as JSON lines too (as traces.history.write_jsonl writes
    them)."""
    import polars as pl
    import pyarrow.parquet as pq
    f = pq.ParquetFile(str(src))
    meta = f.schema_arrow.metadata
    df = pl.read_parquet(src).drop("trace_id", strict=False)
    c = pl.col
    span = int(df.get_column("mono_ns").max() - df.get_column("mono_ns").min()) + 1
    ids = int(df.get_column("id").max()) + 1
    procs = int(df.get_column("process").max()) + 1
    header = json.loads(meta[PARQUET_META_KEY])
    schema = arrow_schema(trace_column=trace_column).with_metadata({PARQUET_META_KEY: meta[PARQUET_META_KEY]})
    jf = open(jsonl, "w", encoding="utf-8") if jsonl else None
    if jf:
        jf.write(json.dumps(header, separators=(",", ":")) + "\n")
    names = list(FIELDS)
    try:
        with pq.ParquetWriter(str(dst), schema, **parquet_write_options(not trace_column)) as w:
            for j in range(copies):
                part = df.with_columns(
                    c("id") + j * ids, c("process") + j * procs, c("mono_ns") + j * span,
                    c("wall_ns") + j * span, c("topic") + f"-{j}", c("group") + f"-{j}")
                if trace_column:
                    part = part.select(pl.lit(header.get("trace_id"), pl.String).alias("trace_id"), pl.all())
                w.write_table(part.to_arrow().cast(schema))
                if jf:
                    dumps = json.JSONEncoder(separators=(",", ":")).encode
                    jf.writelines(dumps({n: v for n, v in zip(names, row) if v is not None}) + "\n"
                                  for row in part.select(names).iter_rows())
    finally:
        if jf:
            jf.close()
