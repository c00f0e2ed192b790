"""The history checkers' three layers keep their roles (checkers/history/__init__.py): the oracle
(checkers/history/oracle) is the reference and depends on neither the screens nor the pipeline;
the screens (checkers/history/screens) flag partitions and never decide an anomaly; the pipeline
(checkers/history/pipeline) runs the screens first and hands what they flag to the oracle, so
every anomaly it reports is one the oracle built. That the pipeline's verdicts equal the
oracle's is tests/test_history_columnar.py (corpus and seeded histories) and tests/test_fused.py."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from checkers.history.generate import Params, generate
from checkers.history.oracle import consumer, cycles, linearizable, log_checks
from checkers.history.oracle.check import check_history
from checkers.history.pipeline.file_check import check_file
from traces.history import history_events, load, write

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "checkers" / "history"
CORPUS = ROOT / "traces" / "corpus"
LAYERS = ("oracle", "screens", "pipeline")
# layer -> the layers it may import: the reference stands alone, the screens read no oracle
# (a flag is not a verdict), the pipeline joins the two.
MAY_IMPORT = {"oracle": set(), "screens": set(), "pipeline": {"oracle", "screens"}}


def _layers_imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["checkers", "history"] and len(parts) > 2 and parts[2] in LAYERS:
                found.add(parts[2])
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_layers_import_in_one_direction(layer):
    wrong = {f"{p.relative_to(ROOT)} imports {other}"
             for p in sorted((HISTORY / layer).rglob("*.py"))
             for other in _layers_imported(p) - MAY_IMPORT[layer] - {layer}}
    assert not wrong, sorted(wrong)


def test_pipeline_imports_both_layers():
    imported = set().union(*(_layers_imported(p) for p in (HISTORY / "pipeline").rglob("*.py")))
    assert imported >= {"oracle", "screens"}


def _spy_on_oracle(monkeypatch) -> list:
    """Wraps the oracle's rule entry points; returns the list of the anomalies and notes they
    build, filled as they run."""
    built: list = []

    def spy(module, name):
        real = getattr(module, name)

        def wrapped(*a, **kw):
            out = real(*a, **kw)
            for r in out if isinstance(out, list) else [out]:
                built.extend(r.anomalies + r.notes)
            return out
        monkeypatch.setattr(module, name, wrapped)

    spy(log_checks, "check_log")
    spy(linearizable, "check")
    spy(consumer, "check")
    spy(cycles, "check")
    return built


@pytest.mark.parametrize("path", sorted(CORPUS.glob("history-*.jsonl")), ids=lambda p: p.stem)
def test_every_anomaly_the_pipeline_reports_is_the_oracles(path, monkeypatch):
    """On the corpus: each anomaly and note of check_file's verdict is one the oracle's rules
    built while the pipeline ran (the screens only chose where the oracle looked)."""
    expected = check_history(load(path))
    built = _spy_on_oracle(monkeypatch)
    v = check_file(str(path)).verdict
    assert v.anomalies or v.notes or expected.status != "invalid"
    assert all(any(a is b for b in built) for a in v.anomalies + v.notes), path


def test_a_history_the_screens_clear_never_reaches_the_oracle(tmp_path, monkeypatch):
    """A valid generated history: the screens flag nothing, so the pipeline decides it from
    their counts without one call to the oracle, and says valid as the oracle does."""
    h = generate(Params(seed=3, ops=800, partitions=3, consumers=2), None)
    path = tmp_path / "valid.parquet"
    write(path, h.header, history_events(h.ops))
    assert check_history(load(path)).status == "valid"
    calls = []
    for module, name in ((log_checks, "check_log"), (linearizable, "check"), (consumer, "check"),
                         (cycles, "check")):
        monkeypatch.setattr(module, name, lambda *a, _n=f"{module.__name__}.{name}", **kw: calls.append(_n))
    r = check_file(str(path))
    assert r.verdict.status == "valid" and r.engine.startswith("columnar"), r.engine
    assert calls == []
