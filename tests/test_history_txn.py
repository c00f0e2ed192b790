"""Transactions, assignment sets and Jepsen's histories: format version 2 read and refused, the
oracle's new rules (each through a verdict it changes), the pipeline routing what the screens
do not know to the oracle, Jepsen's Kafka checker cases (tests/jepsen_cases.py) and the
`check-history --format jepsen` / `convert` commands."""
from __future__ import annotations

import json

import pytest
from checkers.history.oracle.check import check_history
from checkers.history.pipeline.file_check import check_file
from kafkaverify.cli import main
from tests.history_util import B
from tests.jepsen_cases import CASES
from traces import history as th
from traces import history_jepsen as hj


class _R:
    def __init__(self, code, output):
        self.exit_code, self.output = code, output


@pytest.fixture
def cli(capsys):
    """Runs the kafkaverify CLI in-process: (exit code, stdout + stderr)."""
    def run(args):
        capsys.readouterr()
        with pytest.raises(SystemExit) as e:
            main(args)
        out = capsys.readouterr()
        return _R(e.value.code, out.out + out.err)
    return run


def _v2(b: B) -> th.History:
    h = b.history()
    h.header["version"] = th.TXN_VERSION
    return h


def _kinds(h: th.History) -> set[str]:
    return check_history(h).types()


# --- Jepsen's checker cases -------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_jepsen_case(case, tmp_path):
    """Each case gives our recorded verdict; where it differs from what Jepsen's test asserts,
    the difference is documented (`why`)."""
    name, lines, jepsen, ours, notes, why = case
    p = tmp_path / "history.edn"
    p.write_text("\n".join(lines) + "\n")
    v = check_history(hj.load(p))
    assert v.types() == ours
    assert {a.type for a in v.notes} == notes
    if v.types() | {a.type for a in v.notes} != jepsen or (jepsen and v.status != "invalid"
                                                           and not (jepsen & notes)):
        assert why, f"{name}: a difference from Jepsen's expectation without a reason"
    for a in v.anomalies + v.notes:
        assert a.witness and a.explanation


def test_jepsen_cases_table_in_docs_names_every_case():
    from pathlib import Path
    text = (Path(__file__).parent.parent / "docs" / "histories.md").read_text()
    for name, *_ in CASES:
        assert f"| {name} |" in text, name


# --- assignment semantics ----------------------------------------------------------------------

def _consumer(b: B, assigns: list[tuple[int, list[int]]], polls: list[tuple[int, int, list[int]]]):
    """Sends of offsets 0..9 to partitions 0 and 1; then a consumer's assignments (time, parts)
    and polls (time, part, offsets)."""
    for part in (0, 1):
        for o in range(10):
            b.send(9, f"v{part}-{o}", o * 10, o * 10 + 5, offset=o, part=part)
    for t, parts in assigns:
        for part in parts:
            b.assign(1, 1000 + t, 1000 + t + 1, gen=1, part=part, group=None)
    for t, part, offs in polls:
        b.poll(1, [(o, f"v{part}-{o}") for o in offs], 1000 + t, 1000 + t + 1, part=part)
    return b


def test_reassign_keeping_a_partition_keeps_its_position():
    """A miss of the one-partition semantics: after an assignment that keeps partition 0, a
    jump forward there is a poll-skip (version 1 reset the position: nothing found)."""
    b = _consumer(B(), [(0, [0]), (20, [0, 1])], [(10, 0, [0, 1]), (30, 0, [5, 6])])
    assert "poll-skip" in _kinds(_v2(b))
    assert "poll-skip" not in _kinds(b.history())


def test_assignment_revokes_what_it_does_not_list():
    """A false alarm of the one-partition semantics: partition 0 revoked by an assignment of
    partition 1 alone: its position is forgotten, and a later read of it from the start is no
    nonmonotonic poll (version 1 kept the position: a false alarm, as in Jepsen's "with
    intermediate subscribe" cases)."""
    b = _consumer(B(), [(0, [0]), (20, [1])], [(10, 0, [3, 4]), (30, 1, [0]), (50, 0, [0, 1])])
    assert _kinds(_v2(b)) & {"nonmonotonic-poll", "poll-skip"} == set()
    assert "nonmonotonic-poll" in _kinds(b.history())


