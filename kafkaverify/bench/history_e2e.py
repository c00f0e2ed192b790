"""End-to-end benchmark of check-history, old and new side by side in one run:
`python -m kafkaverify.bench.history_e2e [--ops N ...] [--old/--no-old]`.

For each size: generate one valid history (seeded) and write it as Parquet and as JSON lines
(not timed). Then, each in a fresh subprocess pinned to one core (taskset -c 0, so that polars'
and Arrow's thread pools get one core, as the issue asks), time reading + checking:
  old: traces.history.load (json / pyarrow to Python objects) + checkers.history.run.check_history
  new: checkers.history.columnar.check_file (polars Parquet reader / pyarrow.json, the kernel)
and report ops/s end to end and the subprocess's peak RSS. Prints seed= and the options first."""
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


def _one(path: str, engine: str) -> dict:
    t0 = time.perf_counter()
    if engine == "old":
        from checkers.history.run import check_history
        from traces.history import load
        h = load(path)
        v = check_history(h)
        n = len(h.ops)
    else:
        from checkers.history.columnar import check_file
        r = check_file(path)
        v, n = r.verdict, r.ops
        if r.engine != "columnar":
            raise SystemExit(f"not the columnar path: {r.engine}")
    secs = time.perf_counter() - t0
    return {"ops": n, "seconds": secs, "ops_per_s": n / secs, "status": v.status,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


@click.command()
@click.option("--ops", "sizes", type=int, multiple=True, help="history sizes (default 1e6)")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--partitions", type=int, default=8, show_default=True)
@click.option("--old/--no-old", default=True, help="also time the old object path")
@click.option("--dir", "workdir", type=click.Path(file_okay=False), default=None,
              help="where to write the histories (default: a temporary directory)")
@click.option("--one", nargs=2, type=str, default=None, hidden=True)
def main(sizes, seed, partitions, old, workdir, one):
    """End-to-end check-history benchmark (reading included), old vs new."""
    if one is not None:
        print(json.dumps(_one(*one)))
        return
    sizes = sizes or (1_000_000,)
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    print(f"seed={seed} ops={list(sizes)} partitions={partitions} old={old} pinned={'one core' if pin else 'no'} "
          f"python={platform.python_version()} cpus={os.cpu_count()}")
    d = Path(workdir or tempfile.mkdtemp(prefix="kv-e2e-"))
    d.mkdir(parents=True, exist_ok=True)
    from checkers.history.generate import Params, generate_valid
    from traces.history import history_events, write
    print(f"{'ops':>9} {'format':>8} {'engine':>6} {'seconds':>8} {'ops/s':>10} {'peak MiB':>9} {'speedup':>8}  status")
    for n in sizes:
        h = generate_valid(Params(seed=seed, ops=n, partitions=partitions))
        evs = history_events(h.ops)
        paths = {"parquet": d / f"h{n}.parquet", "jsonl": d / f"h{n}.jsonl"}
        for p in paths.values():
            write(p, h.header, evs)
        del h, evs
        for fmt, p in paths.items():
            res = {}
            for engine in (["old"] if old else []) + ["new"]:
                cmd = pin + [sys.executable, "-m", "kafkaverify.bench.history_e2e", "--one", str(p), engine]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode:
                    raise SystemExit(out.stderr)
                r = res[engine] = json.loads(out.stdout)
                speed = (f"{res['old']['seconds'] / r['seconds']:.1f}x" if engine == "new" and "old" in res else "")
                print(f"{r['ops']:>9} {fmt:>8} {engine:>6} {r['seconds']:>8.2f} {r['ops_per_s']:>10.0f} "
                      f"{r['peak_rss_mib']:>9.0f} {speed:>8}  {r['status']}", flush=True)
    if not workdir:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
