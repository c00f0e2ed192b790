"""The history Parquet layout: what decoding check-history's columns costs, per writer and
reader choice, on one generated history:
`python -m benchmarks.parquet_layout [--ops N | --file F] [--repeat R] [--writer W ...]`.

The history (seeded, as history_e2e generates it) is written once per writer choice below;
then each (writer, reader) pair decodes the columns check-history reads (checkers/history/
columnar.py NEEDED, plus `trace_id` and the row index) into a polars frame of the schema's
types, in a fresh subprocess pinned to one core (taskset -c 0, POLARS_MAX_THREADS=1, as
history_e2e). `cold` is the first decode in the process (the file in the page cache, the
decoder's code and allocator not yet warm: what one check-history run pays), `warm` the best of
two more. R rounds, pairs in turn, so that a shared machine's load falls on all alike; the
table gives the median of each figure, the file size, and the ratio of `base`'s cold CPU (the
layout written before this benchmark existed: zstd at pyarrow's default level, dictionary
pages for every column, a `trace_id` column) to each pair's. Prints seed= and the options first.

Writers (pyarrow.parquet.write_table options on top of base's, unless said otherwise):
  base          zstd (default level), dictionary for every column, trace_id column
  current       traces.history.write_parquet as it is now (the default layout)
  zstd-N, lz4, snappy, none    the compression
  dict-none     no dictionary pages;  dict-low: dictionary for the low-cardinality string
                columns only (type, f, topic, group, delivery, acks, trace_id)
  no-tid        no trace_id column (the header's trace_id, in the metadata, stands for it)
  rg-N          row groups of N rows;  page-N: data pages of N bytes
  no-stats      no column statistics
  int32         id, process, generation narrowed to int32 (the reader casts back)
  delta         DELTA_BINARY_PACKED for id and mono_ns (no dictionary for those)
  combos, named by their parts joined with '+'
Readers:
  polars-scan   pl.scan_parquet + select + streaming collect (what check-history does)
  polars-read   the same with the in-memory engine
  pyarrow       pyarrow.parquet.ParquetFile(path).read(columns, use_threads=False) (pre_buffer
                on), then pl.from_arrow
  pyarrow-table pyarrow.parquet.read_table(columns, use_threads=False) (imports pyarrow.dataset)
  pyarrow-nobuf the same as pyarrow with pre_buffer=False;  pyarrow-mmap: memory_map=True
  pyarrow-dict  the same with read_dictionary for the low-cardinality string columns
                (decoded as dictionaries, cast to strings in polars)"""
from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

LOW_CARD = ("trace_id", "type", "f", "topic", "group", "delivery", "acks")
READERS = ("polars-scan", "polars-read", "pyarrow", "pyarrow-table", "pyarrow-nobuf", "pyarrow-mmap",
           "pyarrow-dict")


def _part(name: str) -> dict:
    """pyarrow write options (and our own transforms, keys starting with '_') for one part."""
    if name in ("base", ""):
        return {}
    if name.startswith("zstd-"):
        return {"compression": "zstd", "compression_level": int(name[5:])}
    if name in ("lz4", "snappy", "none"):
        return {"compression": name}
    if name == "dict-none":
        return {"use_dictionary": False}
    if name == "dict-low":
        return {"use_dictionary": list(LOW_CARD)}
    if name == "no-tid":
        return {"_drop_tid": True}
    if name.startswith("rg-"):
        return {"row_group_size": int(float(name[3:]))}
    if name.startswith("page-"):
        return {"data_page_size": int(float(name[5:]))}
    if name == "no-stats":
        return {"write_statistics": False}
    if name == "int32":
        return {"_int32": ("id", "process", "generation")}
    if name == "delta":
        return {"_delta": ("id", "mono_ns")}
    raise click.BadParameter(f"unknown writer part {name!r}")


