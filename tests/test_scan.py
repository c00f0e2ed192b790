"""The compiled scans (checkers/history/screens/_scan.c) against obvious Python on seeded random
columns: dense and sparse keys, repeats, nulls, several Arrow chunks, empty columns. The
polars screen that uses them is checked against the oracle in test_history_columnar.py."""
from __future__ import annotations

import random

import polars as pl
import pytest

from checkers.history.screens import _scan

SEEDS = range(12)


def _col(values, dtype=pl.Int64, chunks=1):
    """A Series of `values` in `chunks` Arrow chunks (the scans read any number)."""
    if chunks <= 1 or len(values) < chunks:
        return pl.Series(values, dtype=dtype)
    cut = sorted(random.Random(len(values)).sample(range(1, len(values)), chunks - 1))
    parts = [pl.Series(values[a:b], dtype=dtype) for a, b in zip([0] + cut, cut + [len(values)])]
    s = pl.concat(parts, rechunk=False)
    assert s.n_chunks() == chunks
    return s


def _keys(rng, n, shape):
    if shape == "packed":        # partition << 32 | offset, offsets nearly dense
        return [rng.randrange(6) * 2**32 + rng.randrange(2 * n + 1) for _ in range(n)]
    if shape == "sparse":        # no packed shape: the hash table
        return [rng.randrange(-2**62, 2**62) for _ in range(n)]
    return [rng.randrange(n) * 2**32 + rng.randrange(3) for _ in range(n)]   # many partitions


@pytest.mark.parametrize("shape", ["packed", "sparse", "many"])
@pytest.mark.parametrize("seed", SEEDS)
def test_lookup_is_the_position_of_each_probe(seed, shape):
    rng = random.Random(seed)
    n = rng.choice([0, 1, 5, 300, 3000])
    table = list(dict.fromkeys(_keys(rng, n, shape)))          # distinct values
    table = [None if rng.random() < 0.05 else v for v in table]
    probe = [rng.choice(table) if table and rng.random() < 0.7 else _keys(rng, 1, shape)[0]
             for _ in range(rng.choice([0, 7, 2000]))]
    probe = [None if rng.random() < 0.05 else v for v in probe]
    where = {v: i for i, v in enumerate(table) if v is not None}
    want = [where.get(v) if v is not None else None for v in probe]
    got = pl.Series(_scan.lookup(_col(table, chunks=seed % 3 + 1), _col(probe, chunks=seed % 2 + 1)))
    assert got.dtype == pl.UInt32
    assert got.to_list() == want


@pytest.mark.parametrize("shape", ["packed", "sparse"])
def test_lookup_refuses_a_repeated_table_value(shape):
    rng = random.Random(7)
    table = _keys(rng, 200, shape)
    table.append(table[17])
    assert _scan.lookup(_col(table), _col(table[:5])) is None
    assert _scan.lookup(_col([None, None, 3]), _col([3, None])) is not None    # nulls repeat freely


def test_lookup_reads_uint32_and_refuses_other_types():
    got = pl.Series(_scan.lookup(pl.Series([4, 9], dtype=pl.UInt32), pl.Series([9, 1, 4], dtype=pl.Int64)))
    assert got.to_list() == [1, None, 0]
    with pytest.raises(TypeError, match="int64 or uint32"):
        _scan.lookup(pl.Series([1.5]), pl.Series([1], dtype=pl.Int64))


