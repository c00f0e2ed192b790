"""End-to-end benchmark of check-history, old and new side by side in one run:
`python -m benchmarks.history_e2e [--ops N ...] [--old/--no-old]`.

For each size: generate one valid history (seeded) and write it as Parquet and as JSON lines
(not timed). Sizes above --tile-above are made of `size / tile-above` generated copies on
disjoint topics, processes and groups, one after the other in time (the generator holds every
operation as an object: 10^7 of them would need some 7 GiB). Then, each in a fresh subprocess
pinned to one core (taskset -c 0 and POLARS_MAX_THREADS=1, so that polars' and Arrow's
thread pools get one core, as the issue asks), time reading + checking:
  old: traces.history.load (json / pyarrow to Python objects) + checkers.history.oracle.check.check_history
  new: checkers.history.pipeline.file_check.check_file (lean polars Parquet scan / pyarrow.json, the kernel)
and report ops/s end to end, CPU seconds, the subprocess's peak RSS, and the whole process's
wall time from the parent (interpreter start-up and imports included: what a user waits for).
For JSON lines, each --bare parser also parses the same file alone (no checks; see
benchmarks/jsonl_parse.py), and the whole check's CPU seconds over the bare parse's are
printed as `Nx bare`. With --baseline DIR (a checkout of an earlier revision, e.g.
`git worktree add DIR REV`), the new engine of that checkout runs on the same files in the same run ("base"), so a speed-up is
a same-run ratio; with --base-layout old, base reads Parquet in the layout written before
traces.history.parquet_write_options (zstd, a trace_id column: `h*-old.parquet`), so the
ratio is the new layout and reader against the old. Sizes above --tile-above are tiled as
JSON lines too (from the Parquet copies) when --jsonl-max allows. With --planted, two more
Parquet histories per size: a skipped record in one partition (`pq-one`) and in every partition
(`pq-each`, the worst case for check-history's screen-then-kernel design).
With --compiled, the project's modules (this checkout's and the baseline's) are compiled to
bytecode (`compileall`, into the gitignored __pycache__ directories) before any timing, as an
installed package has them: where PYTHONDONTWRITEBYTECODE is set, every subprocess otherwise
compiles checkers/ and traces/ from source inside its clock (0.03-0.07 CPU-s at 10^6
operations, docs/benchmarks/histories.md). The header line says which (`bytecode=`).
Prints seed= and the options first."""
from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

import kafkaverify


def _one(path: str, engine: str) -> dict:
    t0 = time.perf_counter()
    c0 = time.process_time()
    if engine == "old":
        from checkers.history.oracle.check import check_history
        from traces.history import load
        h = load(path)
        v = check_history(h)
        n = len(h.ops)
    else:
        from checkers.history.pipeline.file_check import check_file
        r = check_file(path)
        v, n = r.verdict, r.ops
        if not r.engine.startswith("columnar"):
            raise SystemExit(f"not the columnar path: {r.engine}")
    secs = time.perf_counter() - t0
    return {"ops": n, "seconds": secs, "ops_per_s": n / secs, "status": v.status,
            "engine": "old" if engine == "old" else r.engine,
            "cpu_s": time.process_time() - c0,
            "peak_rss_mib": peak_mib()}


