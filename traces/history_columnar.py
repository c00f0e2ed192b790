"""Columnar reading of the history format: JSON lines or Parquet as one polars frame with the
schema's columns (traces/history.py FIELDS) plus `trace_id` and `row` (0-based event row of the
file: Parquet row, or JSONL event line counted from the line after the header).

Parquet is *scanned* (a polars LazyFrame): the caller projects the columns it needs and the
reader decodes only those (check-history never decodes keys, errors or wall clocks). The
schema is checked from the file's footer alone, without pyarrow. JSON lines are parsed by
pyarrow's JSON reader in blocks against the explicit schema (a field the schema lacks, or of the
wrong type, is an error, as in the object reader), and a long file is spilled to Arrow IPC as it
is parsed (read_jsonl). pyarrow's is the fastest strict reader into columns measured
(benchmarks/jsonl_parse.py, BENCHMARKS.md): polars' NDJSON reader and DuckDB's are
faster but lax (they drop unknown fields; polars reads 7 in a string field as "7", DuckDB
casts "1" and true to 1), and msgspec's strict typed decoder, 2x faster, yields Python objects
that cost more to turn into columns than it saves. Any structural problem raises NotColumnar:
the caller then uses the object reader, whose HistoryError names the line or row. This module
decides nothing about validity itself.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import polars as pl

from traces.history import FIELDS, PARQUET_META_KEY, REQUIRED, HistoryError, check_header

JSON_BLOCK = 8 << 20
JSON_PART = 1 << 20               # threaded: the least pyarrow parses in one part
_PL_TYPES = {"int64": pl.Int64, "int32": pl.Int32, "string": pl.String, "bool": pl.Boolean,
             "list<int64>": pl.List(pl.Int64), "list<string>": pl.List(pl.String)}


class NotColumnar(Exception):
    """The file is not plainly readable as columns; the object reader will say why."""


class TimeUp(Exception):
    pass


def polars_schema() -> dict[str, pl.DataType]:
    """trace_id and the schema's fields, as polars types (no pyarrow needed)."""
    return {"trace_id": pl.String, **{n: _PL_TYPES[t] for n, (_, t) in FIELDS.items()}}


def _conform(lf: pl.LazyFrame, present: dict[str, pl.DataType], tid: Any, row0: int = 0) -> pl.LazyFrame:
    """Every schema column (absent ones as nulls, trace_id from the header if absent) and `row`."""
    cols = []
    for n, t in polars_schema().items():
        if n in present:
            cols.append(pl.col(n) if present[n] == t else pl.col(n).cast(t))
        elif n == "trace_id":
            cols.append(pl.lit(tid, pl.String).alias(n))
        else:
            cols.append(pl.lit(None, t).alias(n))
    return lf.with_row_index("row", offset=row0).select(*cols, pl.col("row").cast(pl.Int64))


def scan_parquet(path: str, deadline: float | None = None, offset: int | None = None,
                 length: int | None = None) -> tuple[dict, pl.LazyFrame]:
    """(header, lazy frame of every schema column + row), or of `length` events from row
    `offset` (the slice is applied to the scan itself: polars then decodes only the row groups
    it needs, which it does not when slicing after a row index). Only the footer is read here."""
    try:
        meta = pl.read_parquet_metadata(path)
        present = dict(pl.read_parquet_schema(path))
    except FileNotFoundError:
        raise HistoryError(path, "", "cannot open: No such file or directory") from None
    except (pl.exceptions.PolarsError, OSError):
        raise NotColumnar() from None
    if PARQUET_META_KEY.decode() not in meta:
        raise NotColumnar()
    try:
        header = check_header(path, "metadata", json.loads(meta[PARQUET_META_KEY.decode()]))
    except (json.JSONDecodeError, HistoryError):
        raise NotColumnar() from None
    want = polars_schema()
    if any(n not in present for n in REQUIRED) or any(n not in want for n in present):
        raise NotColumnar()
    # A column of another type than the schema's: let the object reader judge.
    if any(present[n] != want[n] for n in present):
        raise NotColumnar()
    if deadline is not None and time.monotonic() > deadline:
        raise TimeUp()
    lf = pl.scan_parquet(path)
    if offset is not None:
        lf = lf.slice(offset, length)
    lf = _conform(lf, present, header.get("trace_id"), offset or 0)
    return header, lf.with_columns(pl.col("trace_id").fill_null(""))


