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


def test_killer_order_bench_without_a_session_is_a_usage_error(tmp_path, capsys):
    from kafkaverify.bench import mutate_order
    assert mutate_order.main([str(tmp_path)]) == 3
    assert "no spec session" in capsys.readouterr().err


def test_annotations_are_found_only_where_they_are_never_evaluated():
    src = "from __future__ import annotations\n\ndef f(x: int | None = 1) -> str | None:\n    y: int | None = x\n"
    spans = mutate.annotation_spans(src)
    assert mutate.in_annotation(spans, (3, 13), (3, 14))          # x: int | None
    assert mutate.in_annotation(spans, (3, 32), (3, 33))          # -> str | None
    assert mutate.in_annotation(spans, (4, 11), (4, 12))          # y: int | None
    assert not mutate.in_annotation(spans, (3, 22), (3, 23))      # the default 1
    assert mutate.annotation_spans(src.split("\n", 1)[1]) == []   # evaluated without the import


def test_rerun_survivors_needs_a_kept_run(tmp_path, capsys):
    assert mutate.main(["spec/rules.py", "--rerun-survivors"]) == 3
    assert mutate.main(["spec/rules.py", "--rerun-survivors", "--keep", str(tmp_path)]) == 3
    assert "needs --keep DIR of an earlier run" in capsys.readouterr().err
