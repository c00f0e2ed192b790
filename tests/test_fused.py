"""The fused screen (checkers/history/screens/_fused.c, fused.py) against the polars screens and
the oracle (checkers/history/oracle): (a) check-history's verdicts and anomalies are the same
with the screen as without it (the columnar kernel alone) and as the oracle's; (b) every
partition the oracle reports an anomaly
or a note in is flagged by the screen (or the screen hands the whole history over, with its
reason); (c) on valid generated histories the screen flags nothing. On generated histories
with each plantable anomaly, the corpus, hand-built corner cases and seeded mutations of a
small history (records dropped, offsets and values changed, operations moved)."""
import random
from pathlib import Path

import pytest

from checkers.history.pipeline import file_check
from checkers.history.screens import fused
from checkers.history.screens.columnar import NEEDED
from checkers.history.pipeline.file_check import check_file
from checkers.history.screens.fused import fused_screen
from checkers.history.generate import Params, generate
from checkers.history.oracle.check import check_history
from checkers.history.seeding import SEEDABLE
from tests.history_util import B
from tests.test_history_columnar import _fingerprint
from traces import history_columnar as hc
from traces.history import HistoryError, history_events, load, write

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "traces" / "corpus"


def _screen(path):
    _, src, _ = hc.read(str(path), None, None, lazy=True)
    return fused_screen([src.select(*NEEDED).collect()])


def _reported(v) -> set[str]:
    """Partitions ("topic-partition") the checkers name in an anomaly or a note (a
    cross-partition anomaly names several)."""
    return {p for a in v.anomalies + v.notes if a.partition for p in a.partition.split(",")}


def _agree(path, monkeypatch, followed: bool = True, kernel_too: bool = True):
    """(a) and (b) on one file; `followed`: the screen must not hand the whole history over;
    `kernel_too`: check-history without the screen (the kernel alone) is compared as well."""
    oracle = check_history(load(path))
    fr = _screen(path)
    assert fr is not None
    if followed:
        assert not fr.why, fr.why
    if not fr.why:
        flagged = {f"{t}-{p}" for t, p, _ in fr.flagged}
        assert _reported(oracle) <= flagged, (path, _reported(oracle) - flagged)
    with_screen = check_file(str(path))
    assert _fingerprint(with_screen.verdict) == _fingerprint(oracle), path
    if kernel_too:
        monkeypatch.setattr(fused, "FUSED_SCREEN", False)
        kernel = check_file(str(path))
        monkeypatch.setattr(fused, "FUSED_SCREEN", True)
        assert _fingerprint(kernel.verdict) == _fingerprint(oracle), path
    return fr, oracle


@pytest.mark.parametrize("kind", [None] + sorted(SEEDABLE))
def test_screen_flags_what_the_checkers_report_on_generated(kind, tmp_path, monkeypatch):
    for seed in range(2):
        p = Params(seed=seed, ops=500, partitions=2 + seed * 2, consumers=1 + seed)
        h = generate(p, {kind: 0.05 if seed % 2 else 0.2} if kind else None)
        path = tmp_path / f"h{seed}.{'parquet' if seed % 2 else 'jsonl'}"
        write(path, h.header, history_events(h.ops))
        fr, oracle = _agree(path, monkeypatch, kernel_too=False)
        if kind is None:                 # (c)
            assert oracle.status == "valid" and fr.clean, (seed, fr.why, fr.flagged)
        elif kind not in ("G0-realtime", "G1c-realtime"):
            assert kind in oracle.types() and fr.flagged, (kind, seed)


def _planted(tmp_path, kind, rate, **params) -> Path:
    """A generated history with `kind` planted at `rate` (none when kind is None), as Parquet."""
    assert kind is None or kind in SEEDABLE
    h = generate(Params(**params), {kind: rate} if kind else None)
    path = tmp_path / "h.parquet"
    write(path, h.header, history_events(h.ops))
    return path


def _slices(path, size):
    """The screen's columns of a history file, in slices of `size` events."""
    _, src, _ = hc.read(str(path), None, None, lazy=True)
    n = src.select(*NEEDED).collect().height
    return (src.slice(o, size).select(*NEEDED).collect() for o in range(0, n, size))


