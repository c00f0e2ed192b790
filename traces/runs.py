"""The bulk runs layout: many recorded runs in one Parquet dataset, partitioned so that Spark
(or anything else) reads it in parallel and never splits a run.

    DATASET/
      runs/part-00000.parquet          one row per run (RUN_SCHEMA): run id, configuration,
                                        fault summary, what was planted (generated runs)
      events/bucket=00000/part-00000.parquet
      events/bucket=00001/part-00000.parquet   ...
                                        one row per event: the history schema's Parquet
                                        columns (traces/history.py: trace_id = run id, then
                                        FIELDS), plus `row`, the event's 0-based row in its file

Rules of the layout (the one place that owns them):
- Every event of a run is in one file, contiguous, in the run's event order; a run's bucket is
  fixed by the writer (`bucket` = run index mod buckets for generated runs). A reader may take
  any set of whole files: it then holds whole runs.
- Each events file is one Parquet row group: engines split Parquet files only at row groups
  (Spark assigns a row group to the split holding its middle), so a run is never cut in two.
  Keep files under MAX_FILE_BYTES (the generator sizes buckets so).
- The schema metadata of each events file holds a header (format, version) as in the history
  format, so `check-history`'s reader accepts a one-run file.
- Transactional runs (history format version 2): a file holding any has version 2's columns
  too (txn, isolation, transactional_id) and a `version` column, 2 on every event of a
  version-2 run and null on the others (read as version 1, as is every event of a file
  without the column). A run is read in its own version, whatever its neighbours'.
Imports neither spec/ nor impl/.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from traces.history import FORMAT, PARQUET_META_KEY, VERSION, arrow_schema, parquet_write_options

LAYOUT = "kafkaverify-runs"
LAYOUT_VERSION = 1
MAX_FILE_BYTES = 96 << 20
RUN_FIELDS: list[tuple[str, Any]] = [
    ("trace_id", pa.string()),          # run id; the events' trace_id
    ("bucket", pa.int32()),
    ("seed", pa.int64()),
    ("source", pa.string()),            # "history-generator", "broker", "simulator", ...
    ("generation", pa.string()),        # protocol generation (spec/config.py GENERATIONS names)
    ("producer", pa.string()),          # producer settings label, e.g. "idempotent"
    ("fault_type", pa.string()),        # "none", "broker-crash", ...
    ("fault_rate", pa.float64()),
    ("ops", pa.int64()),
    ("planted", pa.string()),           # the anomaly planted ("" for none): generated runs only
    ("corrupt", pa.bool_()),            # a corrupt event was planted (generated runs only)
]


def run_schema() -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in RUN_FIELDS],
                     metadata={b"kafkaverify-runs": json.dumps(
                         {"layout": LAYOUT, "version": LAYOUT_VERSION}).encode()})


def event_schema(v2: bool = False) -> pa.Schema:
    """The events files' columns; with `v2` (a file holding transactional runs), version 2's
    columns and the per-run `version` column too."""
    s = arrow_schema(v2=v2)
    s = pa.schema(list(s) + [pa.field("row", pa.int64(), nullable=False)]
                  + ([pa.field(VERSION_COLUMN, pa.int32())] if v2 else []))
    header = {"format": FORMAT, "version": VERSION}
    return s.with_metadata({PARQUET_META_KEY: json.dumps(header, separators=(",", ":")).encode()})


VERSION_COLUMN = "version"      # per event: its run's history format version (null: 1)


def as_run_table(table: pa.Table, version: int) -> pa.Table:
    """One run's events table (traces.history.events_to_table) in the columns of an events
    file that may hold transactional runs: version 2's columns (null where the run has none)
    and `version` (its version on every event; null for version 1)."""
    cols = {}
    for f in arrow_schema(v2=True):
        cols[f.name] = (table.column(f.name) if f.name in table.column_names
                        else pa.nulls(table.num_rows, f.type))
    cols[VERSION_COLUMN] = pa.array([version if version > VERSION else None] * table.num_rows, pa.int32())
    return pa.table(cols)


def events_dir(dataset: str | Path) -> Path:
    return Path(dataset) / "events"


def runs_dir(dataset: str | Path) -> Path:
    return Path(dataset) / "runs"


def bucket_path(dataset: str | Path, bucket: int, part: int = 0) -> Path:
    return events_dir(dataset) / f"bucket={bucket:05d}" / f"part-{part:05d}.parquet"


def write_events(path: Path, table: pa.Table) -> None:
    """One events file (whole runs, in order); adds the `row` column."""
    path.parent.mkdir(parents=True, exist_ok=True)
    v2 = VERSION_COLUMN in table.column_names
    if v2:
        table = table.select([n for n in table.column_names if n != VERSION_COLUMN]
                             + [VERSION_COLUMN])
        table = table.add_column(table.num_columns - 1, "row", pa.array(range(table.num_rows), pa.int64()))
    else:
        table = table.append_column("row", pa.array(range(table.num_rows), pa.int64()))
    # One row group per file: Spark may split a file only at row groups, so a run is never
    # cut in two however Spark sizes its splits.
    pq.write_table(table.cast(event_schema(v2)), str(path), row_group_size=max(table.num_rows, 1),
                   **parquet_write_options(False))


def write_runs(dataset: str | Path, table: pa.Table, part: int = 0) -> None:
    d = runs_dir(dataset)
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.cast(run_schema()), str(d / f"part-{part:05d}.parquet"),
                   **parquet_write_options(False))


class LayoutError(Exception):
    pass


def check_dataset(dataset: str | Path) -> tuple[list[Path], list[Path]]:
    """(event files, run files) of a dataset, sorted; LayoutError if it is not one."""
    d = Path(dataset)
    if not d.is_dir():
        raise LayoutError(f"{d}: not a directory (a runs dataset has runs/ and events/)")
    ev = sorted(events_dir(d).glob("bucket=*/*.parquet"))
    runs = sorted(runs_dir(d).glob("*.parquet"))
    if not ev:
        raise LayoutError(f"{d}: no events/bucket=*/*.parquet files")
    if not runs:
        raise LayoutError(f"{d}: no runs/*.parquet files")
    return ev, runs


def read_runs(dataset: str | Path) -> pa.Table:
    _, runs = check_dataset(dataset)
    return pa.concat_tables([pq.read_table(str(p)) for p in runs])


def extract_run(dataset: str | Path, trace_id: str, out: str | Path) -> int:
    """Writes one run of a dataset as a one-history Parquet file (for check-history, shrink,
    the HTML report); returns its number of events."""
    import pyarrow.compute as pc
    runs = read_runs(dataset)
    hit = runs.filter(pc.equal(runs.column("trace_id"), trace_id))
    if hit.num_rows == 0:
        raise LayoutError(f"{dataset}: no run {trace_id!r}")
    b = hit.column("bucket")[0].as_py()
    tables = [pq.read_table(str(p)) for p in sorted(events_dir(dataset).glob(f"bucket={b:05d}/*.parquet"))]
    t = pa.concat_tables(tables)
    t = t.filter(pc.equal(t.column("trace_id"), trace_id)).drop_columns(["row", "trace_id"])
    if "bucket" in t.column_names:
        t = t.drop_columns(["bucket"])
    version = VERSION
    if VERSION_COLUMN in t.column_names:
        version = pc.max(t.column(VERSION_COLUMN)).as_py() or VERSION
        t = t.drop_columns([VERSION_COLUMN])
    # The one-history layout (traces.history.write_parquet): the trace_id is the header's.
    header = {"format": FORMAT, "version": version, "trace_id": trace_id}
    t = t.select(arrow_schema(trace_column=False, v2=version > VERSION).names)
    t = t.cast(arrow_schema(trace_column=False, v2=version > VERSION)).replace_schema_metadata(
        {PARQUET_META_KEY: json.dumps(header, separators=(",", ":")).encode()})
    pq.write_table(t, str(out), **parquet_write_options(True))
    return t.num_rows
