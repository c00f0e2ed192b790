"""The group coordinator's pure core (impl/group_coordinator.py) as a table of transitions, each
row a short script against one group with Kafka's expected outcome (GroupCoordinator.scala /
GroupMetadata.scala), plus the __consumer_offsets record schemas and the partitioning hash."""
from __future__ import annotations

import pytest

from impl import group_coordinator as gc
from impl import group_records as gr

CFG = gc.GroupConfig(min_session_timeout_ms=1000, max_session_timeout_ms=60000, initial_rebalance_delay_ms=0)
SESSION, REBALANCE = 3000, 5000


class Script:
    """Drives one group: members are named; ids come from a counter (the core takes a factory)."""

    def __init__(self, cfg=CFG):
        self.cfg, self.now, self.g = cfg, 0.0, None
        self.ids: dict[str, str] = {}
        self.n = 0
        self.last: dict[str, dict] = {}       # member name -> last reply to a parked request
        self.tokens: dict[object, str] = {}
        self.stores: list[gc.Store] = []
        self.codes: list[int] = []            # results of heartbeat / leave / commit

    def _new_id(self, client: str) -> str:
        self.n += 1
        return f"{client}-{self.n}"

    def apply(self, eff):
        for e in eff:
            if isinstance(e, gc.Reply):
                name = self.tokens.pop(e.token)
                self.last[name] = e.result
                if e.result["error_code"] in (0, gc.MEMBER_ID_REQUIRED) and "member_id" in e.result:
                    self.ids[name] = e.result["member_id"]
            else:
                self.stores.append(e)

    def gen(self, delta=0):
        return -1 if self.g is None else self.g.generation + delta

    def step(self, op, *args):
        if op in ("join", "join4", "rejoin"):
            name = args[0]
            protocols = args[1] if len(args) > 1 else [("range", b"m-" + name.encode())]
            token = object()
            self.tokens[token] = name
            self.g, eff = gc.join(self.g, "g", self.cfg, self.now, token,
                                  member_id=self.ids.get(name, "") if op == "rejoin" else "",
                                  client_id=name, client_host="", session_timeout_ms=SESSION,
                                  rebalance_timeout_ms=REBALANCE, protocol_type="consumer",
                                  protocols=protocols, require_known_member_id=op == "join4",
                                  group_instance_id=None, new_member_id=self._new_id)
            self.apply(eff)
        elif op == "sync":
            name, delta = args[0], (args[1] if len(args) > 1 else 0)
            token = object()
            self.tokens[token] = name
            asg = {mid: b"asg-" + n.encode() for n, mid in self.ids.items()}
            self.apply(gc.sync(self.g, self.now, token, member_id=self.ids.get(name, "x"),
                               generation=self.gen(delta), protocol_type=None, protocol_name=None,
                               assignments=asg))
        elif op == "stored":
            err = args[0] if args else 0
            stores, self.stores = self.stores, []
            for s in stores:
                self.apply(gc.stored(self.g, self.cfg, self.now, s.generation, err))
        elif op == "hb":
            self.codes.append(gc.heartbeat(self.g, self.now, self.ids.get(args[0], "x"), self.gen(args[1] if len(args) > 1 else 0)))
        elif op == "leave":
            code, eff = gc.leave(self.g, self.cfg, self.now, self.ids.get(args[0], "x"))
            self.codes.append(code)
            self.apply(eff)
        elif op == "commit":
            self.codes.append(gc.validate_commit(self.g, self.now, self.ids.get(args[0], "x"),
                                                 self.gen(args[1] if len(args) > 1 else 0)))
        elif op == "tick":
            self.now += args[0]
            self.apply(gc.tick(self.g, self.cfg, self.now))
        elif op == "unload":
            self.apply(gc.unload(self.g))
        else:
            raise ValueError(op)


STABLE_AB = [("join", "a"), ("join", "b"), ("tick", 1), ("rejoin", "a"), ("rejoin", "b"),
             ("sync", "a"), ("sync", "b"), ("stored",)]

