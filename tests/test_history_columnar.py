"""The pipeline against the oracle (house style §7, §15): check_file (checkers/history/pipeline: the
fused and polars screens, then the oracle on the partitions they flag) gives the oracle's
verdict (checkers/history/oracle/check.py check_history: the slow, obvious object checkers)
on the history corpus and on seeded histories of every plantable anomaly: the same status,
checks, examined counts, anomalies, witnesses and explanations. These are the tests that pin
the layers' roles (tests/test_history_roles.py pins their import direction). Also the fixes
of what check-history once got wrong: a final read shorter than what was already read,
--time-limit covering reading, no check superlinear in anomalies or commits, the printed time
being the whole time, negative offsets rejected."""
import json
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from checkers.history.pipeline.file_check import check_file
from checkers.history.generate import Params, generate
from checkers.history.result import counts
from checkers.history.oracle.check import check_history
from checkers.history.seeding import SEEDABLE
from tests.conftest import run_kafkaverify
from tests.history_util import B
from traces.history import history_events, load, write

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "traces" / "corpus"


def _fingerprint(v):
    return (v.status, counts(v.anomalies),
            [(c.name, c.status, c.limited, c.examined if c.name != "cycles" else None) for c in v.checks],
            [(a.type, a.witness, a.partition, a.explanation) for a in v.anomalies],
            [(a.type, a.witness) for a in v.notes])


def _same(h, path, tmp_path=None):
    """The pipeline's verdict on the file at `path` is the oracle's on `h` (its history)."""
    oracle = check_history(h)
    r = check_file(str(path))
    assert r.engine == "columnar", r.engine
    assert _fingerprint(r.verdict) == _fingerprint(oracle), path
    return r


KINDS = [None] + sorted(SEEDABLE)


@pytest.mark.parametrize("kind", KINDS)
def test_pipeline_verdicts_are_the_oracles_on_generated(kind, tmp_path):
    """Every seedable anomaly (and none), several seeds and shapes, both encodings."""
    for seed in range(4):
        p = Params(seed=seed, ops=1200, partitions=1 + seed % 4, consumers=1 + seed % 3)
        h = generate(p, {kind: 0.03 if seed % 2 else 0.2} if kind else None)
        path = tmp_path / f"h{seed}.{'parquet' if seed % 2 else 'jsonl'}"
        write(path, h.header, history_events(h.ops))
        r = _same(load(path), path)
        if kind and kind not in ("G0-realtime", "G1c-realtime"):
            assert kind in r.verdict.types(), (kind, seed)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("history-*.jsonl")), ids=lambda p: p.stem)
def test_pipeline_verdicts_are_the_oracles_on_corpus(path):
    _same(load(path), path)


def test_hand_built_corner_cases_agree(tmp_path):
    """Info sends read at an offset, a gap in the offsets (object path for that partition),
    at-most-once groups, reorder permitted by settings (a note), a group with two modes."""
    b = B()
    b.config(0, 0, idempotence=False, retries=3, max_in_flight=5, acks="all")
    b.send(0, "a", 1, 10, offset=0)
    b.send(0, "b", 2, 9, offset=2)            # gap at 1, and a permitted reorder with c
    b.send(0, "c", 3, 8, offset=1, type="info")
    b.assign(1, 11, 12, gen=1, delivery="at-most-once")
    b.poll(1, [(0, "a"), (1, "c")], 13, 14)
    b.poll(1, [(1, "c"), (2, "b")], 15, 16)   # at-most-once: offset 1 delivered twice
    b.send(2, "x", 1, 5, offset=0, part=1)
    b.assign(3, 2, 3, gen=1, part=1, group="h", delivery="at-least-once")
    b.assign(3, 2, 3, gen=1, part=1, group="h", delivery="at-most-once")
    b.poll(9, [(0, "a"), (1, "c"), (2, "b")], 30, 31, final=True)
    b.poll(9, [(0, "x")], 30, 31, part=1, final=True)
    h = b.history()
    for ext in ("jsonl", "parquet"):
        path = tmp_path / f"c.{ext}"
        write(path, h.header, history_events(h.ops))
        _same(load(path), path)


