"""The columnar kernel's pairing and screens, this checkout's against an earlier checkout's,
alternated in one process on the same lean frame (warm, no reading, no start-up):
`python -m benchmarks.kernel_ab --baseline DIR [--file H.parquet | --ops N] [--rounds K]`.

End-to-end figures (benchmarks.history_e2e) move by a tenth between runs on a loaded
machine; alternating the two kernels on one frame in one process shows a kernel change that
small. Only the polars screen (checkers/history/screens/columnar.py, or checkers/history/columnar.py
in a checkout from before the screens had a folder) is taken from DIR (loaded under another
module name); what it imports comes from this checkout. Prints seed= and the options first, then the least
and median CPU seconds of each kernel and the ratio of the medians (base / new)."""
from __future__ import annotations

import importlib.util
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import click


def _load_base(baseline: str):
    root = Path(baseline).resolve() / "checkers" / "history"
    path = root / "screens" / "columnar.py"
    if not path.exists():                 # a checkout from before the screens had a folder
        path = root / "columnar.py"
    spec = importlib.util.spec_from_file_location("kafkaverify_base_columnar", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


@click.command()
@click.option("--baseline", type=click.Path(file_okay=False, exists=True), required=True,
              help="a checkout of an earlier revision (git worktree add --detach DIR REV)")
@click.option("--file", "path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="a Parquet history (default: generate one of --ops operations)")
@click.option("--ops", type=int, default=1_000_000, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--rounds", type=int, default=5, show_default=True)
def main(baseline, path, ops, seed, rounds):
    """Pairing and screens, base and new kernels alternated on one frame."""
    print(f"seed={seed} ops={ops} file={path} baseline={baseline} rounds={rounds} "
          f"python={platform.python_version()} load={os.getloadavg()[0]:.1f} "
          f"polars_threads={os.environ.get('POLARS_MAX_THREADS', 'all')}", flush=True)
    import polars as pl

    from checkers.history.screens import columnar as new
    from checkers.history.screens.columnar import lean_plan
    from traces import history_columnar as hc
    base = _load_base(baseline)
    tmp = None
    if path is None:
        from checkers.history.generate import Params, generate_valid
        from traces.history import history_events, write
        tmp = tempfile.mkdtemp(prefix="kv-ab-")
        path = str(Path(tmp) / "h.parquet")
        h = generate_valid(Params(seed=seed, ops=ops, partitions=8))
        write(path, h.header, history_events(h.ops))
        del h
    _, src, _ = hc.read(path, None, None, lazy=True)
    full = src.with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i"))
    ev = lean_plan(full).collect(engine="streaming")
    times: dict[str, list[tuple[float, float]]] = {"base": [], "new": []}
    flagged = {}
    for _ in range(rounds):
        for name, kernel in (("base", base), ("new", new)):
            c0 = time.process_time()
            pd = kernel.pair(ev.clone())
            c1 = time.process_time()
            sc = kernel.screen(pd)
            c2 = time.process_time()
            times[name].append((c1 - c0, c2 - c1))
            flagged.setdefault(name, sc.flagged)
            del pd, sc
    if flagged["base"] != flagged["new"]:
        raise SystemExit(f"the kernels disagree: base flags {sorted(flagged['base'])}, "
                         f"new {sorted(flagged['new'])}")
    med = {}
    print(f"{ev.height} events, {len(flagged['new'])} partitions flagged by both")
    for name, rows in times.items():
        cols = {"pair": sorted(a for a, _ in rows), "screen": sorted(b for _, b in rows),
                "both": sorted(a + b for a, b in rows)}
        med[name] = {k: v[len(v) // 2] for k, v in cols.items()}
        print(f"{name:>5}  " + "  ".join(f"{k} min {v[0]:.3f} median {med[name][k]:.3f}"
                                         for k, v in cols.items()))
    print("ratio (base/new, medians)  " + "  ".join(
        f"{k} {med['base'][k] / med['new'][k]:.2f}x" for k in ("pair", "screen", "both")))
    if tmp:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