# (name, script, expectations). Expectation keys: state, generation, members, codes (results of
# hb/leave/commit in order), replies {member: error code of its last parked reply}, leader.
TABLE = [
    ("first join: Empty -> PreparingRebalance -> (all joined) CompletingRebalance, generation 1",
     [("join", "a")], dict(state=gc.COMPLETING, generation=1, members=1, replies={"a": 0}, leader="a")),
    ("JoinGroup v4+: unknown member gets MEMBER_ID_REQUIRED and is pending, group unchanged",
     [("join4", "a")], dict(state=gc.EMPTY, generation=0, members=0, replies={"a": gc.MEMBER_ID_REQUIRED})),
    ("JoinGroup v4+: rejoin with the handed-out id joins",
     [("join4", "a"), ("rejoin", "a")], dict(state=gc.COMPLETING, generation=1, members=1, replies={"a": 0})),
    ("rejoin with an id the group never issued: UNKNOWN_MEMBER_ID",
     [("join", "a"), ("step-id", "b"), ("rejoin", "b")], dict(replies={"b": gc.UNKNOWN_MEMBER_ID}, members=1)),
    ("leader's SyncGroup stores the assignment; Stable only after the store succeeded",
     [("join", "a"), ("sync", "a")], dict(state=gc.COMPLETING, generation=1, replies={"a": 0})),
    ("store callback: Stable, every waiting member gets its assignment",
     STABLE_AB, dict(state=gc.STABLE, generation=2, members=2, replies={"a": 0, "b": 0})),
    ("store failure: assignment reset, members told the error, the group rebalances",
     [("join", "a"), ("sync", "a"), ("stored", gc.COORDINATOR_NOT_AVAILABLE)],
     dict(state=gc.PREPARING, replies={"a": gc.COORDINATOR_NOT_AVAILABLE})),
    ("a new member joining a Stable group starts a rebalance; old members learn it by heartbeat",
     STABLE_AB + [("join", "c"), ("hb", "a")],
     dict(state=gc.PREPARING, generation=2, codes=[gc.REBALANCE_IN_PROGRESS])),
    ("rebalance completes when every member rejoined: generation bumps",
     STABLE_AB + [("join", "c"), ("rejoin", "a"), ("rejoin", "b")],
     dict(state=gc.COMPLETING, generation=3, members=3, replies={"a": 0, "b": 0, "c": 0})),
    ("heartbeat with an old generation: ILLEGAL_GENERATION",
     STABLE_AB + [("hb", "a", -1)], dict(codes=[gc.ILLEGAL_GENERATION])),
    ("heartbeat of an unknown member: UNKNOWN_MEMBER_ID",
     STABLE_AB + [("hb", "zz")], dict(codes=[gc.UNKNOWN_MEMBER_ID])),
    ("commit of the current generation in Stable: accepted",
     STABLE_AB + [("commit", "a")], dict(codes=[0])),
    ("commit from an older generation: ILLEGAL_GENERATION (the fenced generation never commits)",
     STABLE_AB + [("commit", "a", -1)], dict(codes=[gc.ILLEGAL_GENERATION])),
    ("commit while CompletingRebalance: REBALANCE_IN_PROGRESS",
     [("join", "a"), ("commit", "a")], dict(codes=[gc.REBALANCE_IN_PROGRESS])),
    ("commit while PreparingRebalance with the current generation: accepted (Kafka allows it)",
     STABLE_AB + [("join", "c"), ("commit", "a")], dict(state=gc.PREPARING, codes=[0])),
    ("commit with generation -1 to an Empty group: a plain (assign()) commit, accepted",
     [("commit", "a", -1 - 0)], dict(codes=[0])),
    ("SyncGroup during PreparingRebalance: REBALANCE_IN_PROGRESS",
     STABLE_AB + [("join", "c"), ("sync", "a")], dict(replies={"a": gc.REBALANCE_IN_PROGRESS})),
    ("SyncGroup with a stale generation: ILLEGAL_GENERATION",
     STABLE_AB + [("sync", "b", -1)], dict(replies={"b": gc.ILLEGAL_GENERATION})),
    ("LeaveGroup of a Stable member: rebalance; the remaining member rejoins alone",
     STABLE_AB + [("leave", "b"), ("rejoin", "a")],
     dict(codes=[0], state=gc.COMPLETING, generation=3, members=1)),
    ("the last member leaves: the barrier completes with nobody, Empty, generation bumps, stored",
     [("join", "a"), ("sync", "a"), ("stored",), ("leave", "a")],
     dict(codes=[0], state=gc.EMPTY, generation=2, members=0)),
    ("session expiry: a silent member is removed and the group rebalances",
     STABLE_AB + [("tick", 2000), ("hb", "a"), ("tick", 1500)],
     dict(codes=[0], state=gc.PREPARING, members=1)),
    ("rebalance timeout: a member that does not rejoin is dropped when the barrier expires",
     STABLE_AB + [("join", "c"), ("rejoin", "a"), ("tick", REBALANCE + 1)],
     dict(state=gc.COMPLETING, generation=3, members=2)),
    ("missing SyncGroup past the rebalance timeout: that member is removed, rebalance",
     [("join", "a"), ("join", "b"), ("tick", 1), ("rejoin", "a"), ("rejoin", "b"), ("sync", "a"),
      ("hb", "b"), ("tick", REBALANCE + 1)],
     dict(state=gc.PREPARING, members=1)),
    ("members awaiting the join barrier do not expire by session timeout",
     STABLE_AB + [("join", "c"), ("rejoin", "a"), ("tick", 2000), ("hb", "b"), ("tick", 1500)],
     dict(state=gc.PREPARING, members=3, codes=[gc.REBALANCE_IN_PROGRESS])),
    ("a member that neither rejoins nor heartbeats during a rebalance expires by session timeout",
     STABLE_AB + [("join", "c"), ("rejoin", "a"), ("tick", SESSION + 100)],
     dict(state=gc.COMPLETING, members=2, generation=3)),
    ("a follower rejoining a Stable group with unchanged metadata gets the current generation",
     STABLE_AB + [("rejoin", "b")], dict(state=gc.STABLE, generation=2, replies={"b": 0})),
    ("the leader rejoining a Stable group forces a rebalance",
     STABLE_AB + [("rejoin", "a")], dict(state=gc.PREPARING, generation=2)),
    ("a protocol no member supports: INCONSISTENT_GROUP_PROTOCOL",
     [("join", "a"), ("join", "b", [("roundrobin", b"")])],
     dict(replies={"b": gc.INCONSISTENT_GROUP_PROTOCOL}, members=1)),
    ("unload (leadership moved): Dead, parked requests get NOT_COORDINATOR",
     STABLE_AB + [("join", "c"), ("unload",)], dict(state=gc.DEAD, replies={"c": gc.NOT_COORDINATOR})),
]


