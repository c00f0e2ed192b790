"""The HTML report stays bounded: its size depends on the anomalies shown, not on the history's
length (witness neighbourhoods in full, the rest aggregated), and it is self-contained."""
import re

from checkers.history.generate import Params, generate
from checkers.history.report_html import MAX_ANOMALIES, render
from checkers.history.oracle.check import check_history


def _report(ops: int) -> str:
    h = generate(Params(seed=6, ops=ops, partitions=4), {"lost-write": 0.002, "send-reorder": 1.0})
    return render(h, check_history(h, cycle_max_ops=0), title=f"{ops}")


def test_report_size_is_bounded_and_self_contained():
    small, big = _report(3_000), _report(40_000)
    assert len(big) < 1_500_000 and len(big) < 3 * len(small), (len(small), len(big))
    for page in (small, big):
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)   # no external assets
        assert page.count("<section class='anomaly'") <= MAX_ANOMALIES
        assert "class=\"witness-mark\"" in page and "send-reorder" in page
        assert "Overview (aggregated per lane and time bin)" in page