def _order_reference(key, kind, first, last):
    """Poll order and send order per key, the obvious way."""
    prev_poll, prev_ack, out = {}, {}, []
    for i, (k, t, a, b) in enumerate(zip(key, kind, first, last)):
        if t == 2:
            prev_poll.pop(k, None)
        elif t == 1:
            p = prev_poll.get(k, "none")
            if p not in ("none", None) and a is not None and a != p + 1:
                out.append(i)
            prev_poll[k] = b
        elif t == 3:
            p = prev_ack.get(k, "none")
            if p not in ("none", None) and a is not None and a <= p:
                out.append(i)
            prev_ack[k] = a
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_order_scan_flags_what_the_rules_say(seed):
    rng = random.Random(seed)
    n = rng.choice([0, 1, 40, 3000])
    keys = [rng.randrange(1 + n // 20) * 2**32 + rng.randrange(4) for _ in range(n)]
    kind = [rng.choice([0, 1, 1, 1, 2, 3, 3, 3]) for _ in range(n)]
    nxt: dict = {}
    first, last = [], []
    for k in keys:                       # mostly in order, sometimes not
        a = nxt.get(k, 0) + (0 if rng.random() < 0.9 else rng.randrange(-3, 4))
        b = a + rng.randrange(3)
        nxt[k] = b + 1
        first.append(None if rng.random() < 0.02 else a)
        last.append(None if rng.random() < 0.02 else b)
    want = _order_reference(keys, kind, first, last)
    got = pl.Series(_scan.order_scan(_col(keys, chunks=2), _col(kind, pl.UInt32), _col(first), _col(last)))
    assert got.to_list() == want


def _lin_reference(pk, off, inv, comp, qpk, top, qcomp):
    """The linearizability screen with a sort, and partitions whose offsets are not dense and
    distinct flagged whole (as lin_scan documents)."""
    parts: dict = {}
    for i, (p, o) in enumerate(zip(pk, off)):
        parts.setdefault(p, []).append(i)
    irregular = set()
    latest_at: dict = {}
    for p, rows in parts.items():
        offs = [off[i] for i in rows]
        if len(set(offs)) != len(offs) or max(offs) - min(offs) + 1 != len(offs):
            irregular.add(p)
            continue
        run = None
        for i in sorted(rows, key=lambda i: off[i]):
            below = run
            if comp[i] is not None and below is not None and below > comp[i]:
                latest_at[("flag", i)] = True
            run = inv[i] if run is None else max(run, inv[i])
            latest_at[(p, off[i])] = run
    log = [i for i in range(len(pk)) if pk[i] in irregular or ("flag", i) in latest_at]
    polls = []
    for j, (p, t, c) in enumerate(zip(qpk, top, qcomp)):
        lt = latest_at.get((p, t))
        if p in irregular or lt is None or (c is not None and lt > c):
            polls.append(j)
    return log, polls


@pytest.mark.parametrize("seed", SEEDS)
def test_lin_scan_flags_what_the_rule_says(seed):
    rng = random.Random(seed)
    pk, off, inv, comp = [], [], [], []
    for p in range(rng.choice([0, 1, 4])):
        m = rng.choice([1, 30, 500])
        offs = list(range(m))
        if rng.random() < 0.3:           # a gap or a repeat
            offs[rng.randrange(m)] = rng.choice([m + 2, 0])
        rng.shuffle(offs)
        for o in offs:
            t = o * 10 + rng.randrange(-25, 25)
            pk.append(p)
            off.append(o)
            inv.append(t)
            comp.append(None if rng.random() < 0.1 else t + rng.randrange(0, 40))
    qpk = [rng.randrange(5) for _ in range(rng.choice([0, 50]))]
    top = [rng.randrange(-1, 600) for _ in qpk]
    qcomp = [t * 10 + rng.randrange(0, 60) for t in top]
    want = _lin_reference(pk, off, inv, comp, qpk, top, qcomp)
    a, b = _scan.lin_scan(_col(pk), _col(off), _col(inv), _col(comp), _col(qpk), _col(top), _col(qcomp))
    assert (pl.Series(a).to_list(), pl.Series(b).to_list()) == want


def test_a_column_is_exported_once():
    col = _scan.lookup(pl.Series([1], dtype=pl.Int64), pl.Series([1], dtype=pl.Int64))
    assert pl.Series(col).to_list() == [0]
    with pytest.raises(ValueError, match="already exported"):
        pl.Series(col)


@pytest.mark.parametrize("values, want", [
    ([], 2), ([5], 2), ([3, 4, 5], 2), ([3, 5, 6], 1), ([3, 3, 4], 0), ([4, 3], 0),
    ([1, None, 3], 0), ([-2, -1, 0], 2)])
def test_steps_tells_consecutive_from_increasing(values, want):
    assert _scan.steps(_col(values, chunks=2)) == want


@pytest.mark.parametrize("seed", SEEDS)
def test_time_ordered_is_strict_inv_then_id_order(seed):
    rng = random.Random(seed)
    rows = sorted((rng.randrange(50), rng.randrange(1000)) for _ in range(rng.choice([0, 1, 60])))
    if rows and rng.random() < 0.6:
        i = rng.randrange(len(rows))
        rows.insert(i, rows[rng.randrange(len(rows))])     # a repeat, or a row out of order
    inv, ids = [r[0] for r in rows], [r[1] for r in rows]
    want = all(rows[k - 1] < rows[k] for k in range(1, len(rows)))
    assert _scan.time_ordered(_col(inv), _col(ids, chunks=2)) == want


def _import_kernel(tmp_path, pythonpath):
    import os
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, "-c", "import checkers.history.screens.columnar"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)


def test_unbuilt_or_unloadable_scans_say_why(tmp_path):
    """A checkout whose extension was never built is told how to build it; a Spark executor
    whose Python cannot load the module shipped from the driver is told that, not to build."""
    import shutil
    import zipfile
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    src = tmp_path / "src"
    for pkg in ("checkers", "traces"):
        shutil.copytree(root / pkg, src / pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    p = _import_kernel(tmp_path, [src])
    assert p.returncode != 0 and "is not built: run `pip install -e .`" in p.stderr, p.stderr

    # The executor's layout: the packages in a zip, the built file in a directory of its own.
    z = tmp_path / "pyfiles.zip"
    with zipfile.ZipFile(z, "w") as f:
        for q in src.rglob("*.py"):
            f.write(q, q.relative_to(src))
    files = tmp_path / "files"
    files.mkdir()
    (files / "_scan.cpython-39-x86_64-linux-gnu.so").write_bytes(b"")   # built for another Python
    p = _import_kernel(tmp_path, [z, files])
    assert p.returncode != 0, p.stderr
    assert "executors must run the driver's Python version" in p.stderr, p.stderr
    assert "_scan.cpython-39-x86_64-linux-gnu.so" in p.stderr and "not built" not in p.stderr
    # The same layout with the driver's own build imports.
    shutil.copy(_scan.__file__, files)
    p = _import_kernel(tmp_path, [z, files])
    assert p.returncode == 0, p.stderr