@pytest.mark.parametrize("name,script,expect", TABLE, ids=[r[0][:60] for r in TABLE])
def test_transition_table(name, script, expect):
    s = Script()
    for st in script:
        if st[0] == "step-id":
            s.ids[st[1]] = "never-issued"
            continue
        s.step(*st)
    g = s.g
    if "state" in expect:
        assert g.state == expect["state"], name
    if "generation" in expect:
        assert g.generation == expect["generation"], name
    if "members" in expect:
        assert len(g.members) == expect["members"], name
    if "codes" in expect:
        assert s.codes == expect["codes"], name
    for member, code in expect.get("replies", {}).items():
        assert s.last[member]["error_code"] == code, (name, member, s.last[member])
    if "leader" in expect:
        assert g.leader_id == s.ids[expect["leader"]]


def test_initial_rebalance_delay_waits_for_more_members():
    """InitialDelayedJoin: an empty group waits group.initial.rebalance.delay.ms, extended while
    members keep arriving, so three consumers started together form one generation."""
    s = Script(gc.GroupConfig(min_session_timeout_ms=1000, initial_rebalance_delay_ms=300))
    s.step("join", "a")
    s.step("tick", 200)
    s.step("join", "b")
    s.step("tick", 200)          # first delay expired; a member arrived meanwhile: extended
    assert s.g.state == gc.PREPARING
    s.step("join", "c")
    s.step("tick", 301)
    s.step("tick", 301)
    assert s.g.state == gc.COMPLETING and s.g.generation == 1 and len(s.g.members) == 3
    assert {s.last[n]["generation_id"] for n in "abc"} == {1}
    leader = [n for n in "abc" if s.last[n]["members"]]
    assert leader == ["a"] and len(s.last["a"]["members"]) == 3