def test_lost_read_kip101_client_face(tmp_path):
    """Acknowledged and polled, then absent from a final read begun later: lost data (the
    client-side face of KIP-101). Both paths report it; it was judged valid before."""
    b = B()
    for i in range(3):
        b.send(0, f"v{i}", 1 + i, 2 + i, offset=i)
    b.poll(1, [(0, "v0"), (1, "v1"), (2, "v2")], 10, 11)
    b.poll(9, [(0, "v0"), (1, "v1")], 20, 21, final=True)     # the tail is gone
    h = b.history()
    v = check_history(h)
    assert v.status == "invalid" and v.types() == {"lost-read"}
    (a,) = v.anomalies
    assert a.witness == (3, 4) and "offset 2" in a.explanation
    path = tmp_path / "kip101.jsonl"
    write(path, h.header, history_events(h.ops))
    _same(load(path), path)
    p = _cli("check-history", path)
    assert p.returncode == 1 and "lost-read" in p.stdout


_cli = run_kafkaverify


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """3·10^4 operations (Parquet and JSON lines), once per module."""
    d = tmp_path_factory.mktemp("big")
    h = generate(Params(seed=5, ops=30_000, partitions=4))
    for ext in ("parquet", "jsonl"):
        write(d / f"h.{ext}", h.header, history_events(h.ops))
    return d


@pytest.mark.parametrize("ext", ["parquet", "jsonl"])
def test_time_limit_is_enforced_including_loading(big, ext):
    p = _cli("check-history", big / f"h.{ext}", "--time-limit", "0.01", "--json", big / f"t{ext}.json")
    assert p.returncode == 2, p.stdout
    r = json.loads((big / f"t{ext}.json").read_text())
    assert r["status"] == "unknown"
    assert all(c["limited"] and "time limit" in c["reason"] for c in r["checks"])
    # The kernel stops at the next stage boundary (reading is checked before and per block).
    assert r["seconds"] < 30, r["seconds"]     # generous: the machine is shared


def test_printed_time_is_end_to_end(big, monkeypatch):
    """Reading is inside the printed time: slow the reader down by 0.5 s and see it there."""
    from kafkaverify.cli import cli
    from traces import history_columnar as hc
    real = hc.read

    def slow(*a, **k):
        time.sleep(0.5)
        return real(*a, **k)
    monkeypatch.setattr(hc, "read", slow)
    out = big / "e2e.json"
    r = CliRunner().invoke(cli, ["check-history", str(big / "h.parquet"), "--json", str(out)],
                           standalone_mode=False)
    assert r.exception is None, r.output
    assert "read and checked in" in r.output and "(end to end)" in r.output
    assert json.loads(out.read_text())["seconds"] >= 0.5


def _main(capsys, *args) -> tuple[int, str, str]:
    """The command line in this process (the same entry point, no interpreter start-up)."""
    from kafkaverify.cli import main
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return e.value.code, out.out, out.err


def test_negative_offsets_are_bad_input(tmp_path, capsys):
    head = '{"format":"kafkaverify-history","version":1}\n'
    send = '{"id":1,"type":"invoke","process":0,"f":"send","topic":"t","partition":0,"value":"a","mono_ns":1}\n'
    cases = {
        "ack": send + '{"id":1,"type":"ok","process":0,"f":"send","offset":-1,"mono_ns":2}\n',
        "poll": send + '{"id":1,"type":"ok","process":0,"f":"send","offset":0,"mono_ns":2}\n'
                       '{"id":2,"type":"invoke","process":1,"f":"poll","topic":"t","partition":0,"mono_ns":3}\n'
                       '{"id":2,"type":"ok","process":1,"f":"poll","offsets":[0,-3],"values":["a","b"],"mono_ns":4}\n',
    }
    for name, body in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(head + body)
        code, _, err = _main(capsys, "check-history", path)
        assert code == 3 and "negative offset" in err, (name, err)
        assert "line 3" in err or "line 5" in err
        h_path = tmp_path / f"{name}.parquet"
        from traces.history import iter_jsonl, write_parquet
        header, evs = iter_jsonl(path)
        write_parquet(h_path, header, [e for _, e in evs])
        code, _, err = _main(capsys, "check-history", h_path)
        assert code == 3 and "negative offset" in err and "row" in err


