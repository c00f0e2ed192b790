"""Jepsen's Kafka checker test cases (jepsen-io/jepsen, jepsen/test/jepsen/tests/kafka_test.clj),
transcribed as Jepsen history lines (our transcription of the facts: op shapes, values, times),
with the anomalies Jepsen's test expects and the verdict kafkaverify gives. Where the two
differ, `why` says why (docs/histories.md, "Jepsen's Kafka checker cases", lists the table).

Each case: (name, lines, jepsen: the error kinds Jepsen's test asserts, ours: the anomaly types
we report, notes: the note types (permitted findings) we report, why)."""
from __future__ import annotations


def o(i: int, p: int, t: str, f: str, v: str, time: int | None = None) -> str:
    return (f"{{:index {i}, :time {i if time is None else time}, :type :{t}, :process {p}, "
            f":f :{f}, :value {v}}}")


POLL = "[[:poll]]"
SEND_ABC = ["[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d] [:send :x :g]]"]

_skip_base = [
    o(0, 0, "invoke", "poll", POLL), o(1, 0, "ok", "poll", "[[:poll {:x [[1 :a] [2 :b]]}]]"),
    o(2, 1, "invoke", "poll", POLL), o(3, 1, "ok", "poll", "[[:poll {:x [[3 :c]]}]]"),
    o(6, 0, "invoke", "poll", POLL), o(7, 0, "ok", "poll", "[[:poll {:x [[4 :d]]}]]"),
    o(10, 2, "invoke", "send", "[[:send :x :f]]"), o(11, 2, "ok", "send", "[[:send :x [6 :f]]]"),
    o(12, 0, "invoke", "poll", POLL), o(13, 0, "ok", "poll", "[[:poll {:x [[7 :g]]}]]"),
    o(14, 3, "invoke", "send", SEND_ABC[0]), o(15, 3, "info", "send", SEND_ABC[0]),
]


def _skip_with(first: list[str], second: list[str]) -> list[str]:
    b = _skip_base
    return b[:4] + first + b[4:6] + second + b[6:]


_sends_0_to = lambda n: ("[" + " ".join(f"[:send :x {i}]" for i in range(n)) + "]",
                         "[" + " ".join(f"[:send :x [{i} {i}]]" for i in range(n)) + "]")
_abort = [
    o(0, 0, "invoke", "send", _sends_0_to(6)[0]), o(1, 0, "ok", "send", _sends_0_to(6)[1]),
    o(1, 1, "invoke", "txn", POLL), o(2, 1, "ok", "txn", "[[:poll {:x [[0 0]]}]]"),
    o(3, 1, "invoke", "txn", POLL), o(4, 1, "fail", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
]

_nm_poll = [
    o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d]]"),
    o(1, 0, "ok", "send", "[[:send :x :a] [:send :x :b] [:send :x :c] [:send :x :d]]"),
    o(2, 0, "invoke", "poll", POLL), o(3, 0, "ok", "poll", "[[:poll {:x [[1 :a] [2 :b] [3 :c]]}]]"),
    o(6, 0, "invoke", "poll", POLL), o(7, 0, "ok", "poll", "[[:poll {:x [[2 :b] [3 :c] [4 :d]]}]]"),
]

_nm_send = [
    o(0, 0, "invoke", "send", "[[:send :x :c] [:send :x :d]]"),
    o(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [4 :d]]]"),
    o(10, 0, "invoke", "send", "[[:send :x 1] [:send :x 2]]"),
    o(11, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x [2 :b]]]"),
]

_dup_hash = []
for _i, _v in enumerate(range(10)):
    _k = 4 * _i
    _dup_hash += [o(_k, 0, "invoke", "send", f"[[:send :x {_v}]]"), o(_k + 1, 0, "ok", "send", f"[[:send :x [0 {_v}]]]"),
                  o(_k + 2, 1, "invoke", "poll", POLL), o(_k + 3, 1, "ok", "poll", f"[[:poll {{:x [[1 {_v}]]}}]]")]

LIN = "nonlinearizable"
UNPHYSICAL = ("the test asserts poll-skip alone; its polls read values before the (crashed) send "
              "of them was invoked (not linearizable, and read before that transaction's commit), "
              "and f at offset 6 is never read though offset 7 is (lost-write)")
NM_SEND = ("d was acknowledged at offset 4 before a was sent, which took offset 1: not "
           "linearizable either; the write cycle between the two transactions is a note")
SUB = ("we judge a producer's send order whatever its consumer's assignment (Jepsen forgets it "
       "across an assign or subscribe); " + NM_SEND)