@pytest.mark.parametrize("kind", [None, "lost-write", "duplicate", "poll-skip", "delivery-at-least-once"])
def test_screen_over_slices_equals_one_pass(kind, tmp_path, monkeypatch):
    """check_file screens a Parquet history in slices (SCREEN_SLICE_EVENTS, each released
    before the next is decoded): the state carried across slices gives the same flags and
    counts as one pass over the whole, and check-history the object checkers' verdict."""
    path = _planted(tmp_path, kind, 0.1, seed=3, ops=600, partitions=3, consumers=2)
    whole = _screen(path)
    sliced = fused_screen(_slices(path, 97))
    assert (sliced.why, sliced.flagged, sliced.counts) == (whole.why, whole.flagged, whole.counts)
    monkeypatch.setattr(file_check, "SCREEN_SLICE_EVENTS", 97)
    oracle = check_history(load(path))
    assert _fingerprint(check_file(str(path)).verdict) == _fingerprint(oracle)
    if kind is None:
        assert oracle.status == "valid" and whole.clean


@pytest.mark.parametrize("kind", [None, "lost-write", "delivery-at-least-once"])
def test_screen_in_groups_equals_one_pass(kind, tmp_path, monkeypatch):
    """Above SCREEN_GROUP_EVENTS the screen routes each event to a group of partitions (spill
    files) and screens each group with its own state: with groups and slices made tiny here
    (operations straddle slices, consumers and groups span screen groups), the flags, every
    partition's counts and the history's counts are one pass's, and check-history gives the
    object checkers' verdict."""
    path = _planted(tmp_path, kind, 0.05, seed=5, ops=1000, partitions=5, consumers=3)
    whole = _screen(path)
    grouped = fused.grouped_screen(_slices(path, 97), 3)

    def norm(fr):
        k = {n: v for n, v in fr.counts.items() if n != "pool"}
        k["flagged"], k["parts"] = sorted(k["flagged"]), sorted(k["parts"])
        return fr.why, sorted(fr.flagged), k
    assert norm(grouped) == norm(whole)
    assert kind is None or whole.flagged
    monkeypatch.setattr(file_check, "CHUNK_EVENTS", 700)
    monkeypatch.setattr(file_check, "SLICE_EVENTS", 333)
    oracle = check_history(load(path))
    r = check_file(str(path), screen_group_events=1000)     # what check-history --low-memory sets
    assert _fingerprint(r.verdict) == _fingerprint(oracle)
    if kind is None:
        assert oracle.status == "valid" and whole.clean and r.engine.endswith(" groups)"), r.engine
    plain = check_file(str(path))                            # the default: one screen
    assert _fingerprint(plain.verdict) == _fingerprint(oracle) and "groups" not in plain.engine

@pytest.mark.parametrize("path", sorted(CORPUS.glob("history-*.jsonl")), ids=lambda p: p.stem)
def test_screen_flags_what_the_checkers_report_on_corpus(path, monkeypatch):
    _agree(path, monkeypatch, followed=False)


def _write(tmp_path, b: B, name="c.parquet") -> Path:
    h = b.history()
    path = tmp_path / name
    write(path, h.header, history_events(h.ops))
    return path


def test_info_send_read_in_place_is_clean(tmp_path, monkeypatch):
    """An indeterminate send whose value is read at an offset places it there: no flag."""
    b = B()
    b.send(0, "a", 1, 10, offset=0)
    b.send(0, "b", 2, 9, type="info")
    b.send(0, "c", 11, 12, offset=2)
    b.poll(1, [(0, "a"), (1, "b"), (2, "c")], 13, 14)
    b.poll(9, [(0, "a"), (1, "b"), (2, "c")], 20, 21, final=True)
    fr, oracle = _agree(_write(tmp_path, b), monkeypatch)
    assert oracle.status == "valid" and fr.clean