def test_at_least_once_is_linear_in_commits():
    """One never-read offset under 30,000 later commits: the old check searched a list once
    per commit (quadratic: minutes); now one pass."""
    b = B()
    n = 30_000
    b.assign(1, 0, 1, gen=1, delivery="at-least-once")
    t = 10
    for i in range(n):
        b.send(0, f"v{i}", t, t + 1, offset=i)
        t += 2
    b.poll(1, [(i, f"v{i}") for i in range(1, n)], t, t + 1)       # offset 0 never read
    t += 2
    for i in range(n):
        b.commit(1, t, t + 1, gen=1, offset=n)
        t += 2
    b.poll(9, [(i, f"v{i}") for i in range(n)], t, t + 1, final=True)
    h = b.history()
    t0 = time.perf_counter()
    v = check_history(h)
    assert time.perf_counter() - t0 < 20
    assert counts(v.anomalies) == {"delivery-at-least-once": 1}


def test_witnesses_are_not_superlinear_in_anomalies():
    """20,000 inconsistent offsets, each needing the operations that show it: the lookup is
    built once per partition (it was a scan of every poll per anomaly)."""
    b = B()
    n = 20_000
    for i in range(n):
        b.send(0, f"v{i}", 2 * i, 2 * i + 1, offset=i)
    t = 2 * n
    for i in range(n):
        b.poll(1, [(i, f"w{i}")], t, t + 1)            # a different value at every offset
        t += 2
    b.poll(9, [(i, f"v{i}") for i in range(n)], t, t + 1, final=True)
    t0 = time.perf_counter()
    v = check_history(b.history())
    assert time.perf_counter() - t0 < 30
    assert counts(v.anomalies)["inconsistent-offsets"] == n


def _shuffled_ids(h, seed: int):
    """`h` with its operation ids permuted (seeded): id order is then not invoke order."""
    import random
    ids = [op.id for op in h.ops]
    shuffled = ids[:]
    random.Random(seed).shuffle(shuffled)
    to = dict(zip(ids, shuffled))
    for op in h.ops:
        op.id = to[op.id]
    return h


def test_ids_out_of_invoke_order_agree(tmp_path):
    """Operation ids need not follow invoke order: pairing then sorts instead of taking the
    invokes' order as sorted (the merge join's precondition), and verdicts stay the oracle's."""
    h = _shuffled_ids(generate(Params(seed=3, ops=1500, partitions=2),
                               {"lost-write": 0.1, "poll-skip": 0.1}), 3)
    for ext in ("parquet", "jsonl"):
        path = tmp_path / f"perm.{ext}"
        write(path, h.header, history_events(h.ops))
        r = _same(load(path), path)
        assert {"lost-write", "poll-skip"} <= r.verdict.types()


@pytest.mark.parametrize("kind", ["nonmonotonic-poll", "nonmonotonic-send", "send-reorder", "poll-skip"])
def test_screens_out_of_time_order_agree(kind, tmp_path):
    """Operations whose id order is not their time order: the order screens (a consumer's
    polls, a producer's sends) then sort by (key, invoke time, id) instead of stably by key,
    and verdicts stay the oracle's."""
    import polars as pl

    from checkers.history.screens import columnar
    h = _shuffled_ids(generate(Params(seed=5, ops=1500, partitions=3, consumers=2), {kind: 0.1}), 5)
    path = tmp_path / "perm.parquet"
    write(path, h.header, history_events(h.ops))
    r = _same(load(path), path)
    assert kind in r.verdict.types()
    from traces import history_columnar as hc
    _, lf, _ = hc.read(str(path), lazy=True)
    ev = columnar.prepare(columnar.encode(
        lf.with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i")).select(
            "run", "_i", *columnar.NEEDED))).collect()
    assert not columnar._in_time_order(columnar._partition_ops(columnar.pair(ev).ops))


def test_file_without_optional_columns_agrees(tmp_path):
    """A Parquet file may omit optional columns: the scan supplies them as nulls."""
    import pyarrow.parquet as pq
    h = generate(Params(seed=4, ops=1500, partitions=2), {"duplicate": 0.1})
    full = tmp_path / "full.parquet"
    write(full, h.header, history_events(h.ops))
    t = pq.read_table(full)
    slim = tmp_path / "slim.parquet"
    drop = [n for n in ("key", "error", "wall_ns", "trace_id") if n in t.column_names]
    pq.write_table(t.drop_columns(drop), slim)
    r = _same(load(slim), slim)
    assert "duplicate" in r.verdict.types()