def write_variant(name: str, table, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    if name == "current":
        from traces.history import parquet_write_options   # as write_parquet writes
        pq.write_table(table.drop_columns(["trace_id"]), str(path), **parquet_write_options(True))
        return
    opts: dict = {"compression": "zstd"}
    for part in name.split("+"):
        opts.update(_part(part))
    if opts.pop("_drop_tid", False):
        table = table.drop_columns(["trace_id"])
    for n in opts.pop("_int32", ()):
        i = table.schema.get_field_index(n)
        table = table.set_column(i, pa.field(n, pa.int32(), table.schema.field(n).nullable),
                                 table.column(n).cast(pa.int32()))
    delta = opts.pop("_delta", ())
    if delta:
        d = opts.get("use_dictionary", True)
        names = [n for n in table.column_names if n not in delta]
        opts["use_dictionary"] = [n for n in (names if d is True else (d or [])) if n not in delta]
        opts["column_encoding"] = {n: "DELTA_BINARY_PACKED" for n in delta}
    pq.write_table(table, str(path), **opts)


def _decode(path: str, reader: str, cols: list[str], schema: dict) -> int:
    import polars as pl
    present = set(pl.read_parquet_schema(path)) if reader.startswith("polars") else None
    if reader.startswith("polars"):
        lf = pl.scan_parquet(path).with_row_index("row")
        sel = [pl.col(n).cast(schema[n]) if n in present else pl.lit(None, schema[n]).alias(n)
               for n in cols] + [pl.col("row").cast(pl.Int64)]
        df = lf.select(sel).collect(engine="streaming" if reader == "polars-scan" else "in-memory")
        return df.height
    import pyarrow.parquet as pq
    if reader == "pyarrow-table":
        have = pq.read_schema(path).names
        t = pq.read_table(path, columns=[n for n in cols if n in have], use_threads=False)
    else:
        kw = {}
        if reader == "pyarrow-nobuf":
            kw["pre_buffer"] = False
        if reader == "pyarrow-mmap":
            kw["memory_map"] = True
        if reader == "pyarrow-dict":
            kw["read_dictionary"] = [n for n in LOW_CARD if n in pq.read_schema(path).names]
        f = pq.ParquetFile(path, **kw)
        have = f.schema_arrow.names
        t = f.read(columns=[n for n in cols if n in have], use_threads=False)
    df = pl.from_arrow(t, rechunk=False)
    df = df.with_row_index("row").select(
        [pl.col(n).cast(schema[n]) if n in have else pl.lit(None, schema[n]).alias(n) for n in cols]
        + [pl.col("row").cast(pl.Int64)])
    return df.height


def _one(path: str, reader: str, cols: str) -> dict:
    import polars as pl  # noqa: F401  (imports before the clock)
    import pyarrow.parquet  # noqa: F401
    from traces.history_columnar import polars_schema
    schema = polars_schema()
    names = cols.split(",")
    c0 = time.process_time()
    rows = _decode(path, reader, names, schema)
    cold = time.process_time() - c0
    warm = []
    for _ in range(2):
        c0 = time.process_time()
        _decode(path, reader, names, schema)
        warm.append(time.process_time() - c0)
    return {"rows": rows, "cold": cold, "warm": min(warm)}


DEFAULT_WRITERS = ("base", "current", "zstd-1", "zstd-3", "zstd-9", "lz4", "snappy", "none",
                   "dict-none", "dict-low", "no-tid", "rg-65536", "rg-262144", "rg-4e6",
                   "page-65536", "page-8e6", "no-stats", "int32", "delta")


@click.command()
@click.option("--ops", type=int, default=1_000_000, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--partitions", type=int, default=8, show_default=True)
@click.option("--file", "src", type=click.Path(dir_okay=False, exists=True), default=None,
              help="a history Parquet file instead of a generated one")
@click.option("--repeat", type=int, default=3, show_default=True)
@click.option("--writer", "writers", multiple=True, help=f"writer choices (default: {', '.join(DEFAULT_WRITERS)})")
@click.option("--reader", "readers", multiple=True, type=click.Choice(READERS),
              help="readers for every writer (default polars-scan)")
@click.option("--all-readers", "all_readers", multiple=True,
              help="writers to decode with every reader (default: base and current)")
@click.option("--dir", "workdir", type=click.Path(file_okay=False), default=None)
@click.option("--one", nargs=3, type=str, default=None, hidden=True)
def main(ops, seed, partitions, src, repeat, writers, readers, all_readers, workdir, one):
    """Decoding cost of check-history's Parquet columns per writer and reader choice."""
    if one is not None:
        print(json.dumps(_one(*one)))
        return
    writers = writers or DEFAULT_WRITERS
    readers = readers or ("polars-scan",)
    all_readers = all_readers or ("base", "current")
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    print(f"seed={seed} ops={ops} partitions={partitions} file={src} repeat={repeat} "
          f"pinned={'one core' if pin else 'no'} python={platform.python_version()} "
          f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}", flush=True)
    import polars as pl
    import pyarrow.parquet as pq
    from checkers.history.screens.columnar import NEEDED
    d = Path(workdir or tempfile.mkdtemp(prefix="kv-pqlayout-")).resolve()
    d.mkdir(parents=True, exist_ok=True)
    if src is None:
        from checkers.history.generate import Params, generate_valid
        from traces.history import events_to_table, history_events
        h = generate_valid(Params(seed=seed, ops=ops, partitions=partitions))
        table = events_to_table(h.header, history_events(h.ops))
        del h
    else:
        table = pq.read_table(src)
    cols = ",".join(("trace_id",) + tuple(NEEDED))
    pairs = []
    for w in dict.fromkeys(list(writers) + list(all_readers)):
        p = d / f"{w.replace('+', '_')}.parquet"
        write_variant(w, table, p)
        for r in (READERS if w in all_readers else readers):
            pairs.append((w, r, p))
    del table
    env = dict(os.environ, POLARS_MAX_THREADS="1")
    res: dict[tuple[str, str], list[dict]] = {(w, r): [] for w, r, _ in pairs}
    for _ in range(repeat):
        for w, r, p in pairs:
            out = subprocess.run(pin + [sys.executable, "-m", "benchmarks.parquet_layout",
                                        "--one", str(p), r, cols], capture_output=True, text=True, env=env)
            if out.returncode:
                raise SystemExit(out.stderr)
            res[(w, r)].append(json.loads(out.stdout))
    med = {k: {f: statistics.median(x[f] for x in v) for f in ("cold", "warm")} for k, v in res.items()}
    ref = med.get(("base", "polars-scan"))
    print(f"{'writer':<28} {'reader':<14} {'MiB':>6} {'cold cpu s':>10} {'warm cpu s':>10} {'base/this (cold)':>16}")
    for w, r, p in pairs:
        m = med[(w, r)]
        ratio = f"{ref['cold'] / m['cold']:.2f}x" if ref else ""
        print(f"{w:<28} {r:<14} {p.stat().st_size / 2**20:>6.1f} {m['cold']:>10.3f} {m['warm']:>10.3f} {ratio:>16}",
              flush=True)
    print(f"rows={res[pairs[0][:2]][0]['rows']} load={os.getloadavg()[0]:.1f}")
    if not workdir:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