def test_an_assignment_of_no_partition_revokes_all(tmp_path):
    p = tmp_path / "h.jsonl"
    evs = [{"id": 0, "type": "invoke", "process": 0, "f": "send", "topic": "t", "partition": 0, "value": f"v{i}",
            "mono_ns": 0} for i in range(1)]
    evs = []
    for i in range(6):
        evs += [{"id": i, "type": "invoke", "process": 0, "f": "send", "topic": "t", "partition": 0,
                 "value": f"v{i}", "mono_ns": 10 * i},
                {"id": i, "type": "ok", "process": 0, "f": "send", "offset": i, "mono_ns": 10 * i + 1}]
    evs += [{"id": 10, "type": "invoke", "process": 1, "f": "poll", "topic": "t", "partition": 0, "mono_ns": 100},
            {"id": 10, "type": "ok", "process": 1, "f": "poll", "offsets": [3, 4], "values": ["v3", "v4"], "mono_ns": 101},
            {"id": 11, "type": "invoke", "process": 1, "f": "assign", "mono_ns": 110},
            {"id": 11, "type": "ok", "process": 1, "f": "assign", "mono_ns": 111},
            {"id": 12, "type": "invoke", "process": 1, "f": "poll", "topic": "t", "partition": 0, "mono_ns": 120},
            {"id": 12, "type": "ok", "process": 1, "f": "poll", "offsets": [0], "values": ["v0"], "mono_ns": 121}]
    th.write_jsonl(p, th.make_header("t") | {"version": 2}, evs)
    assert "nonmonotonic-poll" not in check_history(th.load(p)).types()
    th.write_jsonl(p, th.make_header("t") | {"version": 2}, [e for e in evs if e["id"] != 11])
    assert "nonmonotonic-poll" in check_history(th.load(p)).types()


# --- nothing silently dropped ------------------------------------------------------------------

def _log(b: B, n: int = 6):
    for o in range(n):
        b.send(0, f"v{o}", o * 10, o * 10 + 5, offset=o)


def test_failed_poll_records_are_evidence():
    """A poll that failed but returned records: a value at a second offset is a duplicate."""
    b = B()
    _log(b, 3)
    b.poll(1, [(7, "v1")], 100, 110, type="fail")
    assert "duplicate" in _kinds(b.history())
    b.ops[-1].offsets, b.ops[-1].values = None, None
    assert "duplicate" not in _kinds(b.history())


def test_info_poll_is_checked_against_the_position_but_does_not_move_it():
    b = B()
    _log(b, 6)
    b.poll(1, [(0, "v0")], 100, 110)
    b.poll(1, [(3, "v3")], 120, 130, type="info")          # skips 1 and 2
    assert "poll-skip" in _kinds(b.history())
    b.ops[-1].offsets, b.ops[-1].values = [1, 2], ["v1", "v2"]
    b.poll(1, [(1, "v1")], 140, 150)                        # the info poll did not move it
    assert _kinds(b.history()) & {"poll-skip", "nonmonotonic-poll"} == set()


def test_unacknowledged_offset_proven_by_a_read_is_placed():
    """An info send that reported an offset and whose value was read elsewhere: its record is at
    both offsets (a duplicate); without the reported offset, nothing to say."""
    b = B()
    _log(b, 3)
    s = b.send(2, "x", 50, 60, type="info")
    s.offset = 1                                             # reported, unacknowledged
    b.poll(1, [(0, "v0"), (1, "v1"), (2, "v2"), (3, "x")], 100, 110)
    kinds = _kinds(b.history())
    assert {"inconsistent-offsets", "duplicate"} <= kinds
    s.offset = None
    assert not _kinds(b.history()) & {"inconsistent-offsets", "duplicate"}


