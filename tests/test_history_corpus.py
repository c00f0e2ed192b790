"""Golden histories (house style §6): small counterexamples in traces/corpus/history-*.jsonl, each
shrunk from a seeded run, with the exact expected rendering of its verdict next to it
(`.expected`). A reviewer reads the diff; KAFKAVERIFY_REWRITE_GOLDEN=1 rewrites the
expectations (and, with it, regenerates missing corpus files from the seeds below)."""
import os
from pathlib import Path

import pytest

from checkers.history.generate import Params, generate
from checkers.history.oracle.check import check_history
from checkers.history.seeding import SEEDABLE
from checkers.history.shrink import shrink
from traces.history import history_events, load, write

CORPUS = Path(__file__).resolve().parents[1] / "traces" / "corpus"
REWRITE = os.environ.get("KAFKAVERIFY_REWRITE_GOLDEN") == "1"


def render(path: Path) -> str:
    h = load(path)
    v = check_history(h)
    lines = [f"status: {v.status}"]
    for c in v.checks:
        lines.append(f"check {c.name}: {c.status}" + (f" ({c.reason})" if c.reason else ""))
    for a in v.anomalies + v.notes:
        lines.append(f"{a.type} {list(a.witness)}: {a.explanation}")
    return "\n".join(lines) + "\n"


def _ensure(kind: str) -> Path:
    path = CORPUS / f"history-{kind}.jsonl"
    if not path.exists() and REWRITE:
        CORPUS.mkdir(parents=True, exist_ok=True)
        h = generate(Params(seed=21, ops=1500, partitions=2), {kind: 0.01})
        r = shrink(h, kind=kind)
        write(path, r.history.header, history_events(r.history.ops))
    return path


@pytest.mark.parametrize("kind", sorted(SEEDABLE))
def test_golden_history(kind):
    path = _ensure(kind)
    assert path.exists(), f"{path} missing: run with KAFKAVERIFY_REWRITE_GOLDEN=1"
    assert_golden(path, kind)


def assert_golden(path, kind: str) -> None:
    """The verdict of the golden history at `path` renders exactly as its `.expected` file
    (rewritten instead with KAFKAVERIFY_REWRITE_GOLDEN=1) and is invalid with `kind`."""
    expected = path.with_suffix(".expected")
    got = render(path)
    if REWRITE:
        expected.write_text(got)
    assert got == expected.read_text()
    assert "status: invalid" in got and f"\n{kind} [" in got