def test_witness_rows_match_the_object_reader_across_json_blocks(tmp_path, monkeypatch):
    """JSON lines are parsed in blocks; the line each witness names must be the object
    reader's line, whichever block the event fell in."""
    from traces import history_columnar as hc
    monkeypatch.setattr(hc, "JSON_BLOCK", 4096)
    h = generate(Params(seed=6, ops=2000, partitions=2), {"lost-write": 0.05, "send-reorder": 0.05})
    path = tmp_path / "blocks.jsonl"
    write(path, h.header, history_events(h.ops))
    oracle = load(path).by_id()
    r = _same(load(path), path)
    assert r.verdict.anomalies
    named = {i for a in r.verdict.anomalies for i in a.witness}
    assert named and all(r.witness_ops[i].where == oracle[i].where for i in named)


@pytest.mark.parametrize("blank", ["\n", "  \t\n"])
def test_blank_line_keeps_witness_lines_right(tmp_path, monkeypatch, blank):
    """The object reader skips a blank (or whitespace-only) line but counts it; so does
    pyarrow's JSON reader, without counting it: the event rows would no longer be line
    numbers. Such a file must name the same lines as the object reader, in any block."""
    from traces import history_columnar as hc
    monkeypatch.setattr(hc, "JSON_BLOCK", 4096)
    h = generate(Params(seed=6, ops=600, partitions=2), {"lost-write": 0.05})
    path = tmp_path / "blank.jsonl"
    write(path, h.header, history_events(h.ops))
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:300] + [blank.rstrip("\n").encode()] + lines[300:]))
    oracle = load(path).by_id()
    r = check_file(str(path))
    assert _fingerprint(r.verdict) == _fingerprint(check_history(load(path)))
    named = {i for a in r.verdict.anomalies for i in a.witness}
    assert named and all(r.witness_ops[i].where == oracle[i].where for i in named)
    assert any(int(oracle[i].where.split()[1]) > 301 for i in named)   # some after the blank


def test_jsonl_blocks_cut_at_line_ends(tmp_path, monkeypatch):
    """Blocks are whole lines, a line longer than a block is a block of its own (and, parsed
    with threads, longer than a part), and a last line without its newline is still read: the
    frame is the object reader's events, in order."""
    import polars as pl
    from traces import history_columnar as hc
    monkeypatch.setattr(hc, "JSON_BLOCK", 64)       # shorter than most lines
    monkeypatch.setattr(hc, "JSON_PART", 16)        # threaded parts shorter than any line
    h = generate(Params(seed=2, ops=200, partitions=2))
    path = tmp_path / "cut.jsonl"
    write(path, h.header, history_events(h.ops))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    _, df = hc.read_jsonl(str(path))
    events = [json.loads(x) for x in path.read_text().split("\n")[1:]]
    assert df.height == len(events)
    assert df.get_column("id").to_list() == [e["id"] for e in events]
    assert df.get_column("row").to_list() == list(range(len(events)))
    assert df.get_column("values").to_list() == [e.get("values") for e in events]
    assert df.get_column("trace_id").unique().to_list() == [h.header.get("trace_id") or ""]
    assert df.schema["value"] == pl.String


@pytest.mark.parametrize("kind", [None, "lost-write", "duplicate", "poll-skip", "inconsistent-offsets",
                                  "commit-regression", "delivery-at-least-once", "nonlinearizable"])