def test_sync_answers_everyone_with_their_own_assignment_and_stores_the_generation():
    s = Script()
    for st in STABLE_AB:
        s.step(*st)
    assert s.last["a"]["assignment"] == b"asg-a" and s.last["b"]["assignment"] == b"asg-b"
    rec = s.g.record(0)
    assert rec.generation == 2 and {m.member_id for m in rec.members} == set(s.g.members)


def test_offsets_cache_keeps_the_later_append():
    g = gc.Group("g")
    gc.offsets_appended(g, {("t", 0): (10, -1, "", 0)}, log_offset=7)
    gc.offsets_appended(g, {("t", 0): (5, -1, "", 0)}, log_offset=3)     # appended earlier, answered later
    assert g.offsets[("t", 0)].offset == 10


def test_loaded_group_is_stable_with_fresh_sessions():
    r = gr.GroupRecord("g", False, "consumer", 4, "range", "m1", 0, (
        gr.MemberRecord("m1", None, "c", "", 5000, 3000, b"sub", b"asg"),))
    g = gc.from_record(r, now_ms=100)
    assert (g.state, g.generation, g.leader_id) == (gc.STABLE, 4, "m1")
    assert gc.heartbeat(g, 200, "m1", 4) == 0 and gc.heartbeat(g, 200, "m1", 3) == gc.ILLEGAL_GENERATION
    assert gc.validate_commit(g, 200, "m1", 4) == 0


# --- records and partitioning -------------------------------------------------------------------

def test_offset_and_group_records_round_trip_through_a_batch():
    grp = gr.GroupRecord("g", False, "consumer", 3, "range", "m1", 123, (
        gr.MemberRecord("m1", None, "c1", "/h", 5000, 3000, b"\x00sub", b"\x01asg"),))
    data = gr.batch([(gr.offset_key("g", "t", 2), gr.offset_value(42, 7, "md", 99)),
                     (gr.group_key("g"), gr.group_value(grp)),
                     (gr.offset_key("g", "t", 3), None)])
    recs = [gr.decode(k, v) for _off, k, v in gr.data_records(data)]
    assert recs[0] == gr.OffsetRecord("g", "t", 2, 42, 7, "md", 99)
    assert recs[1] == grp
    assert recs[2] == gr.OffsetRecord("g", "t", 3, None)


def test_kafka_offset_key_bytes():
    """OffsetCommitKey v1: int16 version, string group, string topic, int32 partition."""
    assert gr.offset_key("g", "t", 1) == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x01"
    assert gr.group_key("g") == b"\x00\x02\x00\x01g"


def test_bad_record_is_a_clear_error():
    with pytest.raises(gr.RecordError):
        gr.decode(b"\x00\x07", b"")
    with pytest.raises(gr.RecordError):
        gr.decode(b"\x00\x01\x00", b"")


@pytest.mark.parametrize("s,h", [("", 0), ("a", 97), ("hello", 99162322), ("polygenelubricants", -(1 << 31)),
                                 ("\U0001F600", 1772899)])
def test_java_string_hash(s, h):
    assert gc.java_string_hash(s) == h


def test_partition_for_maps_min_int_to_zero():
    assert gc.partition_for("polygenelubricants", 50) == 0
    assert gc.partition_for("hello", 50) == 99162322 % 50
