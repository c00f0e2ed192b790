"""The benchmarks (benchmarks/, run as `python -m benchmarks.NAME` from the repository root) stay
runnable: every module imports, importing one runs nothing, and each entry point parses its
arguments (`--help`). A rename in the installed packages that a benchmark still uses fails
here, not on the next benchmark run."""
from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(f"benchmarks.{p.stem}" for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__")


def _is_entry_point(name: str) -> bool:
    """Has an `if __name__ == "__main__":` block (a benchmark, not a helper module)."""
    tree = ast.parse((ROOT / (name.replace(".", "/") + ".py")).read_text())
    return any(isinstance(n, ast.If) and ast.unparse(n.test) in ("__name__ == '__main__'", "'__main__' == __name__")
               for n in tree.body)


ENTRY_POINTS = [m for m in MODULES if _is_entry_point(m)]


def test_the_benchmarks_are_found():
    """The glob sees the package (the Makefile's `bench` and `mutate` targets among them)."""
    assert len(ENTRY_POINTS) >= 15
    assert {"benchmarks.model", "benchmarks.history", "benchmarks.broker", "benchmarks.mutate"} <= set(ENTRY_POINTS)


@pytest.mark.parametrize("name", MODULES)
def test_every_benchmark_module_imports(name):
    importlib.import_module(name)


def test_importing_the_benchmarks_runs_none_of_them():
    """Every module imported in a fresh interpreter: nothing printed (a benchmark prints its
    seed= and options first), nothing left running; their imports stay behind `main`."""
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    r = subprocess.run([sys.executable, "-c", code, *MODULES], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "", r.stdout


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_every_benchmark_parses_its_arguments(name, capsys):
    """`--help` goes through the entry point's whole argument parser and stops before any work."""
    main = importlib.import_module(name).main
    if isinstance(main, click.Command):
        r = CliRunner().invoke(main, ["--help"])
        assert r.exit_code == 0, r.output
        out = r.output
    else:
        with pytest.raises(SystemExit) as e:
            main(["--help"])
        assert e.value.code == 0
        out = capsys.readouterr().out
    assert "usage:" in out.lower() and "--" in out


PROJECT = ("spec", "impl", "checkers", "traces", "kafkaverify", "benchmarks")


def _project_imports():
    """(benchmark, module, name or None) of every import of the project's own modules, inside
    functions too: most benchmarks import what they time inside `main`, out of start-up."""
    for name in MODULES:
        tree = ast.parse((ROOT / (name.replace(".", "/") + ".py")).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                yield from ((name, a.name, None) for a in node.names if a.name.split(".")[0] in PROJECT)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] in PROJECT:
                yield from ((name, node.module, a.name) for a in node.names)


def test_every_project_name_a_benchmark_imports_exists():
    missing = []
    for bench, module, attr in _project_imports():
        mod = importlib.import_module(module)
        if attr is not None and not hasattr(mod, attr):
            try:
                importlib.import_module(f"{module}.{attr}")
            except ModuleNotFoundError:
                missing.append(f"{bench}: from {module} import {attr}")
    assert not missing, "\n".join(missing)
