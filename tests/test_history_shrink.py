"""Shrinking keeps the anomaly and ends 1-minimal: no single operation can be removed."""
import pytest

from checkers.history.generate import Params, generate
from checkers.history.shrink import NothingToShrink, _shows, shrink


@pytest.mark.parametrize("kind", ["lost-write", "nonmonotonic-send", "G1c-realtime", "fenced-commit",
                                  "delivery-at-least-once", "send-reorder"])
def test_shrink_is_one_minimal(kind):
    h = generate(Params(seed=5, ops=1500, partitions=2), {kind: 0.01})
    r = shrink(h, kind=kind)
    assert r.minimal and r.anomaly.type == kind
    ops = r.history.ops
    assert len(ops) <= 3
    for o in ops:
        assert _shows(h.header, [p for p in ops if p is not o], kind) is None


def test_nothing_to_shrink_on_valid_history():
    with pytest.raises(NothingToShrink, match="valid"):
        shrink(generate(Params(seed=5, ops=300)))