def test_undecided_writes_are_counted_as_the_kernel_counts_them(tmp_path, monkeypatch):
    """Acknowledged writes never read and no final read after them: unknown, nothing flagged,
    and the verdict (with its reason) is the kernel's."""
    b = B()
    b.send(0, "a", 1, 2, offset=0)
    b.send(0, "b", 3, 4, offset=1)
    b.send(0, "c", 5, 6, offset=2)
    b.poll(1, [(0, "a")], 7, 8)
    fr, oracle = _agree(_write(tmp_path, b), monkeypatch)
    assert oracle.status == "unknown" and fr.clean and fr.counts["undecided"] == 2


def test_permitted_reorder_is_flagged_for_its_note(tmp_path, monkeypatch):
    """A reorder the producer's settings permit is a note, not an anomaly: the screen still
    flags it (the note comes from the object checkers)."""
    b = B()
    b.config(0, 0, idempotence=False, retries=3, max_in_flight=5, acks="all")
    b.send(0, "a", 1, 10, offset=1)
    b.send(0, "b", 2, 9, offset=0)
    b.poll(9, [(0, "b"), (1, "a")], 30, 31, final=True)
    fr, oracle = _agree(_write(tmp_path, b), monkeypatch)
    assert oracle.notes and fr.flagged


@pytest.mark.parametrize("case", ["two-groups", "read-before-group", "two-modes", "out-of-time-order"])
def test_shapes_the_screen_does_not_follow_go_to_the_kernel(case, tmp_path, monkeypatch):
    """What the screen cannot follow cheaply is handed over whole, with its reason, and the
    verdict is the kernel's."""
    b = B()
    b.send(0, "a", 1, 2, offset=0)
    b.send(0, "b", 3, 4, offset=1)
    if case == "two-groups":
        b.assign(1, 5, 6, gen=1, group="g")
        b.assign(1, 7, 8, gen=1, group="h")
        b.poll(1, [(0, "a"), (1, "b")], 9, 10)
    elif case == "read-before-group":
        b.poll(1, [(0, "a"), (1, "b")], 5, 6)
        b.assign(1, 7, 8, gen=1, group="g", delivery="at-least-once")
        b.commit(1, 9, 10, gen=1, offset=2)
    elif case == "two-modes":
        b.assign(1, 5, 6, gen=1, group="g", delivery="at-least-once")
        b.assign(2, 5, 6, gen=1, group="g", delivery="at-most-once")
        b.poll(1, [(0, "a"), (1, "b")], 9, 10)
    else:
        b.poll(1, [(0, "a"), (1, "b")], 5, 6)
    b.poll(9, [(0, "a"), (1, "b")], 20, 21, final=True)
    path = _write(tmp_path, b)
    if case == "out-of-time-order":
        # The same events, the file's rows not in time order (the reader allows it).
        h = b.history()
        evs = history_events(h.ops)
        evs[1], evs[2] = evs[2], evs[1]
        write(path, h.header, evs)
    fr, _ = _agree(path, monkeypatch, followed=False)
    assert fr.why, case


def _mutants(seed: int):
    """A small valid history and one seeded mutation of its events."""
    h = generate(Params(seed=seed % 3, ops=160, partitions=2, consumers=2))
    evs = history_events(h.ops)
    rng = random.Random(seed)
    polls = [e for e in evs if e["f"] == "poll" and e["type"] == "ok" and e.get("offsets")]
    sends = [e for e in evs if e["f"] == "send" and e["type"] == "ok"]
    commits = [e for e in evs if e["f"] == "commit" and e["type"] == "invoke"]
    what = rng.choice(["drop-record", "bump-offset", "swap-values", "ack-offset", "drop-event",
                       "commit-offset", "final-shorter"])
    if what == "drop-record" and polls:
        e = rng.choice(polls)
        k = rng.randrange(len(e["offsets"]))
        e["offsets"] = e["offsets"][:k] + e["offsets"][k + 1:]
        e["values"] = e["values"][:k] + e["values"][k + 1:]
    elif what == "bump-offset" and polls:
        e = rng.choice(polls)
        k = rng.randrange(len(e["offsets"]))
        e["offsets"] = e["offsets"][:k] + [e["offsets"][k] + rng.choice([-1, 1, 2])] + e["offsets"][k + 1:]
    elif what == "swap-values" and polls:
        e = rng.choice(polls)
        e["values"] = list(reversed(e["values"]))
    elif what == "ack-offset" and sends:
        e = rng.choice(sends)
        e["offset"] = e["offset"] + rng.choice([-1, 1])
    elif what == "drop-event":
        evs.pop(rng.randrange(len(evs)))
    elif what == "commit-offset" and commits:
        e = rng.choice(commits)
        e["offset"] = max(0, e["offset"] + rng.choice([-3, 3]))
    elif what == "final-shorter":
        finals = [e for e in polls if any(i["id"] == e["id"] and i.get("final") for i in evs
                                          if i["type"] == "invoke")]
        if finals:
            e = rng.choice(finals)
            e["offsets"], e["values"] = e["offsets"][:-1], e["values"][:-1]
    return h.header, evs, what