def _unacked_reorder(tmp_path, fmt: str):
    """Process 0 sends a (info: unacknowledged) then b (ok, offset 0) while a is in flight; a
    is read at offset 1: the producer's order is reversed in the log."""
    b = B()
    b.config(0, 0, idempotence=True, retries=5, max_in_flight=5, acks="all")
    b.send(0, "a", 10, 40, type="info")
    b.send(0, "b", 20, 30, offset=0)
    b.send(3, "c", 45, 50, offset=2)
    b.poll(1, [(0, "b"), (1, "a"), (2, "c")], 100, 110, final=True)
    h = b.history()
    p = tmp_path / f"h.{fmt}"
    th.write(p, h.header, th.history_events(h.ops))
    return h, p


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_unacknowledged_read_sends_are_ordered_and_the_screens_see_it(tmp_path, fmt):
    h, p = _unacked_reorder(tmp_path, fmt)
    assert "send-reorder" in check_history(h).types()
    r = check_file(str(p))
    assert "send-reorder" in r.verdict.types() and not r.engine.startswith("object")


# --- transactions --------------------------------------------------------------------------------

def _txn_history(tmp_path, isolation="read_committed", commit="fail", txn_on_config=True):
    evs = [{"id": 0, "type": "invoke", "process": 0, "f": "producer_config", "mono_ns": 0,
            **({"transactional_id": "tx-0"} if txn_on_config else {})},
           {"id": 0, "type": "ok", "process": 0, "f": "producer_config", "mono_ns": 1},
           {"id": 1, "type": "invoke", "process": 0, "f": "send", "topic": "t", "partition": 0, "value": "a",
            "txn": 7, "mono_ns": 10},
           {"id": 1, "type": "ok", "process": 0, "f": "send", "offset": 0, "mono_ns": 11},
           {"id": 2, "type": "invoke", "process": 0, "f": "txn_commit", "txn": 7, "mono_ns": 20},
           {"id": 2, "type": commit, "process": 0, "f": "txn_commit", "mono_ns": 21},
           {"id": 3, "type": "invoke", "process": 1, "f": "poll", "topic": "t", "partition": 0,
            "isolation": isolation, "mono_ns": 30},
           {"id": 3, "type": "ok", "process": 1, "f": "poll", "offsets": [0], "values": ["a"], "mono_ns": 31}]
    p = tmp_path / "t.jsonl"
    th.write_jsonl(p, th.make_header("t") | {"version": 2}, evs)
    return p


def test_aborted_read_needs_read_committed(tmp_path):
    assert "G1a" in check_file(str(_txn_history(tmp_path))).verdict.types()
    assert "G1a" not in check_file(str(_txn_history(tmp_path, "read_uncommitted"))).verdict.types()
    assert check_file(str(_txn_history(tmp_path, commit="ok"))).verdict.types() == set()


def test_version_2_goes_to_the_oracle(tmp_path):
    r = check_file(str(_txn_history(tmp_path)))
    assert r.engine.startswith("object: format version 2")
    assert r.verdict.to_json() == check_history(th.load(_txn_history(tmp_path))).to_json()


def test_txn_on_a_non_transactional_producer_is_bad_input(tmp_path, cli):
    p = _txn_history(tmp_path, txn_on_config=False)
    with pytest.raises(th.HistoryError) as e:
        th.load(p)
    assert e.value.where == "line 4" and "'txn'" in e.value.message
    r = cli(["check-history", str(p)])
    assert r.exit_code == 3 and "line 4" in r.output and "'txn'" in r.output


def test_version_1_refuses_version_2_fields(tmp_path, cli):
    p = _txn_history(tmp_path)
    lines = p.read_text().splitlines()
    lines[0] = json.dumps(th.make_header("t"))
    p.write_text("\n".join(lines) + "\n")
    r = cli(["check-history", str(p)])
    assert r.exit_code == 3 and "needs format version 2" in r.output


def test_unknown_commit_is_proven_by_a_read(tmp_path):
    """A transaction whose commit is unknown counts as committed once one of its records is
    read: its other send, at an offset below a read one, is then lost."""
    b = B()
    b.config(0, 0, transactional_id="tx")
    a = b.send(0, "a", 10, 20, offset=0, part=0)
    c = b.send(0, "c", 10, 20, offset=0, part=1)
    end = b._op(process=0, f="txn_commit", inv=30, comp=40, type="info")
    for op in (a, c, end):
        op.txn = 5
    b.send(2, "d", 50, 60, offset=1, part=1)
    p0 = b.poll(1, [(0, "a")], 100, 110, part=0)
    p1 = b.poll(1, [(1, "d")], 100, 110, part=1)
    for p in (p0, p1):
        p.isolation = "read_committed"
    assert {"lost-write", "txn-atomicity"} <= _kinds(_v2(b))
    p0.isolation = None              # a read_uncommitted read proves nothing
    assert not {"lost-write", "txn-atomicity"} & _kinds(_v2(b))