def test_chunked_check_agrees_with_object_checkers(kind, tmp_path, monkeypatch):
    """Large histories are checked in chunks of partitions, read in slices: with chunks and
    slices made tiny here, operations straddle slice boundaries (invoke in one slice, its
    completion in a later one), consumers and groups span chunks, and the verdict must stay the
    oracle's, witnesses included."""
    from checkers.history.pipeline import file_check as pipeline
    from checkers.history.screens import fused as fused_screen
    monkeypatch.setattr(pipeline, "CHUNK_EVENTS", 700)
    monkeypatch.setattr(pipeline, "SLICE_EVENTS", 333)
    for seed in range(2):
        p = Params(seed=seed, ops=1500, partitions=3 + seed, consumers=2)
        h = generate(p, {kind: 0.05} if kind else None)
        path = tmp_path / f"h{seed}.{'parquet' if seed % 2 else 'jsonl'}"
        write(path, h.header, history_events(h.ops))
        oracle = check_history(load(path))
        # With the fused screen (a valid history is decided from its slices, a flagged one goes
        # to the chunked kernel) and, for a valid one, without it (the chunked kernel again).
        for fused in (True, False) if not kind else (True,):
            monkeypatch.setattr(fused_screen, "FUSED_SCREEN", fused)
            r = check_file(str(path))
            if fused and not kind:
                assert r.engine.startswith("columnar (fused screen, ") and "slices" in r.engine, r.engine
            else:
                assert r.engine.startswith("columnar (") and "chunks" in r.engine, r.engine
            assert _fingerprint(r.verdict) == _fingerprint(oracle), (kind, seed, fused)
            if kind and kind not in ("G0-realtime", "G1c-realtime"):
                assert kind in r.verdict.types(), (kind, seed)


@pytest.mark.parametrize("kind", [None, "lost-write", "duplicate", "send-reorder"])
def test_spilled_json_lines_agree_with_object_checkers(kind, tmp_path, monkeypatch):
    """A long JSON-lines file is spilled to Arrow IPC files while it is parsed and scanned back
    (memory bounded by a spill block): with the spill made tiny here, in one piece and in
    chunks, the verdict and every witness line must stay the object reader's, and the spill
    directory must go with the check."""
    import glob
    import tempfile
    from checkers.history.pipeline import file_check as pipeline
    from checkers.history.screens import fused as fused_screen
    from traces import history_columnar as hc
    monkeypatch.setattr(hc, "JSON_BLOCK", 4096)
    monkeypatch.setattr(hc, "SPILL_EVENTS", 500)
    monkeypatch.setattr(hc, "SPILL_BLOCK", 400)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    h = generate(Params(seed=7, ops=1500, partitions=3, consumers=2), {kind: 0.05} if kind else None)
    path = tmp_path / "long.jsonl"
    write(path, h.header, history_events(h.ops))
    _, lf, _ = hc.read(str(path), lazy=True)
    assert isinstance(lf, pl.LazyFrame) and len(glob.glob(str(tmp_path / "kv-jsonl-*" / "*.arrow"))) > 2
    del lf
    assert not glob.glob(str(tmp_path / "kv-jsonl-*"))
    oracle = check_history(load(path))
    lines = load(path).by_id()
    for chunk, fused in ((10**9, True), (700, True)) + (((700, False),) if not kind else ()):
        monkeypatch.setattr(pipeline, "CHUNK_EVENTS", chunk)
        monkeypatch.setattr(pipeline, "SLICE_EVENTS", 333)
        monkeypatch.setattr(fused_screen, "FUSED_SCREEN", fused)
        r = check_file(str(path))
        sliced = ("chunks" in r.engine) if kind or not fused else ("slices" in r.engine)
        assert r.engine.startswith("columnar") and sliced == (chunk == 700), r.engine
        assert _fingerprint(r.verdict) == _fingerprint(oracle), (kind, chunk)
        named = {i for a in r.verdict.anomalies for i in a.witness}
        assert all(r.witness_ops[i].where == lines[i].where for i in named)
        if kind:
            assert kind in r.verdict.types() and named
    del r
    assert not glob.glob(str(tmp_path / "kv-jsonl-*"))


@pytest.mark.parametrize("kind", [None, "lost-write", "poll-skip", "delivery-at-least-once"])
def test_chunked_check_with_sparse_ids_agrees_with_object_checkers(kind, tmp_path, monkeypatch):
    """Ids too sparse for the dense id table are routed to their chunks by a join: the same
    verdicts as the oracle, operations straddling slices."""
    from checkers.history.pipeline import file_check as pipeline
    from checkers.history.screens import fused as fused_screen
    monkeypatch.setattr(pipeline, "CHUNK_EVENTS", 700)
    monkeypatch.setattr(pipeline, "SLICE_EVENTS", 333)
    monkeypatch.setattr(pipeline, "DENSE_IDS_PER_EVENT", 0)
    monkeypatch.setattr(pipeline, "DENSE_MARGIN", 0)
    h = generate(Params(seed=3, ops=1500, partitions=4, consumers=2), {kind: 0.05} if kind else None)
    path = tmp_path / "h.parquet"
    write(path, h.header, history_events(h.ops))
    oracle = check_history(load(path))
    r = check_file(str(path))
    assert ("chunks" if kind else "slices") in r.engine, r.engine
    assert _fingerprint(r.verdict) == _fingerprint(oracle), kind
    if kind:
        assert kind in r.verdict.types()