def one_trace(lf: pl.LazyFrame) -> bool:
    """Whether the frame holds one history (one trace_id): several in one file are the object
    reader's to refuse."""
    try:
        return lf.select(pl.col("trace_id").n_unique()).collect().item() <= 1
    except (pl.exceptions.PolarsError, OSError):
        raise NotColumnar() from None


def _json_schema():
    """The events' Arrow schema for pyarrow's JSON reader: every field nullable (absent), and
    strings as string_view, polars' own string layout, so that handing the batches to polars
    copies nothing (with plain Arrow strings every string was copied into views again)."""
    import pyarrow as pa
    from traces.history import arrow_schema
    view = {pa.string(): pa.string_view(), pa.list_(pa.string()): pa.list_(pa.string_view())}
    return pa.schema([pa.field(n, view.get(t, t)) for n in FIELDS
                      for t in [arrow_schema().field(n).type]])


json_schema = _json_schema   # public: benchmarks/jsonl_parse.py parses with it


def _blocks(fh) -> Iterator[tuple[bytes, int]]:
    """(block, lines in it): whole lines of about JSON_BLOCK bytes each (a longer line is one
    block of its own); the last block may end without a newline (a truncated last line)."""
    rest = b""
    while True:
        buf = fh.read(JSON_BLOCK)
        if not buf:
            break
        buf = rest + buf
        cut = buf.rfind(b"\n") + 1
        if cut == 0:                        # no line ends in it yet: read on
            rest = buf
            continue
        rest = buf[cut:]
        yield buf[:cut], buf.count(b"\n", 0, cut)
    if rest:
        yield rest, 1


def read_jsonl(path: str, deadline: float | None = None) -> tuple[dict, pl.DataFrame | pl.LazyFrame]:
    """pyarrow.json (C++, strict: explicit schema, unknown field = error) over blocks of about
    JSON_BLOCK bytes cut at line ends, so memory holds the columns and one block of text, never
    the file's lines as Python objects. One parser thread when polars has one (a pinned core,
    where pyarrow's own pool could only add switching), pyarrow's pool otherwise. A block
    whose row count differs from its line count had a blank line, which pyarrow skips and the
    object reader counts: event rows would no longer be line numbers, so the object reader
    takes such a file. Measured against other parsers in benchmarks/jsonl_parse.py.

    Up to SPILL_EVENTS events the columns stay in memory (a DataFrame). A longer file is
    spilled as it is parsed, SPILL_BLOCK events at a time, to uncompressed Arrow IPC files in a
    temporary directory, and comes back as a LazyFrame scanning them: memory is then bounded by
    a spill block, and the caller decodes only the columns and slices it asks for, as from
    Parquet. The directory goes when that LazyFrame does (or at exit)."""
    import pyarrow as pa
    import pyarrow.json as pj
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise HistoryError(path, "", f"cannot open: {e.strerror}") from None
    threads = pl.thread_pool_size() > 1
    parse = pj.ParseOptions(explicit_schema=_json_schema(), unexpected_field_behavior="error",
                            newlines_in_values=False)
    held, rows, spill = [], 0, _Spill()
    try:
        with fh:
            first = fh.readline()
            try:
                header = check_header(path, "line 1", json.loads(first))
            except (json.JSONDecodeError, UnicodeDecodeError, HistoryError):
                raise NotColumnar() from None
            for buf, lines in _blocks(fh):
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeUp()
                t = _parse_block(buf, parse, threads)
                if t.num_rows != lines:
                    raise NotColumnar()
                held.extend(t.to_batches())
                rows += t.num_rows
                if rows > SPILL_EVENTS or (spill.files and rows >= SPILL_BLOCK):
                    spill.write(_frame(held))
                    held, rows = [], 0
        tid = header.get("trace_id") or ""
        if not spill.files:
            # trace_id is the header's for every event (the events have no such field): a
            # constant, never a column of a million copies.
            df = _frame(held)
            return header, _conform(df.lazy(), dict(df.schema), tid).collect()
        if held:
            spill.write(_frame(held))
        del held
        lf = pl.scan_ipc([str(f) for f in spill.files])
        lf = _conform(lf, {n: t for n, t in polars_schema().items() if n in FIELDS}, tid)
        spill.keep_while(lf)
        return header, lf
    except BaseException:
        spill.remove()
        raise


