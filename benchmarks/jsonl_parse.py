"""JSON-lines parsers side by side on one history file, against check-history's own reader:
`python -m benchmarks.jsonl_parse [--ops N | --file F] [--repeat R]`.

Each parser runs in a fresh subprocess pinned to one core (taskset -c 0, POLARS_MAX_THREADS=1,
as history_e2e), on the same file, R rounds in turn (so that a shared machine's load falls on
all of them alike); the table gives each one's CPU seconds (best and median), rows, peak RSS,
and its ratio to the reader. Parse only: no pairing, no checks. What each one yields differs,
and so does what it refuses — the reader's contract (an unknown field, a wrong type, a blank
line: the object reader takes the file) is met by `reader` alone:

  reader    traces.history_columnar.read_jsonl: the polars frame the kernel takes
  pyarrow   pyarrow.json, one thread, the reader's explicit schema, unknown field = error:
            Arrow columns (the reader's parser, bare)
  polars    polars.read_ndjson with the schema: columns; drops unknown fields, reads 7 or
            true in a string field as "7" / "true"
  duckdb    DuckDB's read_json with the columns, one thread: Arrow columns; drops unknown
            fields and casts "1" and true to 1, 1.5 to 2
  msgspec   msgspec.json typed decode (Struct, unknown field = error, strict types), in
            blocks: Python objects, no columns
  msgspec-cols  the same, then each block's objects turned into Arrow columns (a field at a
            time: attrgetter over the objects, pyarrow.array) and a polars frame: strict, the
            reader's output, by way of Python objects
  orjson    orjson.loads line by line: untyped Python objects
With --baseline DIR (a checkout of an earlier revision), that checkout's reader runs too, as
`base-reader`, in the same rounds: the same-run baseline. Parsers whose package is not
installed are listed as such (duckdb is in the `test` extra, msgspec and orjson in `bench`:
pip install -e '.[test,bench]'). Prints seed= and the options first."""
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

PARSERS = ("reader", "pyarrow", "polars", "duckdb", "msgspec", "msgspec-cols", "orjson")
BLOCK = 8 << 20


def _lines(path: str):
    """The file after its header line, in blocks of whole lines."""
    with open(path, "rb") as fh:
        fh.readline()
        rest = b""
        while buf := fh.read(BLOCK):
            buf = rest + buf
            cut = buf.rfind(b"\n") + 1
            rest = buf[cut:]
            if cut:
                yield buf[:cut]
        if rest:
            yield rest


def _parse(path: str, parser: str) -> int:
    """Rows parsed (events)."""
    from traces.history import FIELDS
    if parser == "reader":
        from traces.history_columnar import read_jsonl
        return read_jsonl(path)[1].height
    if parser == "pyarrow":
        import pyarrow as pa
        import pyarrow.json as pj
        from traces.history_columnar import json_schema
        opts = pj.ParseOptions(explicit_schema=json_schema(), unexpected_field_behavior="error",
                               newlines_in_values=False)
        return sum(pj.read_json(pa.BufferReader(b), parse_options=opts, read_options=pj.ReadOptions(
            block_size=len(b) + 1, use_threads=False)).num_rows for b in _lines(path))
    if parser == "polars":
        import polars as pl
        from traces.history_columnar import polars_schema
        schema = polars_schema()
        return sum(pl.read_ndjson(b, schema={n: schema[n] for n in FIELDS}).height for b in _lines(path))
    if parser == "duckdb":
        import duckdb
        sql = {"int64": "BIGINT", "int32": "INTEGER", "string": "VARCHAR", "bool": "BOOLEAN",
               "list<int64>": "BIGINT[]", "list<string>": "VARCHAR[]"}
        cols = {n: sql[t] for n, (_, t) in FIELDS.items()}
        con = duckdb.connect(config={"threads": 1})
        rel = con.sql(f"SELECT * FROM read_json(?, format='newline_delimited', columns={cols})",
                      params=[path])
        return sum(b.num_rows for b in rel.to_arrow_reader(1 << 17)) - 1   # the header's row
    if parser == "msgspec":
        import msgspec
        dec = msgspec.json.Decoder(_msgspec_event())
        return sum(len(dec.decode_lines(b)) for b in _lines(path))
    if parser == "msgspec-cols":
        from operator import attrgetter

        import msgspec
        import polars as pl
        import pyarrow as pa
        from msgspec import UNSET

        from traces.history_columnar import json_schema
        dec = msgspec.json.Decoder(_msgspec_event())
        schema = json_schema()
        frames = []
        for b in _lines(path):
            evs = dec.decode_lines(b)
            cols = [pa.array([None if v is UNSET else v for v in map(attrgetter(n), evs)], type=schema.field(n).type)
                    for n in FIELDS]
            frames.append(pl.from_arrow(pa.table(cols, schema=schema)))
        return pl.concat(frames).height
    if parser == "orjson":
        import orjson
        n = 0
        for b in _lines(path):
            for line in b.splitlines():
                orjson.loads(line)
                n += 1
        return n
    raise SystemExit(f"unknown parser {parser}")


def _msgspec_event():
    """The schema as a msgspec Struct: absent fields UNSET (null is refused), ints and bools
    kept apart, 32-bit fields bounded; unknown fields refused."""
    from typing import Annotated

    import msgspec
    from msgspec import UNSET, Meta, UnsetType

    from traces.history import FIELDS, REQUIRED
    i32 = Annotated[int, Meta(ge=-2**31, le=2**31 - 1)]
    py = {"int64": int, "int32": i32, "string": str, "bool": bool, "list<int64>": list[int],
          "list<string>": list[str]}
    fields = [(n, py[t]) for n, (_, t) in FIELDS.items() if n in REQUIRED]
    fields += [(n, py[t] | UnsetType, UNSET) for n, (_, t) in FIELDS.items() if n not in REQUIRED]
    return msgspec.defstruct("Event", fields, forbid_unknown_fields=True, gc=False)