@pytest.mark.parametrize("sparse", [False, True])
def test_chunked_check_sends_broken_input_to_the_object_reader(sparse, tmp_path, monkeypatch):
    """An id invoked twice, in two different chunks, passes each chunk's own screen: the
    chunked path must still refuse it with the object reader's message (exit 3 material),
    whether ids are routed by the dense table or by a join."""
    from checkers.history.pipeline import file_check as pipeline
    from checkers.history.screens import fused as fused_screen
    from traces.history import HistoryError
    if sparse:
        monkeypatch.setattr(pipeline, "DENSE_IDS_PER_EVENT", 0)
        monkeypatch.setattr(pipeline, "DENSE_MARGIN", 0)
    monkeypatch.setattr(pipeline, "CHUNK_EVENTS", 500)
    monkeypatch.setattr(pipeline, "SLICE_EVENTS", 200)
    h = generate(Params(seed=2, ops=1200, partitions=4))
    evs = history_events(h.ops)
    a = next(e for e in evs if e["f"] == "send" and e["partition"] == 0)
    b = next(e for e in reversed(evs) if e["type"] == "invoke" and e["f"] == "send" and e["partition"] == 1)
    old = b["id"]
    for e in evs:
        if e["id"] == old:
            e["id"] = a["id"]
    path = tmp_path / "dup.parquet"
    write(path, h.header, evs)
    with pytest.raises(HistoryError, match="invoked twice"):
        check_file(str(path))


def test_chunked_check_of_many_topics_and_groups(tmp_path, monkeypatch):
    """Copies of a history on their own topics, processes and groups (as the benchmark tiles
    10^7 operations), checked in chunks read in slices: topics and groups must get the same
    codes in every slice, or partitions of two topics would be merged or one split."""
    from checkers.history.pipeline import file_check as pipeline
    from checkers.history.screens import fused as fused_screen
    from traces.history_tile import tile
    h = generate(Params(seed=7, ops=1000, partitions=3, consumers=2), {"lost-write": 0.05})
    one = tmp_path / "one.parquet"
    write(one, h.header, history_events(h.ops))
    many = tmp_path / "many.parquet"
    tile(one, many, 3)
    oracle = check_history(load(many))
    monkeypatch.setattr(pipeline, "CHUNK_EVENTS", 1500)
    monkeypatch.setattr(pipeline, "SLICE_EVENTS", 700)
    r = check_file(str(many))
    assert "chunks" in r.engine, r.engine
    assert _fingerprint(r.verdict) == _fingerprint(oracle)
    assert "lost-write" in r.verdict.types()