def _parse_block(buf: bytes, parse, threads: bool):
    """One block of whole lines as an Arrow table. Threaded, pyarrow splits it into parts of
    at least JSON_PART bytes, and a line longer than a part is an error there: the block is
    then parsed again in one part, so that only malformed input leaves the fast path."""
    import pyarrow as pa
    import pyarrow.json as pj
    sizes = [len(buf) + 1]
    if threads:
        sizes.insert(0, max(JSON_PART, len(buf) // pl.thread_pool_size()))
    for size in sizes:
        try:
            return pj.read_json(pa.BufferReader(buf), read_options=pj.ReadOptions(
                block_size=size, use_threads=threads), parse_options=parse)
        except (pa.ArrowException, ValueError):
            continue
    raise NotColumnar()


# Events held in memory before a JSON-lines file is spilled, and events per spill file.
SPILL_EVENTS = 2_500_000
SPILL_BLOCK = 1 << 20


def _frame(batches: list) -> pl.DataFrame:
    import pyarrow as pa
    if batches:
        return pl.from_arrow(pa.Table.from_batches(batches), rechunk=False)
    schema = polars_schema()
    return pl.DataFrame(schema={n: schema[n] for n in FIELDS})


class _Spill:
    """The spill files of one JSON-lines file, in a temporary directory of their own."""

    def __init__(self):
        self.dir: Path | None = None
        self.files: list[Path] = []

    def write(self, df: pl.DataFrame) -> None:
        import tempfile
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="kv-jsonl-"))
        f = self.dir / f"part-{len(self.files):05d}.arrow"
        df.write_ipc(f, compression="uncompressed")
        self.files.append(f)

    def keep_while(self, owner: object) -> None:
        """Remove the directory once `owner` is gone (or at interpreter exit)."""
        import shutil
        import weakref
        if self.dir is not None:
            weakref.finalize(owner, shutil.rmtree, str(self.dir), True)

    def remove(self) -> None:
        import shutil
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def read(path: str | Path, fmt: str | None = None, deadline: float | None = None,
         lazy: bool = False) -> tuple[dict, pl.DataFrame | pl.LazyFrame, str]:
    """(header, events, where-word): 'row' for Parquet, 'line' for JSON lines. With `lazy`, a
    Parquet file comes back as a LazyFrame (nothing decoded yet; the caller projects)."""
    from traces.history import detect_format
    p = str(path)
    if detect_format(p, fmt) == "parquet":
        h, lf = scan_parquet(p, deadline)
        if not lazy:
            if not one_trace(lf):
                raise NotColumnar()
            try:
                return h, lf.collect(), "row"
            except (pl.exceptions.PolarsError, OSError):
                raise NotColumnar() from None
        return h, lf, "row"
    h, ev = read_jsonl(p, deadline)      # one history: trace_id is the header's
    if isinstance(ev, pl.LazyFrame):     # spilled (a long file)
        if lazy:
            return h, ev, "line"
        try:
            return h, ev.collect(), "line"
        except (pl.exceptions.PolarsError, OSError):
            raise NotColumnar() from None
    return h, (ev.lazy() if lazy else ev), "line"