# --- Jepsen's format and the commands -------------------------------------------------------------

def _edn(tmp_path, lines):
    p = tmp_path / "history.edn"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_check_history_format_jepsen_exit_codes(tmp_path, cli):
    case = {c[0]: c for c in CASES}
    bad = _edn(tmp_path, case["G1a"][1])
    r = cli(["check-history", "--format", "jepsen", str(bad)])
    assert r.exit_code == 1 and "G1a" in r.output
    good = _edn(tmp_path, case["unseen"][1])
    r = cli(["check-history", "--format", "jepsen", str(good),
                                  "--producer-config", '{"idempotence": true, "retries": 3}'])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("line,where,what", [
    ("{:index 0, :time 0, :type :invoke, :process 0, :f :send, :value [[:send :x 1]]", "line 2", "malformed EDN"),
    ("{:index 0, :time 0, :type :invoke, :process 0, :f :frob, :value []}", "line 2", "field ':f'"),
    ("{:index 0, :time 0, :type :weird, :process 0, :f :send, :value []}", "line 2", "field ':type'"),
])
def test_bad_jepsen_input_names_line_and_field(tmp_path, cli, line, where, what):
    p = _edn(tmp_path, ["{:index 9, :time 0, :type :invoke, :process :nemesis, :f :start, :value nil}", line])
    r = cli(["check-history", "--format", "jepsen", str(p)])
    assert r.exit_code == 3 and where in r.output and what in r.output, r.output


@pytest.mark.parametrize("f,value,what", [
    ("send", "[[:send :x [:a 1]]]", "send offset"),
    ("send", "[[:send :x [-1 1]]]", "send offset"),
    ("send", "[[:send :x [1.5 1]]]", "send offset"),
    ("poll", "[[:poll {:x [[-2 1]]}]]", "negative offset"),
    ("poll", "[[:poll {[:x true] [[0 1]]}]]", "is not a key"),
])
def test_bad_jepsen_results_name_line_and_field(tmp_path, cli, f, value, what):
    """The converter checks what it copies from a completion (pairing then trusts the fields'
    types): a bad offset or key is exit 3 naming the completion's line and field."""
    p = _edn(tmp_path, [f"{{:index 0, :time 0, :type :invoke, :process 0, :f :{f}, :value [[:{f}]]}}",
                        f"{{:index 1, :time 1, :type :ok, :process 0, :f :{f}, :value {value}}}"])
    r = cli(["check-history", "--format", "jepsen", str(p)])
    assert r.exit_code == 3 and "line 2" in r.output and "field ':value'" in r.output and what in r.output, r.output