def test_first_reads_by_table_agree_with_the_join(tmp_path, monkeypatch):
    """The at-least-once screen finds each offset's first read by the offset's number and the
    group's (a table); the join on (record, group) it replaces is what
    `_consumer` does without the records (`m=None`). Both must flag the same partitions with
    the same counts, on histories with planted anomalies, with one group and with three, with
    and without placed offsets (info sends read back), and the table path must have run."""
    import polars as pl

    from checkers.history.screens import columnar as kernel
    from checkers.history.screens.columnar import lean
    from traces import history_columnar as hc
    seen = {"table": 0, "placed": 0}
    real = kernel._consumer

    def spy(ops, p, polls, recs, assigns, at, m=None, n_acked=0):
        if m is not None:
            seen["table"] += 1
            seen["placed"] += at.filter(pl.col("ai") >= n_acked).height > 0
        return real(ops, p, polls, recs, assigns, at, m, n_acked)

    def join_only(ops, p, polls, recs, assigns, at, m=None, n_acked=0):
        return real(ops, p, polls, recs, assigns, at, None, n_acked)
    from traces.history_tile import tile
    for kind in (None, "delivery-at-least-once", "lost-write", "poll-skip", "commit-regression"):
        for seed in range(3):
            h = generate(Params(seed=seed, ops=1500, partitions=1 + seed, consumers=1 + seed % 2),
                         {kind: 0.05} if kind else None)
            path = tmp_path / f"h-{kind}-{seed}.parquet"
            write(path, h.header, history_events(h.ops))
            if seed == 2:       # three copies on their own topics and groups: three groups
                tile(path, tmp_path / "tiled.parquet", 3)
                path = tmp_path / "tiled.parquet"
            _, src, _ = hc.read(str(path), lazy=True)
            ev = lean(src.with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i")))
            monkeypatch.setattr(kernel, "_consumer", spy)
            a = kernel.flag_partitions(kernel.pair(ev.clone()))
            monkeypatch.setattr(kernel, "_consumer", join_only)
            b = kernel.flag_partitions(kernel.pair(ev))
            assert a[0] == b[0], (kind, seed)
            assert a[1].sort("run").equals(b[1].sort("run")), (kind, seed)
            if kind == "delivery-at-least-once":
                assert a[0], seed
    assert seen["table"] and seen["placed"], seen


@pytest.mark.parametrize("order", ["increasing", "shuffled"])
def test_records_found_by_row_agree_with_the_join(order, tmp_path):
    """Pairing finds each poll's record lists at its completion's row by position when `_i`
    counts rows, by binary search when `_i` only increases (a chunk), and by a join otherwise.
    The three give the same operations and records."""
    import polars as pl

    from checkers.history.screens import columnar as kernel
    from checkers.history.screens.columnar import lean
    from traces import history_columnar as hc
    h = generate(Params(seed=3, ops=1500, partitions=3, consumers=2), {"poll-skip": 0.05})
    path = tmp_path / "h.parquet"
    write(path, h.header, history_events(h.ops))
    _, src, _ = hc.read(str(path), lazy=True)
    ev = lean(src.with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i")))
    whole = kernel.pair(ev.clone())
    part = ev.filter(pl.col("_i") % 5 != 2)           # `_i` increases, with gaps
    if order == "shuffled":                          # `_i` in no order: the join
        part = part.sample(fraction=1.0, shuffle=True, seed=7)
    got = kernel.pair(part)
    # The operations whose events are all in `part`, and their records, are the same.
    kept = set(part.get_column("_i").to_list())
    ok = whole.ops.filter(pl.col("inv_row").is_in(list(kept))
                          & (pl.col("comp_row").is_null() | pl.col("comp_row").is_in(list(kept))))
    ids = ok.get_column("id")
    key = ["pid", "offset"]
    assert got.recs.sort(key).equals(
        whole.recs.filter(pl.col("pid").is_in(ids.implode())).sort(key).select(got.recs.columns))
    assert got.recs.height > 500


def test_tiled_json_lines_are_the_tiled_parquet(tmp_path):
    """The benchmark's tiled histories (10^7 operations) as JSON lines must be the same events
    as the tiled Parquet, written as traces.history writes JSON lines; the old layout (a
    trace_id column, zstd) the same events too."""
    import pyarrow.parquet as pq

    from traces.history_tile import tile
    from traces.history import read_events, write_jsonl
    h = generate(Params(seed=3, ops=300, partitions=2))
    one = tmp_path / "one.parquet"
    write(one, h.header, history_events(h.ops))
    many, many_j, old = tmp_path / "many.parquet", tmp_path / "many.jsonl", tmp_path / "old.parquet"
    tile(one, many, 3, jsonl=many_j)
    tile(one, old, 3, trace_column=True)
    hp, ep = read_events(many)
    hj, ej = read_events(many_j)
    assert hp == hj == h.header and [e for _, e in ep] == [e for _, e in ej]
    assert len(ep) == 3 * len(history_events(h.ops))
    again = tmp_path / "again.jsonl"
    write_jsonl(again, hp, [e for _, e in ep])
    assert again.read_bytes() == many_j.read_bytes()
    assert pq.read_schema(old).names[0] == "trace_id" and "trace_id" not in pq.read_schema(many).names
    assert [e for _, e in read_events(old)[1]] == [e for _, e in ep]