def peak_mib() -> float:
    """This process's own peak RSS (VmHWM). Not getrusage's ru_maxrss: Linux carries that
    across fork and exec, so a child of the (large) generating parent would report at least
    the parent's RSS at the fork."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@click.command()
@click.option("--ops", "sizes", type=int, multiple=True, help="history sizes (default 1e6)")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--partitions", type=int, default=8, show_default=True)
@click.option("--old/--no-old", default=True, help="also time the old object path")
@click.option("--old-max", type=int, default=2_000_000, show_default=True,
              help="time the old object path only up to this size (it holds every op as an object)")
@click.option("--tile-above", type=int, default=1_000_000, show_default=True,
              help="larger sizes are tiled copies of a history of this size")
@click.option("--jsonl-max", type=int, default=1_000_000, show_default=True,
              help="write and time JSON lines only up to this size")
@click.option("--dir", "workdir", type=click.Path(file_okay=False), default=None,
              help="where to write the histories (default: a temporary directory)")
@click.option("--baseline", type=click.Path(file_okay=False, exists=True), default=None,
              help="a checkout of an earlier revision: its new engine runs too, as 'base'")
@click.option("--bare", "bare", multiple=True, default=("pyarrow",), show_default=True,
              type=click.Choice(["pyarrow", "polars", "duckdb", "msgspec", "orjson"]),
              help="JSON lines: also time this parser alone on the same file (parse only, "
                   "benchmarks.jsonl_parse), next to the whole check")
@click.option("--base-layout", type=click.Choice(["same", "old"]), default="same", show_default=True,
              help="Parquet for base: the same file as new, or the layout before this one "
                   "(zstd with a trace_id column)")
@click.option("--planted/--no-planted", default=False,
              help="also time Parquet histories with a skipped record planted in one partition "
                   "('one': the kernel judges that partition) and in every partition ('each': "
                   "the worst case of screening first); sizes up to --tile-above")
@click.option("--compiled/--no-compiled", default=False,
              help="compile the project's modules (and the baseline's) to bytecode before timing, "
                   "as an installed package has them")
@click.option("--one", nargs=2, type=str, default=None, hidden=True)
def main(sizes, seed, partitions, old, old_max, tile_above, jsonl_max, workdir, baseline, bare, base_layout,
         planted, compiled, one):
    """End-to-end check-history benchmark (reading included), old vs new."""
    if one is not None:
        print(json.dumps(_one(*one)))
        return
    sizes = sizes or (1_000_000,)
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    if compiled:
        here = Path(kafkaverify.__file__).resolve().parent.parent
        for root in [here] + ([Path(baseline).resolve()] if baseline else []):
            # benchmarks/ too where the checkout has it (kafkaverify/bench/ before)
            pkgs = [p for p in ("checkers", "traces", "kafkaverify", "benchmarks") if (root / p).is_dir()]
            subprocess.run([sys.executable, "-m", "compileall", "-q", *pkgs],
                           cwd=str(root), check=True, capture_output=True)
    bytecode = "compiled" if compiled else ("not-written" if sys.dont_write_bytecode else "written")
    print(f"seed={seed} ops={list(sizes)} partitions={partitions} old={old} old_max={old_max} "
          f"tile_above={tile_above} baseline={baseline} base_layout={base_layout} bare={','.join(bare)} pinned={'one core' if pin else 'no'} bytecode={bytecode} "
          f"python={platform.python_version()} cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f}")
    d = Path(workdir or tempfile.mkdtemp(prefix="kv-e2e-")).resolve()
    d.mkdir(parents=True, exist_ok=True)
    from checkers.history.generate import Params, generate_valid
    from traces.history import history_events, write
    from traces.history_tile import tile
    print(f"{'ops':>9} {'format':>8} {'engine':>6} {'seconds':>8} {'ops/s':>10} {'cpu s':>6} {'process s':>9} "
          f"{'proc ops/s':>10} {'peak MiB':>9} {'speedup':>9}  status")
    env = dict(os.environ, POLARS_MAX_THREADS="1")
    for n in sizes:
        paths = {"parquet": d / f"h{n}.parquet"}
        if n <= jsonl_max:
            paths["jsonl"] = d / f"h{n}.jsonl"
        old_pq = d / f"h{n}-old.parquet" if baseline and base_layout == "old" else None
        if n <= tile_above:
            h = generate_valid(Params(seed=seed, ops=n, partitions=partitions))
            evs = history_events(h.ops)
            for p in paths.values():
                write(p, h.header, evs)
            if old_pq:
                write_old_layout(old_pq, h.header, evs)
            del evs
            if planted:
                for which in ("one", "each"):
                    paths[f"pq-{which}"] = d / f"h{n}-{which}.parquet"
                    write(paths[f"pq-{which}"], h.header, history_events(skip_one_record(h.ops, which == "each")))
            del h
        else:
            base = d / f"h{tile_above}.parquet"
            if not base.exists():
                h = generate_valid(Params(seed=seed, ops=tile_above, partitions=partitions))
                write(base, h.header, history_events(h.ops))
                del h
            tile(base, paths["parquet"], n // tile_above, jsonl=paths.get("jsonl"))
            if old_pq:
                tile(base, old_pq, n // tile_above, trace_column=True)   # the old layout
        for fmt, p in paths.items():
            res = {}
            engines = (["old"] if old and n <= old_max else []) + (["base"] if baseline else []) + ["new"]
            for engine in engines:
                if engine == "old" and fmt.startswith("pq-"):
                    continue
                src = old_pq if engine == "base" and fmt == "parquet" and old_pq else p
                cmd = pin + [sys.executable, "-m", "benchmarks.history_e2e", "--one", str(src),
                             "new" if engine == "base" else engine]
                run_env = env
                if engine == "base":     # the earlier checkout's modules first on the path
                    # (then this checkout's, for benchmarks/ where the checkout has none)
                    run_env = dict(env, PYTHONPATH=os.pathsep.join(
                        [str(Path(baseline).resolve()), str(Path(__file__).resolve().parents[1])]
                        + [q for q in [env.get("PYTHONPATH")] if q]))
                    if kafkaverify.ALLOCATOR_TUNED:   # the checkout's own allocator settings
                        run_env.pop("_RJEM_MALLOC_CONF", None)
                t0 = time.perf_counter()
                # `-m` puts the working directory first on the path: the checkout's own.
                out = subprocess.run(cmd, capture_output=True, text=True, env=run_env,
                                     cwd=str(Path(baseline).resolve()) if engine == "base" else None)
                wall = time.perf_counter() - t0
                if out.returncode:
                    raise SystemExit(out.stderr)
                r = res[engine] = json.loads(out.stdout)
                speed = ""
                if engine == "new" and "base" in res:   # same-run ratio of CPU seconds
                    speed = f"{res['base']['cpu_s'] / r['cpu_s']:.2f}x cpu"
                elif engine == "new" and "old" in res:
                    speed = f"{res['old']['seconds'] / r['seconds']:.1f}x"
                print(f"{r['ops']:>9} {fmt:>8} {engine:>6} {r['seconds']:>8.2f} {r['ops_per_s']:>10.0f} "
                      f"{r['cpu_s']:>6.2f} {wall:>9.2f} {r['ops'] / wall:>10.0f} "
                      f"{r['peak_rss_mib']:>9.0f} {speed:>9}  {r['status']}", flush=True)
            for parser in (bare if fmt == "jsonl" else ()):
                # The parser alone (packages imported before its clock): the floor the whole
                # check stands on. `new/bare` is the whole check's CPU over the bare parse's.
                out = subprocess.run(pin + [sys.executable, "-m", "benchmarks.jsonl_parse",
                                            "--one", str(p), parser], capture_output=True, text=True, env=env)
                if out.returncode:
                    raise SystemExit(out.stderr)
                b = json.loads(out.stdout)
                if "cpu_s" not in b:
                    print(f"{'':>9} {fmt:>8} {parser:>6} not installed")
                    continue
                ratio = f"{res['new']['cpu_s'] / b['cpu_s']:.2f}x bare"
                print(f"{'':>9} {fmt:>8} {parser:>6} {'':>8} {'':>10} {b['cpu_s']:>6.2f} {'':>9} {'':>10} "
                      f"{b['peak_rss_mib']:>9.0f} {ratio:>9}  parse only ({b['rows']} events)", flush=True)
    if not workdir:
        shutil.rmtree(d, ignore_errors=True)


def skip_one_record(ops, every_partition: bool) -> list:
    """Copies of `ops` where the first non-final poll of three or more records of partition 0
    (of every partition) has lost its second record: a poll-skip anomaly there (as
    checkers/history/seeding.py poll_skip plants it)."""
    import copy
    out, done = [], set()
    for o in sorted(ops, key=lambda o: (o.inv, o.id)):
        if (o.f == "poll" and o.type == "ok" and not o.final and o.offsets and len(o.offsets) >= 3
                and o.partition not in done and (every_partition or o.partition == 0)):
            o = copy.copy(o)
            o.offsets, o.values = o.offsets[:1] + o.offsets[2:], o.values[:1] + o.values[2:]
            done.add(o.partition)
        out.append(o)
    return out


OLD_LAYOUT = {"compression": "zstd"}     # with a trace_id column: the layout before this one
# (today the many-histories layout, which traces.history_tile.tile writes with trace_column)


def write_old_layout(path: Path, header: dict, events: list[dict]) -> None:
    import pyarrow.parquet as pq
    from traces.history import events_to_table
    pq.write_table(events_to_table(header, events), str(path), **OLD_LAYOUT)


if __name__ == "__main__":
    main()