def test_convert_from_jepsen_round_trips(tmp_path, cli):
    case = {c[0]: c for c in CASES}["lost-write: atomic, proven by a read"]
    src = _edn(tmp_path, case[1])
    out = tmp_path / "h.parquet"
    r = cli(["convert", str(src), "--from", "jepsen", "--to", "parquet", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert check_file(str(out)).verdict.types() == case[3]
    back = tmp_path / "h.jsonl"
    assert cli(["convert", str(out), "--from", "parquet", "--to", "jsonl",
                                     "--out", str(back)]).exit_code == 0
    assert check_file(str(back)).verdict.types() == case[3]


SAMPLE = ('#jepsen.history.Op{:index 3, :f :txn, :value [[:poll {[:t 1] [[0 -2] [1 "s\\"q"]]}] '
          '[:send 3 nil]], :x #{1 2}, :y (1 2.5), :z true, :e #error{:m "x\\u00e9"}, :n 12N}')


@pytest.mark.parametrize("parse", [hj.parse_line, hj.parse_line_py], ids=["compiled", "python"])
def test_edn_reader_subset(parse):
    v = parse(SAMPLE)
    assert v[":value"] == [[":poll", {(":t", 1): [[0, -2], [1, 's"q']]}], [":send", 3, None]]
    assert v[":x"] == [1, 2] and v[":y"] == [1, 2.5] and v[":z"] is True and v[":e"] == {":m": "xé"}
    assert v[":n"] == 12
    for bad in ("{:a}", "[1 2", "{:a 1]", "[1 2)", "]", "1 2", "[1e]"):
        with pytest.raises(hj.EdnError):
            parse(bad)


def test_compiled_edn_reader_is_the_python_one(tmp_path):
    from benchmarks.jepsen_edn import write_history
    assert hj._edn is not None, "traces/_edn.c is not built: python setup.py build_ext --inplace"
    p = tmp_path / "h.edn"
    write_history(p, 3000, 4, 0.3)
    lines = p.read_text().splitlines() + [c for case in CASES for c in case[1]]
    assert [hj.parse_line(x) for x in lines] == [hj.parse_line_py(x) for x in lines]



def test_shrink_keeps_a_transactional_history_valid_input(tmp_path):
    """A shrunk transactional history keeps its producers' transactional producer_config, so it
    reads back (and still shows the anomaly)."""
    from pathlib import Path
    from checkers.history.shrink import shrink
    h = hj.load(Path(__file__).parent.parent / "traces" / "corpus" / "jepsen-kafka-atomic.edn")
    r = shrink(h, kind="lost-write")
    assert len(r.history.ops) < len(h.ops)
    p = tmp_path / "s.jsonl"
    th.write(p, r.history.header, th.history_events(r.history.ops))
    assert "lost-write" in check_history(th.load(p)).types()


def test_recorder_writes_transactions_and_evidence(tmp_path):
    """The recorder writes version 2 on request; a failed poll's records and a transaction
    reach the checkers (an aborted read)."""
    from traces.history_recorder import HistoryRecorder
    t = iter(range(0, 10_000, 10))
    p = tmp_path / "r.jsonl"
    with HistoryRecorder(p, "rec", clock=lambda: next(t), version=2) as rec:
        rec.producer_config(0, idempotence=True, transactional_id="tx-0")
        s = rec.invoke(0, "send", topic="t", partition=0, value="a", txn=1)
        rec.ok(s, offset=0)
        rec.info(rec.invoke(0, "txn_abort", txn=1))
        q = rec.invoke(1, "poll", topic="t", partition=0, isolation="read_committed")
        rec.fail(q, error="TIMEOUT", offsets=[0], values=["a"])
        q = rec.invoke(1, "poll", topic="t", partition=0, isolation="read_committed")
        rec.ok(q, offsets=[0], values=["a"])
    v = check_history(th.load(p))
    assert "G1a" in v.types()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("what", ["failed poll", "info send offset"])
def test_evidence_goes_to_the_oracle_through_the_pipeline(tmp_path, fmt, what):
    """The screens do not use these fields: the fused screen counts them and the pipeline hands
    the history to the oracle, whose verdict uses them."""
    b = B()
    _log(b, 3)
    if what == "failed poll":
        b.poll(1, [(7, "v1")], 100, 110, type="fail")
        kind = "duplicate"
    else:
        s = b.send(2, "x", 50, 60, type="info")
        s.offset = 1
        b.poll(1, [(0, "v0"), (1, "v1"), (2, "v2"), (3, "x")], 100, 110)
        kind = "inconsistent-offsets"
    h = b.history()
    p = tmp_path / f"h.{fmt}"
    th.write(p, h.header, th.history_events(h.ops))
    r = check_file(str(p))
    assert kind in r.verdict.types() and r.engine.startswith("object: records of info/fail polls")


def test_transaction_operation_in_a_version_1_file_is_bad_input(tmp_path, cli):
    b = B()
    _log(b, 2)
    h = b.history()
    evs = th.history_events(h.ops) + [{"id": 99, "type": "invoke", "process": 0, "f": "txn_commit",
                                        "mono_ns": 10_000}]
    p = tmp_path / "h.jsonl"
    th.write_jsonl(p, h.header, evs)
    r = cli(["check-history", str(p)])
    assert r.exit_code == 3 and "needs format version 2" in r.output


def test_rebalance_log_is_an_assignment(tmp_path):
    """A rebalance during a poll (Jepsen's :rebalance-log) that took :x away forgets the
    consumer's position there: reading x from the start again is then no nonmonotonic poll."""
    from tests.jepsen_cases import _nm_poll
    assert check_history(hj.load(_edn(tmp_path, _nm_poll))).types() == {"nonmonotonic-poll"}
    moved = _nm_poll[:5] + [_nm_poll[5][:-1] + ", :rebalance-log [{:keys [:y]}]}"]
    assert check_history(hj.load(_edn(tmp_path, moved))).types() == set()
    kept = _nm_poll[:5] + [_nm_poll[5][:-1] + ", :rebalance-log [{:keys [:x :y]}]}"]
    assert check_history(hj.load(_edn(tmp_path, kept))).types() == {"nonmonotonic-poll"}


def _swap_unacked(h: th.History, rng) -> bool:
    """Plants a reorder involving an unacknowledged send that was read: an info send and a later
    ok send of the same producer and partition trade places in the log (acknowledgement and
    every record read). False if the history has no such pair."""
    read_at: dict[tuple, list] = {}
    for p in h.ops:
        if p.f == "poll" and p.offsets:
            for i, v in enumerate(p.values):
                read_at.setdefault((p.topic, p.partition, v), []).append((p, i))
    pairs = []
    for s1 in h.ops:
        if s1.f != "send" or s1.type != "info" or (s1.topic, s1.partition, s1.value) not in read_at:
            continue
        later = [s2 for s2 in h.ops if s2.f == "send" and s2.type == "ok" and s2.process == s1.process
                 and s2.partition == s1.partition and s2.inv > s1.inv
                 and (s2.topic, s2.partition, s2.value) in read_at]
        if later:
            pairs.append((s1, later[0]))
    if not pairs:
        return False
    s1, s2 = rng.choice(pairs)
    o1 = read_at[(s1.topic, s1.partition, s1.value)][0][0].offsets[read_at[(s1.topic, s1.partition, s1.value)][0][1]]
    o2 = s2.offset
    s2.offset = o1
    for key, v in (((s1.topic, s1.partition, s1.value), s2.value), ((s2.topic, s2.partition, s2.value), s1.value)):
        for p, i in read_at[key]:
            p.values = list(p.values)
            p.values[i] = v
    return o1 < o2


@pytest.mark.parametrize("seed", range(4))
def test_screens_see_unacknowledged_reorders_the_oracle_reports(tmp_path, seed):
    """Generated histories with an unacknowledged-but-read send and a later acknowledged one of
    its producer swapped in the log: the pipeline's verdict (screens first) is the oracle's."""
    import random
    from checkers.history.generate import Params, generate
    from tests.test_history_columnar import _fingerprint
    rng = random.Random(seed)
    planted = 0
    for k in range(4):
        h = generate(Params(seed=100 * seed + k, ops=3000, partitions=1 + k % 3))
        if not _swap_unacked(h, rng):
            continue
        planted += 1
        p = tmp_path / f"h{k}.{'parquet' if k % 2 else 'jsonl'}"
        th.write(p, h.header, th.history_events(h.ops))
        oracle = check_history(th.load(p))
        assert {"send-reorder", "nonmonotonic-send"} & oracle.types() or any(
            n.type == "send-reorder" for n in oracle.notes)
        r = check_file(str(p))
        assert not r.engine.startswith("object"), r.engine
        assert _fingerprint(r.verdict) == _fingerprint(oracle)
    assert planted


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_failed_send_with_an_offset_is_bad_input(tmp_path, fmt, cli):
    b = B()
    _log(b, 2)
    s = b.send(2, "x", 50, 60, type="fail")
    s.offset = 1
    h = b.history()
    p = tmp_path / f"h.{fmt}"
    th.write(p, h.header, th.history_events(h.ops))
    r = cli(["check-history", str(p)])
    assert r.exit_code == 3 and "field 'offset'" in r.output and ("line" in r.output or "row" in r.output)


def test_transactional_offset_commit_counts_only_if_committed(tmp_path):
    """An offset commit inside a transaction takes effect with it: a regression by a committed
    transaction's commit is reported, by an aborted one's not."""
    def hist(commit_type):
        b = B()
        b.config(5, 0, transactional_id="tx")
        b.commit(5, 10, 20, gen=1, offset=5)
        c = b.commit(5, 30, 40, gen=1, offset=2)
        end = b._op(process=5, f="txn_commit", inv=50, comp=60, type=commit_type)
        c.txn = end.txn = 3
        return _v2(b)
    assert "commit-regression" in _kinds(hist("ok"))
    assert "commit-regression" not in _kinds(hist("fail"))


def test_edn_readers_agree_on_mangled_lines():
    """Seeded mutations of Jepsen lines (brackets, tags, quotes, escapes inserted, characters
    dropped, lines cut): the compiled reader and the Python one give the same value or both
    refuse with EdnError (never another exception)."""
    import random
    lines = [c for case in CASES for c in case[1]] + [SAMPLE]
    alphabet = list('[]{}()#":\\ ,-+0123456789abcNMe.;') + ["nil", "#{", "#jepsen.history.Op", ":k", '"s"', "\\u00e9"]
    rng = random.Random(7)

    def run(f, s):
        try:
            return ("ok", f(s))
        except hj.EdnError:
            return ("refused",)
    for _ in range(3000):
        s = list(rng.choice(lines))
        for _ in range(rng.randint(1, 4)):
            i, r = rng.randrange(len(s) + 1), rng.random()
            if r < 0.4 and s:
                del s[min(i, len(s) - 1)]
            elif r < 0.8:
                s.insert(i, rng.choice(alphabet))
            else:
                s = s[:i]
        s = "".join(s)
        assert run(hj.parse_line, s) == run(hj.parse_line_py, s), s


def _op_fields(h: th.History) -> list[tuple]:
    from dataclasses import fields
    names = [f.name for f in fields(th.Op)]
    return [tuple(getattr(o, n) for n in names) for o in h.ops]


def test_jepsen_load_is_pairing_of_the_events(tmp_path):
    """history_jepsen.load makes the operations directly; they are, field for field, what
    traces.history.pair makes of the converted events, on every Jepsen case and on seeded
    benchmark histories (with and without transactions, unfinished invokes at the end)."""
    from benchmarks.jepsen_edn import write_history
    paths = []
    for case in CASES:
        paths.append(_edn(tmp_path, case[1]).rename(tmp_path / f"c{len(paths)}.edn"))
    for seed, rate in ((1, 0.3), (2, 0.0), (3, 1.0)):
        p = tmp_path / f"b{seed}.edn"
        write_history(p, 3000, seed, rate)
        with open(p, "a") as f:         # an op left open at the end: an invoke alone
            f.write("{:index 99999, :time 99999999, :type :invoke, :process 3, :f :send, "
                    ":value [[:send 1 \"z\"]]}\n")
        paths.append(p)
    for p in paths:
        header, evs = hj.events(p, {"retries": 3}, "read_committed")
        want = th.pair(str(p), header, evs)
        got = hj.load(p, {"retries": 3}, "read_committed")
        assert got.header == want.header
        assert _op_fields(got) == _op_fields(want), p


def test_jepsen_value_sent_twice_is_bad_input(tmp_path):
    p = _edn(tmp_path, ["{:index 0, :time 0, :type :invoke, :process 0, :f :send, :value [[:send :x 1]]}",
                        "{:index 1, :time 1, :type :ok, :process 0, :f :send, :value [[:send :x [0 1]]]}",
                        "{:index 2, :time 2, :type :invoke, :process 1, :f :send, :value [[:send :x 1]]}",
                        "{:index 3, :time 3, :type :ok, :process 1, :f :send, :value [[:send :x [1 1]]]}"])
    with pytest.raises(th.HistoryError) as e:
        hj.load(p)
    assert e.value.where == "line 3" and "already sent" in e.value.message
    with pytest.raises(th.HistoryError) as e:
        th.pair(str(p), *hj.events(p))
    assert e.value.where == "line 3" and "already sent" in e.value.message