IMPORTS = {"reader": ("polars", "pyarrow.json", "traces.history_columnar"),
           "pyarrow": ("pyarrow.json", "traces.history_columnar"), "polars": ("polars",),
           "duckdb": ("duckdb", "polars"), "msgspec": ("msgspec",),
           "msgspec-cols": ("msgspec", "polars", "pyarrow", "traces.history_columnar"), "orjson": ("orjson",)}


def _one(path: str, parser: str) -> dict:
    """CPU seconds of the parse alone: the packages are imported before the clock starts."""
    import gc
    import importlib
    try:
        for m in IMPORTS[parser]:
            importlib.import_module(m)
    except ImportError as e:
        return {"parser": parser, "missing": str(e.name)}
    gc.disable()        # the object parsers keep millions of objects alive: no collections
    c0 = time.process_time()
    rows = _parse(path, parser)
    cpu = time.process_time() - c0
    from benchmarks.history_e2e import peak_mib
    return {"parser": parser, "rows": rows, "cpu_s": cpu, "peak_rss_mib": peak_mib()}


@click.command()
@click.option("--ops", type=int, default=1_000_000, show_default=True,
              help="generate a valid history of this many operations")
@click.option("--file", "file_", type=click.Path(dir_okay=False, exists=True), default=None,
              help="parse this history file instead of generating one")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--partitions", type=int, default=8, show_default=True)
@click.option("--repeat", type=int, default=3, show_default=True, help="rounds over all parsers")
@click.option("--parser", "parsers", type=click.Choice(PARSERS), multiple=True,
              help="parsers to run (default: all)")
@click.option("--baseline", type=click.Path(file_okay=False, exists=True), default=None,
              help="a checkout of an earlier revision: its reader runs too, as 'base-reader'")
@click.option("--one", nargs=2, type=str, default=None, hidden=True)
def main(ops, file_, seed, partitions, repeat, parsers, baseline, one):
    """Bare JSON-lines parsers against check-history's reader, same file, same run."""
    if one is not None:
        print(json.dumps(_one(*one)))
        return
    parsers = list(parsers or PARSERS)
    if baseline:
        parsers.insert(parsers.index("reader") + 1 if "reader" in parsers else 0, "base-reader")
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    print(f"seed={seed} ops={ops} file={file_} partitions={partitions} repeat={repeat} "
          f"parsers={','.join(parsers)} baseline={baseline} pinned={'one core' if pin else 'no'} "
          f"python={platform.python_version()} cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}")
    tmp = None
    if file_ is None:
        from checkers.history.generate import Params, generate_valid
        from traces.history import history_events, write
        tmp = Path(tempfile.mkdtemp(prefix="kv-jsonl-"))
        file_ = str(tmp / f"h{ops}.jsonl")
        h = generate_valid(Params(seed=seed, ops=ops, partitions=partitions))
        write(file_, h.header, history_events(h.ops))
        del h
    print(f"file: {os.path.getsize(file_) / 2**20:.0f} MiB")
    env = dict(os.environ, POLARS_MAX_THREADS="1")
    res: dict[str, list[dict]] = {p: [] for p in parsers}
    try:
        for _ in range(repeat):
            for p in parsers:
                cmd, run_env, cwd = ["-m", "benchmarks.jsonl_parse"], env, None
                if p == "base-reader":  # this script, with the checkout's modules first on the path
                    # (then this checkout's, for benchmarks/ where the checkout has none)
                    base = str(Path(baseline).resolve())
                    cmd, cwd = [str(Path(__file__).resolve())], base
                    run_env = dict(env, PYTHONPATH=os.pathsep.join(
                        [base, str(Path(__file__).resolve().parents[1])] + [q for q in [env.get("PYTHONPATH")] if q]))
                out = subprocess.run(pin + [sys.executable] + cmd + ["--one", file_, "reader" if p == "base-reader" else p],
                                     capture_output=True, text=True, env=run_env, cwd=cwd)
                if out.returncode:
                    raise SystemExit(out.stderr)
                res[p].append(json.loads(out.stdout))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    ref = [r["cpu_s"] for r in res.get("reader", []) if "cpu_s" in r]
    if baseline and ref:
        # Same-run ratio, round by round (the rounds alternate base and new).
        pairs = [(b["cpu_s"], n["cpu_s"]) for b, n in zip(res["base-reader"], res["reader"])]
        print(f"reader vs base-reader: best {min(b for b, _ in pairs) / min(ref):.2f}x cpu, "
              f"median {statistics.median(b for b, _ in pairs) / statistics.median(ref):.2f}x cpu, "
              f"peak {max(r['peak_rss_mib'] for r in res['base-reader']):.0f} -> "
              f"{max(r['peak_rss_mib'] for r in res['reader']):.0f} MiB")
    print(f"{'parser':>12} {'rows':>9} {'best cpu s':>10} {'median':>7} {'peak MiB':>9} {'reader/this':>11}")
    for p in parsers:
        rs = [r for r in res[p] if "cpu_s" in r]
        if not rs:
            print(f"{p:>12} not installed ({res[p][0]['missing']})")
            continue
        cpus = [r["cpu_s"] for r in rs]
        ratio = f"{min(ref) / min(cpus):.2f}" if ref else ""
        print(f"{p:>12} {rs[0]['rows']:>9} {min(cpus):>10.2f} {statistics.median(cpus):>7.2f} "
              f"{max(r['peak_rss_mib'] for r in rs):>9.0f} {ratio:>11}", flush=True)


if __name__ == "__main__":
    main()
