"""Columnar reading of the history format: JSON lines or Parquet into one polars frame with
the schema's columns (traces/history.py FIELDS) plus `trace_id` and `row` (0-based event row of
the file: Parquet row, or JSONL event line counted from the line after the header).

Parquet is read in record batches (bounded read buffers, only the file's own columns); JSON
lines are parsed by pyarrow's JSON reader in blocks against the explicit schema (a field the
schema lacks, or of the wrong type, is an error, as in the object reader). Any structural
problem raises NotColumnar: the caller then uses the object reader, whose HistoryError names
the line or row. This module decides nothing about validity itself.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from traces.history import FIELDS, PARQUET_META_KEY, REQUIRED, HistoryError, arrow_schema, check_header

BATCH_ROWS = 1 << 18
JSON_BLOCK = 8 << 20


class NotColumnar(Exception):
    """The file is not plainly readable as columns; the object reader will say why."""


class TimeUp(Exception):
    pass


def _polars_schema() -> dict[str, pl.DataType]:
    return dict(pl.from_arrow(arrow_schema().empty_table()).schema)


def _conform(df: pl.DataFrame, schema: dict[str, pl.DataType], row0: int, tid: Any) -> pl.DataFrame:
    cols = []
    for n, t in schema.items():
        if n in df.columns:
            cols.append(pl.col(n) if df.schema[n] == t else pl.col(n).cast(t))
        elif n == "trace_id":
            cols.append(pl.lit(tid, pl.String).alias(n))
        else:
            cols.append(pl.lit(None, t).alias(n))
    return df.select(cols).with_columns(pl.int_range(row0, row0 + df.height, dtype=pl.Int64).alias("row"))


def read_parquet(path: str, deadline: float | None = None) -> tuple[dict, pl.DataFrame]:
    import pyarrow.parquet as pq
    try:
        f = pq.ParquetFile(path)
    except FileNotFoundError:
        raise HistoryError(path, "", "cannot open: No such file or directory") from None
    except (pa.ArrowException, OSError):
        raise NotColumnar() from None
    meta = f.schema_arrow.metadata or {}
    if PARQUET_META_KEY not in meta:
        raise NotColumnar()
    try:
        header = check_header(path, "metadata", json.loads(meta[PARQUET_META_KEY]))
    except (json.JSONDecodeError, HistoryError):
        raise NotColumnar() from None
    names = f.schema_arrow.names
    want = arrow_schema()
    if any(n not in names for n in REQUIRED) or any(n not in want.names for n in names):
        raise NotColumnar()
    for n in names:    # a column of another type than the schema's: let the object reader judge
        if not f.schema_arrow.field(n).type.equals(want.field(n).type):
            raise NotColumnar()
    if deadline is not None and time.monotonic() > deadline:
        raise TimeUp()
    # polars' own Parquet reader (Rust, row groups decoded straight into columns): about 2x
    # faster here than pyarrow batches converted to polars.
    schema = _polars_schema()
    try:
        df = _conform(pl.read_parquet(path, use_pyarrow=False), schema, 0, header.get("trace_id"))
    except (pl.exceptions.PolarsError, OSError):
        raise NotColumnar() from None
    if df.get_column("trace_id").n_unique() > 1:
        raise NotColumnar()       # several histories in one file: the object reader says so
    return header, df.with_columns(pl.col("trace_id").fill_null(""))


def read_jsonl(path: str, deadline: float | None = None) -> tuple[dict, pl.DataFrame]:
    """pyarrow.json (C++; one pass, blocks of JSON_BLOCK bytes) against the explicit schema."""
    import pyarrow.json as pj
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise HistoryError(path, "", f"cannot open: {e.strerror}") from None
    with fh:
        first = fh.readline()
        try:
            header = check_header(path, "line 1", json.loads(first))
        except (json.JSONDecodeError, UnicodeDecodeError, HistoryError):
            raise NotColumnar() from None
        schema = arrow_schema()
        ev_schema = pa.schema([schema.field(n) for n in FIELDS])
        ev_schema = pa.schema([f.with_nullable(True) for f in ev_schema])
        try:
            reader = pj.open_json(fh, read_options=pj.ReadOptions(block_size=JSON_BLOCK),
                                  parse_options=pj.ParseOptions(explicit_schema=ev_schema,
                                                                unexpected_field_behavior="error",
                                                                newlines_in_values=False))
            pschema = _polars_schema()
            frames, row = [], 0
            for b in reader:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeUp()
                frames.append(_conform(pl.from_arrow(b), pschema, row, header.get("trace_id")))
                row += b.num_rows
        except (pa.ArrowException, StopIteration, ValueError):
            raise NotColumnar() from None
    df = pl.concat(frames) if frames else _conform(pl.DataFrame(schema=pschema), pschema, 0, None)
    return header, df.with_columns(pl.col("trace_id").fill_null(""))


def read(path: str | Path, fmt: str | None = None, deadline: float | None = None) -> tuple[dict, pl.DataFrame, str]:
    """(header, events, where-word): 'row' for Parquet, 'line' for JSON lines."""
    from traces.history import detect_format
    p = str(path)
    if detect_format(p, fmt) == "parquet":
        h, df = read_parquet(p, deadline)
        return h, df, "row"
    h, df = read_jsonl(p, deadline)
    return h, df, "line"