CASES = [
    ("version-orders: conflicting read and proven info write",
     [o(0, 0, "invoke", "txn", POLL), o(1, 0, "ok", "txn", "[[:poll {:x [[0 :a] [1 :b]]}]]"),
      o(0, 1, "invoke", "txn", "[[:send :x :c] [:send :x :b] [:send :x :d]]"),
      o(1, 1, "info", "txn", "[[:send :x [1 :c]] [:send :x [3 :b]] [:send :x [4 :d]]]")],
     {"inconsistent-offsets"}, {"inconsistent-offsets", "duplicate", LIN}, set(),
     "transcribed with invokes (the test's history has completions only); b is read at offset 1 "
     "and proven sent at 3 (a duplicate, which no single log explains)"),
    ("version-orders: a real-world example",
     ["{:type :invoke, :f :send, :value [[:send 11 641]], :time 280153467070, :process 379}",
      "{:type :ok, :f :send, :value [[:send 11 [537 641]]], :time 280169754615, :process 379}",
      "{:type :invoke, :f :send, :value [[:send 11 645]], :time 283654729962, :process 363}",
      "{:type :ok, :f :send, :value [[:send 11 [537 645]]], :time 287474569112, :process 363}"],
     {"inconsistent-offsets"}, {"inconsistent-offsets", LIN}, set(),
     "two acknowledgements of one offset are also not linearizable"),
    ("inconsistent-offsets: info conflicts (no proof)",
     [o(0, 0, "invoke", "send", "[[:send :x 1] [:send :y 1]]"),
      o(1, 0, "info", "send", "[[:send :x [0 1]] [:send :y 1]]"),
      o(2, 1, "invoke", "send", "[[:send :x 2]]"), o(3, 1, "ok", "send", "[[:send :x [0 2]]]")],
     set(), set(), set(), ""),
    ("inconsistent-offsets: info conflicts, proven by a read",
     [o(0, 0, "invoke", "send", "[[:send :x 1] [:send :y 1]]"),
      o(1, 0, "info", "send", "[[:send :x [0 1]] [:send :y 1]]"),
      o(2, 1, "invoke", "send", "[[:send :x 2]]"), o(3, 1, "ok", "send", "[[:send :x [0 2]]]"),
      o(4, 2, "invoke", "poll", POLL), o(5, 2, "ok", "poll", "[[:poll {:y [[5 1]]}]]")],
     {"inconsistent-offsets"}, {"inconsistent-offsets", LIN}, set(),
     "two sends that took one offset are not linearizable either"),
    ("G1a",
     [o(0, 0, "invoke", "send", "[[:send :x 2] [:send :y 3]]"),
      o(1, 0, "fail", "send", "[[:send :x 2] [:send :y 3]]"),
      o(2, 1, "invoke", "poll", POLL), o(3, 1, "ok", "poll", "[[:poll {:x [[0 2]]}]]")],
     {"G1a"}, {"G1a"}, set(), ""),
    ("lost-write: consistent",
     [o(0, 0, "invoke", "send", "[[:send :x :a]]"), o(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
      o(2, 0, "invoke", "send", "[[:send :x :b] [:send :x :d]]"),
      o(3, 0, "ok", "send", "[[:send :x [1 :b]] [:send :x [3 :d]]]"),
      o(4, 1, "invoke", "send", "[[:send :x :c]]"), o(5, 1, "info", "send", "[[:send :x :c]]"),
      o(6, 0, "invoke", "poll", POLL), o(7, 0, "ok", "poll", "[[:poll {:x [[2 :c]]}]]")],
     {"lost-write"}, {"lost-write", LIN}, {"int-send-skip", "G0"},
     "d was acknowledged at offset 3 before c (offset 2) was sent: not linearizable; c between b "
     "and d is a permitted interleaving (notes)"),
    ("lost-write: inconsistent",
     [o(0, 0, "invoke", "send", "[[:send :x :a]]"), o(1, 0, "ok", "send", "[[:send :x [0 :a]]]"),
      o(2, 0, "invoke", "send", "[[:send :x :b] [:send :x :c]]"),
      o(3, 0, "ok", "send", "[[:send :x [0 :b]] [:send :x [2 :c]]]"),
      o(4, 0, "invoke", "poll", POLL), o(5, 0, "ok", "poll", "[[:poll {:x [[0 :b] [2 :c]]}]]")],
     {"lost-write"}, {"lost-write", "inconsistent-offsets", "nonmonotonic-send", LIN}, set(),
     "the test asserts lost-write alone; the same history also has a contested offset, a "
     "producer whose later send took an earlier offset, and two acknowledgements of one offset"),
    ("lost-write: atomic, without proof",
     [o(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :b]]"),
      o(1, 0, "info", "send", "[[:send :x :a] [:send :y [0 :b]]]"),
      o(2, 1, "invoke", "send", "[[:send :y :c]]"), o(3, 1, "info", "send", "[[:send :y :c]]"),
      o(6, 3, "invoke", "poll", POLL), o(7, 3, "ok", "poll", "[[:poll {:y [[1 :c]]}]]")],
     set(), set(), set(), ""),
    ("lost-write: atomic, proven by a read",
     [o(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :b]]"),
      o(1, 0, "info", "send", "[[:send :x :a] [:send :y [0 :b]]]"),
      o(2, 1, "invoke", "send", "[[:send :y :c]]"), o(3, 1, "info", "send", "[[:send :y :c]]"),
      o(4, 2, "invoke", "poll", POLL), o(5, 2, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"),
      o(6, 3, "invoke", "poll", POLL), o(7, 3, "ok", "poll", "[[:poll {:y [[1 :c]]}]]")],
     {"lost-write"}, {"lost-write", "txn-atomicity"}, set(),
     "we also name the transaction that was only partly visible"),
    ("poll-skip", _skip_base, {"poll-skip"}, {"poll-skip", "lost-write", LIN, "precommitted-read"},
     {"int-send-skip", "G0"}, UNPHYSICAL),
    ("poll-skip: with intermediate subscribe/assign [:y]",
     _skip_with([o(4, 0, "invoke", "subscribe", "[:y]"), o(5, 0, "ok", "subscribe", "[:y]")],
                [o(8, 0, "invoke", "assign", "[:y]"), o(9, 0, "info", "assign", "[:y]")]),
     set(), {"lost-write", LIN, "precommitted-read"}, {"int-send-skip", "G0"}, UNPHYSICAL),
    ("poll-skip: with intermediate subscribe/assign [:x :y]",
     _skip_with([o(4, 0, "invoke", "subscribe", "[:x :y]"), o(5, 0, "ok", "subscribe", "[:x :y]")],
                [o(8, 0, "invoke", "assign", "[:x :y]"), o(9, 0, "ok", "assign", "[:x :y]")]),
     {"poll-skip"}, {"poll-skip", "lost-write", LIN, "precommitted-read"}, {"int-send-skip", "G0"},
     UNPHYSICAL),
    ("poll-skip: txn abort, good",
     _abort[:4] + [o(3, 1, "invoke", "txn", POLL), o(4, 1, "fail", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
                   o(5, 1, "invoke", "txn", POLL), o(6, 1, "info", "txn", "[[:poll {:x [[1 1] [2 2]]}]]"),
                   o(7, 1, "invoke", "txn", POLL), o(8, 1, "ok", "txn", "[[:poll {:x [[1 1] [2 2]]}]]")],
     set(), set(), set(), ""),
    ("poll-skip: abort doesn't roll back",
     _abort + [o(5, 1, "invoke", "txn", POLL), o(6, 1, "fail", "txn", "[[:poll {:x [[3 3] [4 4]]}]]"),
               o(7, 1, "invoke", "txn", POLL), o(8, 1, "ok", "txn", "[[:poll {:x [[5 5]]}]]")],
     {"poll-skip"}, {"poll-skip"}, set(), ""),
    ("poll-skip: info can be a poll-skip",
     _abort + [o(5, 1, "invoke", "txn", POLL), o(6, 1, "info", "txn", "[[:poll {:x [[3 3] [4 4]]}]]")],
     {"poll-skip"}, {"poll-skip"}, set(), ""),
    ("nonmonotonic-poll", _nm_poll, {"nonmonotonic-poll"}, {"nonmonotonic-poll"}, set(), ""),
    ("nonmonotonic-poll: with intermediate subscribe [:y]",
     _nm_poll[:4] + [o(4, 0, "invoke", "subscribe", "[:y]"), o(5, 0, "ok", "subscribe", "[:y]")] + _nm_poll[4:],
     set(), set(), set(), ""),
    ("nonmonotonic-poll: with intermediate assign [:y]",
     _nm_poll[:4] + [o(4, 0, "invoke", "assign", "[:y]"), o(5, 0, "ok", "assign", "[:y]")] + _nm_poll[4:],
     set(), set(), set(), ""),
    ("nonmonotonic-poll: with intermediate subscribe [:x :y]",
     _nm_poll[:4] + [o(4, 0, "invoke", "subscribe", "[:x :y]"), o(5, 0, "ok", "subscribe", "[:x :y]")] + _nm_poll[4:],
     {"nonmonotonic-poll"}, {"nonmonotonic-poll"}, set(), ""),
    ("nonmonotonic-poll: with intermediate assign [:x :y]",
     _nm_poll[:4] + [o(4, 0, "invoke", "assign", "[:x :y]"), o(5, 0, "ok", "assign", "[:x :y]")] + _nm_poll[4:],
     {"nonmonotonic-poll"}, {"nonmonotonic-poll"}, set(), ""),
    ("nonmonotonic-send", _nm_send, {"nonmonotonic-send"}, {"nonmonotonic-send", LIN}, {"G0-process"},
     NM_SEND),
    ("nonmonotonic-send: with intermediate subscribe [:y]",
     _nm_send[:2] + [o(2, 0, "invoke", "subscribe", "[:y]"), o(3, 0, "ok", "subscribe", "[:y]")] + _nm_send[2:],
     set(), {"nonmonotonic-send", LIN}, {"G0-process"}, SUB),
    ("nonmonotonic-send: with intermediate assign [:y]",
     _nm_send[:2] + [o(2, 0, "invoke", "assign", "[:y]"), o(3, 0, "info", "assign", "[:y]")] + _nm_send[2:],
     set(), {"nonmonotonic-send", LIN}, {"G0-process"}, SUB),
    ("nonmonotonic-send: with intermediate subscribe [:x :y]",
     _nm_send[:2] + [o(2, 0, "invoke", "subscribe", "[:x :y]"), o(3, 0, "ok", "subscribe", "[:x :y]")] + _nm_send[2:],
     {"nonmonotonic-send"}, {"nonmonotonic-send", LIN}, {"G0-process"}, NM_SEND),
    ("int-poll-skip",
     [o(0, 1, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :d]]"),
      o(1, 1, "info", "send", "[[:send :x :a] [:send :x :b] [:send :x :d]]"),
      o(2, 0, "invoke", "poll", POLL), o(3, 0, "ok", "poll", "[[:poll {:x [[1 :a] [4 :d]]}]]"),
      o(4, 0, "invoke", "poll", "[[:poll] [:poll]]"),
      o(5, 0, "ok", "poll", "[[:poll {:x [[1 :a]]}] [:poll {:x [[4 :d]]}]]"),
      o(6, 0, "invoke", "poll", POLL), o(7, 0, "ok", "poll", "[[:poll {:x [[2 :b]]}]]")],
     {"int-poll-skip"}, {"int-poll-skip", "poll-skip", "nonmonotonic-poll"}, set(),
     "a skip within one poll response is our poll-skip (int- names two polls of one transaction); "
     "the test asserts int-poll-skip alone, the same polls also go back"),
    ("int-send-skip",
     [o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :c]]"),
      o(1, 0, "ok", "send", "[[:send :x [1 :a]] [:send :x :c]]"),
      o(2, 1, "invoke", "send", "[[:send :x :b]]"), o(3, 1, "info", "send", "[[:send :x :b]]"),
      o(4, 2, "invoke", "poll", POLL), o(5, 2, "ok", "poll", "[[:poll {:x [[2 :b] [3 :c]]}]]")],
     {"int-send-skip"}, {"lost-write", "txn-atomicity"}, {"int-send-skip", "G0"},
     "int-send-skip is a note (Jepsen allows it too); the acknowledged a at offset 1 was never "
     "read although offset 3 was"),
    ("int-nonmonotonic-poll",
     [o(0, 0, "invoke", "send", "[[:send :x :a] [:send :x :b] [:send :x :c]]"),
      o(1, 0, "info", "send", "[[:send :x :a] [:send :x :b] [:send :x :c]]"),
      o(2, 0, "invoke", "poll", POLL), o(3, 0, "ok", "poll", "[[:poll {:x [[3 :c] [1 :a]]}]]"),
      o(4, 0, "invoke", "poll", POLL),
      o(5, 0, "ok", "poll", "[[:poll {:x [[2 :b] [3 :c]]}] [:poll {:x [[3 :c]]}]]")],
     {"int-nonmonotonic-poll"}, {"int-nonmonotonic-poll", "nonmonotonic-poll"}, set(),
     "going back within one poll response is our nonmonotonic-poll"),
    ("int-nonmonotonic-send",
     [o(0, 0, "invoke", "send", "[[:send :x 3] [:send :x 1]]"),
      o(1, 0, "ok", "send", "[[:send :x [3 :c]] [:send :x [1 :a]]]"),
      o(2, 0, "invoke", "send", "[[:send :y :d] [:send :y :b]]"),
      o(3, 0, "info", "send", "[[:send :y :d] [:send :y :b]]"),
      o(4, 1, "invoke", "send", "[[:send :y :c]]"), o(5, 1, "info", "send", "[[:send :y :c]]"),
      o(6, 0, "invoke", "poll", POLL), o(7, 0, "ok", "poll", "[[:poll {:y [[2 :b] [3 :c] [4 :d]]}]]")],
     {"int-nonmonotonic-send"}, {"int-nonmonotonic-send"}, {"G0"},
     "c between the two sends of one transaction forms a write cycle Kafka permits (a note)"),
    ("duplicate: basic",
     [o(0, 0, "invoke", "send", "[[:send :x :a]]"), o(1, 0, "ok", "send", "[[:send :x [1 :a]]]"),
      o(2, 1, "invoke", "send", "[[:send :x :b]]"), o(3, 1, "info", "send", "[[:send :x :b]]"),
      o(4, 2, "invoke", "poll", POLL), o(5, 2, "ok", "poll", "[[:poll {:x [[2 :b] [3 :a]]}]]")],
     {"duplicate"}, {"duplicate", LIN}, set(), "a value acknowledged at 1 and read at 3 is not linearizable"),
    ("duplicate: hash-insensitive", _dup_hash, {"duplicate", "inconsistent-offsets"},
     {"duplicate", "inconsistent-offsets", "nonmonotonic-send", "nonmonotonic-poll", LIN}, set(),
     "the same history also has a producer whose sends all took offset 0 and a consumer that "
     "reads offset 1 again and again"),
    ("duplicate: aborted txns",
     [o(0, 0, "invoke", "send", "[[:send :x 0]]"), o(1, 0, "ok", "send", "[[:send :x [1 0]]]"),
      o(2, 0, "invoke", "send", "[[:send :x 1]]"), o(3, 0, "fail", "send", "[[:send :x [2 1]]]"),
      o(4, 1, "invoke", "poll", POLL), o(5, 1, "fail", "poll", "[[:poll {:x [[11 0] [12 1]]}]]")],
     {"duplicate"}, {"duplicate", "failed-write-observed", LIN}, set(),
     "we count a failed poll's records as evidence for every rule: the failed send of 1 was read"),
    ("unseen", [o(0, 0, "invoke", "poll", POLL), o(1, 0, "ok", "poll", "[[:poll {}]]"),
                o(2, 0, "invoke", "send", "[[:send :x :a] [:send :x :b]]"),
                o(3, 0, "ok", "send", "[[:send :x [0 :a]] [:send :x [1 :b]]]"),
                o(4, 0, "invoke", "poll", POLL), o(5, 0, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"),
                o(6, 0, "invoke", "poll", POLL), o(7, 0, "ok", "poll", "[[:poll {:x [[1 :b]]}]]")],
     set(), set(), set(), ""),
    ("empty history", [o(0, 0, "invoke", "assign", "[:x]"), o(1, 0, "ok", "assign", "[:x]")],
     {"(invalid: empty)"}, set(), set(), "nothing to examine is unknown (exit 2), not invalid"),
    ("G0",
     [o(0, 0, "invoke", "send", "[[:send :x :a] [:send :y :a]]"),
      o(1, 1, "invoke", "send", "[[:send :x :b] [:send :y :b]]"),
      o(2, 0, "ok", "send", "[[:send :x [0 :a]] [:send :y [1 :a]]]"),
      o(3, 1, "ok", "send", "[[:send :x [1 :b]] [:send :y [0 :b]]]")],
     {"G0"}, set(), {"G0"}, ""),
    ("G1c: pure wr",
     [o(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"), o(1, 1, "invoke", "txn", "[[:send :y :b] [:poll]]"),
      o(2, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:y [[0 :b]]}]]"),
      o(3, 1, "ok", "txn", "[[:send :y [0 :b]] [:poll {:x [[0 :a]]}]]")],
     {"G1c"}, {"G1c"}, set(), ""),
    ("G1c: ww and wr",
     [o(0, 0, "invoke", "txn", "[[:send :x :a] [:send :y :c]]"), o(1, 1, "invoke", "txn", "[[:poll] [:send :y :b]]"),
      o(2, 0, "ok", "txn", "[[:send :x [0 :a]] [:send :y [2 :c]]]"),
      o(3, 1, "ok", "txn", "[[:poll {:x [[0 :a]]}] [:send :y [1 :b]]]")],
     {"G1c"}, set(), {"G1c"}, ""),
    ("precommitted-read",
     [o(0, 0, "invoke", "txn", "[[:send :x :a] [:poll]]"),
      o(1, 0, "ok", "txn", "[[:send :x [0 :a]] [:poll {:x [[0 :a]]}]]")],
     {"precommitted-read"}, {"precommitted-read"}, set(), ""),
]
