"""The compiled model (Cython over spec/*.py, built by setup.py from the same source) against the
interpreted one, the oracle: on the same bounds both explore the same number of distinct states
to the same depth and reach the same verdict, with the same shortest counterexample, action by
action. Each build runs in its own process (KAFKAVERIFY_MODEL chooses; spec/__init__.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.broker_fixtures import require

ROOT = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent("""
    import json, sys
    import spec
    from checkers.explore import explore
    from spec import Model, make_config
    gen, without, bounds = sys.argv[1], sys.argv[2:-1], json.loads(sys.argv[-1])
    cfg = make_config(gen, tuple(without), **bounds)
    r = explore(Model(cfg), time_limit=300, max_states=2_000_000, workers=1)
    print(json.dumps({"build": spec.BUILD, "model": spec.model.__file__, "status": r.status,
                      "distinct": r.distinct, "transitions": r.transitions, "depth": r.depth,
                      "invariant": r.invariant, "path": [repr(a) for a in r.path]}))
""")

CASES = [
    ("current", (), {"records": 1, "crashes": 1}),
    ("current", ("min-isr-hw",), {}),
    # transactions in kip-101 (no partition verification): a hanging transaction in 11 steps
    ("kip-101", (), {"transactions": 1, "zombies": 1, "min_isr": 1}),
]


def _run(build: str, gen: str, without: tuple, bounds: dict) -> dict:
    env = dict(os.environ, KAFKAVERIFY_MODEL=build, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", PROBE, gen, *without, json.dumps(bounds)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def _compiled_built() -> bool:
    r = subprocess.run([sys.executable, "-c", "import spec; print(spec.BUILD)"], cwd=ROOT,
                       env=dict(os.environ, KAFKAVERIFY_MODEL="compiled", PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=60)
    return r.stdout.strip() == "compiled"


@pytest.mark.parametrize("gen,without,bounds", CASES, ids=lambda v: str(v))
def test_compiled_model_explores_as_the_interpreted_one(gen, without, bounds):
    require(_compiled_built(), "the model is not compiled here (no Cython at set-up, or a source "
                               "newer than its build): run `make setup`")
    interpreted = _run("interpreted", gen, without, bounds)
    compiled = _run("compiled", gen, without, bounds)
    assert interpreted["model"].endswith(".py")
    assert not compiled["model"].endswith(".py"), compiled["model"]
    for key in ("status", "distinct", "transitions", "depth", "invariant", "path"):
        assert compiled[key] == interpreted[key], (key, compiled[key], interpreted[key])
    assert interpreted["status"] == ("exhausted" if bounds.get("crashes") == 1 else "violation")


def test_a_source_newer_than_its_build_is_run_from_source(tmp_path):
    """A stale compiled module is never used: the finder in spec/__init__.py takes the source
    when it is newer (checked on a copy of the package, so the checkout is untouched)."""
    require(_compiled_built(), "the model is not compiled here: run `make setup`")
    import shutil
    copy = tmp_path / "spec"
    shutil.copytree(ROOT / "spec", copy, ignore=shutil.ignore_patterns("__pycache__"))
    os.utime(copy / "rules.py")           # newer than rules' build
    code = "import spec, spec.rules, spec.model; print(spec.rules.__file__); print(spec.model.__file__)"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, KAFKAVERIFY_MODEL="compiled", PYTHONPATH=str(tmp_path)),
                       timeout=60)
    assert r.returncode == 0, r.stderr
    rules_file, model_file = r.stdout.split()
    assert rules_file.endswith("rules.py")
    assert not model_file.endswith(".py")


def test_an_unknown_model_build_is_refused():
    r = subprocess.run([sys.executable, "-c", "import spec"], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, KAFKAVERIFY_MODEL="jit", PYTHONPATH=str(ROOT)), timeout=60)
    assert r.returncode != 0
    assert "KAFKAVERIFY_MODEL='jit'" in r.stderr