@pytest.mark.parametrize("seed", range(30))
def test_screen_flags_what_the_checkers_report_on_mutants(seed, tmp_path, monkeypatch):
    header, evs, what = _mutants(seed)
    path = tmp_path / "m.parquet"
    write(path, header, evs)
    try:
        oracle = check_history(load(path))
    except HistoryError:                 # input the reader refuses: so must check-history
        fr = _screen(path)
        assert fr.why, what
        with pytest.raises(HistoryError):
            check_file(str(path))
        return
    fr, _ = _agree(path, monkeypatch, followed=False)
    if oracle.status == "invalid" and not fr.why:
        assert fr.flagged, what


def test_kernel_runs_on_the_flagged_partitions_only(tmp_path, monkeypatch):
    """One partition of three flagged: the kernel judges its operations (and the settings)
    alone, the other partitions' counts come from the screen, and the verdict, witnesses and
    examined counts are the object checkers' on the whole history."""
    b = B()
    for part in range(3):
        b.send(0, f"a{part}", 1, 2, offset=0, part=part)
        b.send(0, f"b{part}", 3, 4, offset=1, part=part)
        b.send(0, f"c{part}", 5, 6, offset=2, part=part)
    b.assign(1, 7, 8, gen=1, group="g", part=1, delivery="at-least-once")
    b.poll(1, [(0, "a1"), (1, "b1")], 9, 10, part=1)
    b.commit(1, 11, 12, gen=1, offset=2, group="g", part=1)
    b.poll(2, [(0, "a0"), (2, "c0")], 9, 10, part=0)          # offset 1 skipped: lost
    for part in range(3):
        b.poll(9, [(0, f"a{part}"), (1, f"b{part}"), (2, f"c{part}")], 20, 21, part=part, final=True)
    path = _write(tmp_path, b)
    seen = []
    on_flagged = file_check._kernel_on_flagged
    monkeypatch.setattr(file_check, "_kernel_on_flagged", lambda *a: seen.append(on_flagged(*a)) or seen[-1])
    fr, oracle = _agree(path, monkeypatch)
    assert [(t, p) for t, p, _ in fr.flagged] == [("t", 0)] and oracle.status == "invalid"
    assert len(seen) == 1 and seen[0] is not None      # the check with the screen, in _agree


@pytest.mark.parametrize("case", ["settings-only", "empty-poll", "log-from-offset-5", "sparse-ids"])
def test_small_shapes_agree(case, tmp_path, monkeypatch):
    """Histories with no partition operation, an ok poll of no records, a log that does not
    start at offset 0, ids too sparse for the screen's id table (handed over whole)."""
    b = B()
    if case == "settings-only":
        b.config(0, 0, idempotence=False, retries=3, max_in_flight=5, acks="all")
    elif case == "log-from-offset-5":
        b.send(0, "a", 1, 2, offset=5)
        b.poll(9, [(5, "a")], 5, 6, final=True)
    else:
        b.send(0, "a", 1, 2, offset=0)
        if case == "empty-poll":
            b.poll(1, [], 3, 4)
        b.poll(9, [(0, "a")], 5, 6, final=True)
    h = b.history()
    evs = history_events(h.ops)
    if case == "sparse-ids":
        for e in evs:
            e["id"] *= 10**9
    for ext in ("parquet", "jsonl"):
        path = tmp_path / f"s.{ext}"
        write(path, h.header, evs)
        fr, _ = _agree(path, monkeypatch, followed=case != "sparse-ids")
        assert bool(fr.why) == (case == "sparse-ids") and not fr.flagged


