"""The mutation benchmark's inputs: the reviewed list of equivalent mutants parses and gives a
reason for each, and a bad target is a usage error (exit 3), not a traceback."""
from __future__ import annotations

from kafkaverify.bench import mutate


def test_equivalent_list_parses_with_a_reason_each():
    eqs = mutate.load_equivalents()
    assert eqs and all(e.reason and e.path in mutate.TARGETS and e.operator.startswith("core/") for e in eqs)


def test_bad_list_line_is_a_clear_error(tmp_path):
    p = tmp_path / "eq.txt"
    p.write_text("spec/rules.py:12 core/NumberReplacer\n")
    try:
        mutate.load_equivalents(p)
    except SystemExit as e:
        assert "expected 'path:line[:col] operator | reason'" in str(e)
    else:
        raise AssertionError("accepted a line without a reason")


def test_unknown_target_or_sample_is_a_usage_error(capsys):
    assert mutate.main(["spec/state.py"]) == 3
    assert mutate.main(["spec/rules.py", "--sample", "spec/rules.py=0"]) == 3
    assert "not a target" in capsys.readouterr().err
