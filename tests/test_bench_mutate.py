"""The mutation benchmark's inputs: the reviewed list of equivalent mutants parses and gives a
reason for each, and a bad target is a usage error (exit 3), not a traceback."""
from __future__ import annotations

from benchmarks import mutate


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
    from benchmarks import mutate_order
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
def test_function_scope_is_the_named_functions_lines(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def a():\n    return 1\n\n\nclass K:\n    @staticmethod\n    def b():\n"
                   "        return 2\n\n    async def c(self):\n        return 3\n\n\nX = 4\n")
    assert mutate.function_lines(src, ["a"]) == {1, 2}
    assert mutate.function_lines(src, ["K.b"]) == {6, 7, 8}          # the decorator's line too
    assert mutate.function_lines(src, ["K.c", "a"]) == {1, 2, 10, 11}
    try:
        mutate.function_lines(src, ["b"])                              # a method needs its class
    except ValueError as e:
        assert "no function b" in str(e)
    else:
        raise AssertionError("accepted an unknown function")


def test_default_scopes_name_existing_functions():
    for f, names in mutate.FUNCTIONS.items():
        assert f in mutate.TARGETS and mutate.TARGETS[f] == "impl"
        lines = mutate.function_lines(mutate.ROOT / f, names)
        assert len(lines) > 10 * len(names) // 3, f


def test_bad_functions_option_is_a_usage_error(capsys):
    assert mutate.main(["impl/broker.py", "--functions", "impl/broker.py=Broker.no_such_method"]) == 3
    assert "no function Broker.no_such_method" in capsys.readouterr().err
    assert mutate.main(["impl/rules.py", "--functions", "impl/broker.py=Broker._update_hw"]) == 3
    assert "not a target" in capsys.readouterr().err


def test_scope_and_sample_select_the_mutants_run_and_counted(tmp_path):
    """A real cosmic-ray session over a two-function module: scoped to one function, only its
    mutants stay pending and count as the file's mutants; a sample keeps that many of them."""
    import random
    import subprocess
    import sys

    from tests.broker_fixtures import require
    try:
        from cosmic_ray.work_db import WorkDB, use_db
    except ImportError:
        require(False, "cosmic-ray is not installed (pip install -e '.[mutate]')")
    (tmp_path / "m.py").write_text("def inside(a, b):\n    return a < b and a + 1 == b\n\n\n"
                                   "def outside(a, b):\n    return a > b or a - 1 != b\n")
    (tmp_path / "c.toml").write_text('[cosmic-ray]\nmodule-path = ["m.py"]\ntimeout = 10\n'
                                     'excluded-modules = []\ntest-command = "true"\n'
                                     '[cosmic-ray.distributor]\nname = "local"\n')
    lines = {"m.py": mutate.function_lines(tmp_path / "m.py", ["inside"])}
    pending = {}
    for name, sample in (("all", {}), ("two", {"m.py": 2})):
        session = tmp_path / f"{name}.sqlite"
        subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "init", "c.toml", session.name],
                       cwd=tmp_path, check=True, capture_output=True)
        with use_db(str(session), WorkDB.Mode.open) as db:
            every = [(it.job_id, it.mutations[0].start_pos[0]) for it in db.work_items]
        mutate.select_mutants(session, lines, sample, 1)
        with use_db(str(session), WorkDB.Mode.open) as db:
            pending[name] = [it.mutations[0].start_pos[0] for it in db.pending_work_items]
        assert mutate._collect(session, ["m.py"])[0].mutants == sum(line in lines["m.py"] for _, line in every)
    assert pending["all"] and set(pending["all"]) == {2}          # the body of `inside` only
    assert len(every) > len(pending["all"]) > 2 and len(pending["two"]) == 2


def test_wilson_interval_matches_the_textbook_values():
    lo, hi = mutate.wilson(18, 20)                   # 90 %: Wilson 69.9 %-97.2 %
    assert (round(100 * lo, 1), round(100 * hi, 1)) == (69.9, 97.2)
    assert mutate.wilson(0, 0) == (0.0, 1.0) and mutate.wilson(5, 5)[1] == 1.0 and mutate.wilson(0, 5)[0] == 0.0