@pytest.mark.parametrize("kind", ["lost-write", "send-reorder", "fenced-commit"])
def test_flagged_partitions_judged_from_the_decoded_columns(kind, tmp_path, monkeypatch):
    """A Parquet history flagged in some partitions: the oracle's operations come from the
    columns check_file already decoded (every field, wall-clock times and errors included),
    not from a second scan of the file, and each witness operation equals the object
    reader's in every field."""
    import dataclasses
    from checkers.history.generate import generate_valid
    from checkers.history.seeding import plant
    h = generate_valid(Params(seed=3, ops=3000, partitions=4))
    plant(h, kind, 1e-12, random.Random(3))          # one site: one partition flagged
    evs = history_events(h.ops)
    for e in evs:
        if e.get("type") == "fail":
            e["error"] = f"err-{e['id'] % 7}"       # errors on failed operations, to carry over
    path = tmp_path / "h.parquet"
    write(path, h.header, evs)
    fr = _screen(path)
    assert fr is not None and not fr.why and 0 < len(fr.flagged) < 4
    scans = []
    real = hc.scan_parquet
    monkeypatch.setattr(hc, "scan_parquet", lambda *a, **k: scans.append(a) or real(*a, **k))
    full_filters = []
    on_flagged = file_check._kernel_on_flagged

    def spy(held, fr_, header, full, *rest):
        class Full:                       # the file's lazy frame: filtering it scans the file
            def __getattr__(self, n):
                if n == "filter":
                    full_filters.append(n)
                return getattr(full, n)
        return on_flagged(held, fr_, header, Full(), *rest)
    monkeypatch.setattr(file_check, "_kernel_on_flagged", spy)
    r = check_file(str(path))
    oracle_h = load(path)
    oracle = check_history(oracle_h)
    assert _fingerprint(r.verdict) == _fingerprint(oracle)
    assert r.verdict.status == "invalid" and full_filters == []
    by_id = oracle_h.by_id()
    named = {i for a in r.verdict.anomalies + r.verdict.notes for i in a.witness}
    assert named
    for i in named:
        assert dataclasses.astuple(r.witness_ops[i]) == dataclasses.astuple(by_id[i]), i


def test_undecided_writes_of_a_flagged_partition_are_counted(tmp_path, monkeypatch):
    """The writes check's unknown (acknowledged writes never read, no final read after them)
    counts the flagged partition's undecided writes (the oracle's count) with the clean
    partitions' (the screen's): the same number and reason as the oracle on the whole."""
    b = B()
    for i, v in enumerate("abcd"):
        b.send(0, v, 1 + i, 2 + i, offset=i, part=0)
    b.send(0, "x", 1, 2, offset=0, part=1)
    b.send(0, "y", 3, 4, offset=1, part=1)
    b.poll(1, [(0, "a"), (1, "b")], 10, 11, part=0)
    b.poll(1, [(0, "a")], 12, 13, part=0)                      # back to offset 0: nonmonotonic
    b.poll(2, [(0, "x")], 10, 11, part=1)                       # y never read: undecided
    path = _write(tmp_path, b)
    fr = _screen(path)
    assert fr is not None and [(t, p) for t, p, _ in fr.flagged] == [("t", 0)]
    r = check_file(str(path))
    oracle = check_history(load(path))
    assert _fingerprint(r.verdict) == _fingerprint(oracle)
    mine = next(c for c in r.verdict.checks if c.name == "writes")
    theirs = next(c for c in oracle.checks if c.name == "writes")
    assert mine.status == "unknown" and mine.reason == theirs.reason
    assert mine.reason.startswith("3 acknowledged write(s)")
