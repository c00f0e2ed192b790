"""The classic group protocol's decisions, after Kafka's GroupCoordinator.scala and
GroupMetadata.scala (2.8/3.x): the group state machine, the join barrier, generations, member
expiry, and which error each request gets. Pure: no sockets, clocks or randomness -- the caller
passes `now_ms` and a member-id factory, and performs the effects returned:

  Reply(token, result)   answer a parked request (JoinGroup, SyncGroup) with `result`
  Store(group_id, generation, record)
                         append the group metadata record (acks=all), then call `stored(...)`

States (GroupMetadata.validPreviousStates):
  Empty -> PreparingRebalance            a member joins
  PreparingRebalance -> CompletingRebalance   every member rejoined (or the rebalance timeout /
                                              initial delay expired); generation += 1
  PreparingRebalance -> Empty            the barrier completed with no members; generation += 1
  CompletingRebalance -> Stable          the leader's SyncGroup assignment was stored
  CompletingRebalance | Stable -> PreparingRebalance   join of a new member, metadata change,
                                              leave, session expiry, missing SyncGroup
  any -> Dead                            the coordinator gave up the partition (unload)
  Empty -> Dead                          DeleteGroups (its tombstones are then written)

Static membership (group.instance.id) is not supported: a JoinGroup that carries one is answered
UNSUPPORTED_VERSION, which is what Kafka answers when its inter-broker protocol predates KIP-345.
Transactional offset commits and offset expiry (offsets.retention.minutes) are not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from impl.group_records import GroupRecord, MemberRecord

# Kafka error codes: one table for the wire and the coordinator (no I/O in that module).
from impl.protocol.errors import (  # noqa: F401
    NONE, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT,
    REBALANCE_IN_PROGRESS, UNSUPPORTED_VERSION, MEMBER_ID_REQUIRED, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = \
    "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
VALID_PREVIOUS = {PREPARING: {STABLE, COMPLETING, EMPTY}, COMPLETING: {PREPARING},
                  STABLE: {COMPLETING}, EMPTY: {PREPARING}, DEAD: {STABLE, PREPARING, COMPLETING, EMPTY, DEAD}}

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000     # GroupCoordinator.NewMemberJoinTimeoutMs


@dataclass(frozen=True)
class GroupConfig:
    """Kafka's group.* broker settings (defaults as Kafka's)."""
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000


@dataclass
class Reply:
    token: object
    result: dict


@dataclass
class Store:
    group_id: str
    generation: int
    record: GroupRecord


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_token: object = None          # a parked JoinGroup (awaiting join)
    sync_token: object = None          # a parked SyncGroup (awaiting sync)
    heartbeat_deadline_ms: float = 0.0
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")


@dataclass
class Offset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ts: int
    log_offset: int                    # where the record is in __consumer_offsets


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: dict[str, float] = field(default_factory=dict)   # MEMBER_ID_REQUIRED -> deadline
    pending_sync: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, int], Offset] = field(default_factory=dict)
    join_deadline_ms: float | None = None      # DelayedJoin / InitialDelayedJoin expiry
    initial_delay: bool = False                 # the join is an InitialDelayedJoin
    initial_remaining_ms: int = 0
    new_member_added: bool = False
    sync_deadline_ms: float | None = None       # pending-sync expiry (KAFKA-13457's fix)
    state_ts_ms: int = -1

    # --- GroupMetadata helpers ------------------------------------------------------------------
    def transition(self, to: str) -> None:
        if self.state not in VALID_PREVIOUS[to]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state} -> {to}")
        self.state = to

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return all(m.join_token is not None for m in self.members.values()) and not self.pending_members

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def candidate_protocols(self) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins (ties: the first
        in sorted order, deterministic where Kafka's is map order)."""
        cands = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in cands)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda n: votes[n])

    def add(self, m: Member) -> None:
        if not self.members:
            self.protocol_type = m.protocol_type
        self.members[m.member_id] = m
        if self.leader_id is None:
            self.leader_id = m.member_id

    def remove(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def record(self, now_ms: float) -> GroupRecord:
        """The group metadata record for the current generation (GroupMetadataManager.storeGroup)."""
        ms = tuple(MemberRecord(m.member_id, None, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                m.session_timeout_ms, m.metadata(self.protocol_name), m.assignment)
                   for m in self.members.values())
        return GroupRecord(self.group_id, False, self.protocol_type or "", self.generation,
                           self.protocol_name, self.leader_id, int(now_ms), ms)


def from_record(r: GroupRecord, now_ms: float) -> Group:
    """A group loaded from the log (GroupMetadata.loadGroup): Stable with its members if it had
    any, each given a fresh session (onGroupLoaded schedules their heartbeat expiry)."""
    g = Group(r.group, state=STABLE if r.members else EMPTY, generation=r.generation,
              protocol_type=r.protocol_type or None, protocol_name=r.protocol, leader_id=r.leader,
              state_ts_ms=r.state_ts)
    for m in r.members:
        g.members[m.member_id] = Member(m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
                                        m.rebalance_timeout_ms, r.protocol_type,
                                        [(r.protocol or "", m.subscription)], m.assignment,
                                        heartbeat_deadline_ms=now_ms + m.session_timeout_ms)
    return g


def _join_result(g: Group, member_id: str, error: int = NONE, with_members: bool = False) -> dict:
    members = []
    if with_members:
        members = [{"member_id": m.member_id, "group_instance_id": None, "metadata": m.metadata(g.protocol_name)}
                   for m in g.members.values()]
    return {"error_code": error, "generation_id": g.generation if error == NONE else -1,
            "protocol_type": g.protocol_type if error == NONE else None,
            "protocol_name": g.protocol_name if error == NONE else None,
            "leader": (g.leader_id or "") if error == NONE else "", "member_id": member_id, "members": members}


def _join_error(member_id: str, error: int) -> dict:
    return {"error_code": error, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "member_id": member_id, "members": []}


def _sync_result(g: Group, assignment: bytes, error: int = NONE) -> dict:
    return {"error_code": error, "assignment": assignment if error == NONE else b"",
            "protocol_type": g.protocol_type, "protocol_name": g.protocol_name}


# --- JoinGroup ----------------------------------------------------------------------------------

def join(g: Group | None, group_id: str, cfg: GroupConfig, now_ms: float, token: object, *, member_id: str,
         client_id: str, client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
         protocol_type: str, protocols: list[tuple[str, bytes]], require_known_member_id: bool,
         group_instance_id: str | None, new_member_id: Callable[[str], str]) -> tuple[Group | None, list]:
    """GroupCoordinator.handleJoinGroup. Returns the (possibly new) group and the effects; the
    request is answered by a Reply with `token`, now or when the join barrier completes."""
    if group_instance_id is not None:
        return g, [Reply(token, _join_error(member_id, UNSUPPORTED_VERSION))]
    if not (cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms):
        return g, [Reply(token, _join_error(member_id, INVALID_SESSION_TIMEOUT))]
    if rebalance_timeout_ms < 0:          # JoinGroup v0 has none: Kafka uses the session timeout
        rebalance_timeout_ms = session_timeout_ms
    unknown = member_id == ""
    if g is None:
        if not unknown:
            # the group does not exist and the member claims an id: UNKNOWN_MEMBER_ID
            return g, [Reply(token, _join_error(member_id, UNKNOWN_MEMBER_ID))]
        g = Group(group_id)
    eff: list = []
    names = [n for n, _ in protocols]
    if g.state == DEAD:
        return g, [Reply(token, _join_error(member_id, COORDINATOR_NOT_AVAILABLE))]
    if not g.supports(protocol_type, names):
        return g, [Reply(token, _join_error(member_id, INCONSISTENT_GROUP_PROTOCOL))]
    if unknown:
        mid = new_member_id(client_id)
        if require_known_member_id:
            # KIP-394: hand out the id first; the member rejoins with it
            g.pending_members[mid] = now_ms + session_timeout_ms
            return g, [Reply(token, _join_error(mid, MEMBER_ID_REQUIRED))]
        eff += _add_member_and_rebalance(g, cfg, now_ms, token, mid, client_id, client_host,
                                         session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
    elif member_id in g.pending_members:
        del g.pending_members[member_id]
        eff += _add_member_and_rebalance(g, cfg, now_ms, token, member_id, client_id, client_host,
                                         session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
    elif member_id not in g.members:
        return g, [Reply(token, _join_error(member_id, UNKNOWN_MEMBER_ID))]
    else:
        m = g.members[member_id]
        same = m.protocols == list(protocols)
        if g.state == PREPARING:
            eff += _update_member_and_rebalance(g, cfg, now_ms, m, protocols, token)
        elif g.state == COMPLETING:
            if same:
                # the member missed the JoinGroup response: answer it again for this generation
                eff.append(Reply(token, _join_result(g, member_id, with_members=g.leader_id == member_id)))
            else:
                eff += _update_member_and_rebalance(g, cfg, now_ms, m, protocols, token)
        elif g.state == STABLE:
            if g.leader_id == member_id or not same:
                # the leader rejoining forces a rebalance (it saw a metadata change)
                eff += _update_member_and_rebalance(g, cfg, now_ms, m, protocols, token)
            else:
                eff.append(Reply(token, _join_result(g, member_id)))
        else:   # Empty: the group lost this member; let it reset and rejoin
            eff.append(Reply(token, _join_error(member_id, UNKNOWN_MEMBER_ID)))
    if g.state == PREPARING:
        eff += _try_complete_join(g, cfg, now_ms)
    return g, eff


def _add_member_and_rebalance(g, cfg, now_ms, token, mid, client_id, client_host, session_timeout_ms,
                              rebalance_timeout_ms, protocol_type, protocols) -> list:
    m = Member(mid, client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type,
               list(protocols), join_token=token, is_new=True,
               heartbeat_deadline_ms=now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS)
    if g.state == PREPARING and g.generation == 0:
        g.new_member_added = True      # the initial delay may be extended
    g.add(m)
    return _maybe_prepare_rebalance(g, cfg, now_ms)


def _update_member_and_rebalance(g, cfg, now_ms, m: Member, protocols, token) -> list:
    m.protocols = list(protocols)
    m.join_token = token
    return _maybe_prepare_rebalance(g, cfg, now_ms)


def _maybe_prepare_rebalance(g: Group, cfg: GroupConfig, now_ms: float) -> list:
    if g.state in VALID_PREVIOUS[PREPARING]:
        return _prepare_rebalance(g, cfg, now_ms)
    return []


def _prepare_rebalance(g: Group, cfg: GroupConfig, now_ms: float) -> list:
    eff = []
    if g.state == COMPLETING:
        eff += _reset_and_propagate_assignment_error(g, REBALANCE_IN_PROGRESS)
    g.sync_deadline_ms = None
    if g.state == EMPTY and cfg.initial_rebalance_delay_ms > 0:
        # InitialDelayedJoin: wait group.initial.rebalance.delay.ms for more members, extended
        # while new ones keep arriving, at most up to the rebalance timeout
        g.initial_delay = True
        g.initial_remaining_ms = max(g.rebalance_timeout_ms() - cfg.initial_rebalance_delay_ms, 0)
        g.join_deadline_ms = now_ms + cfg.initial_rebalance_delay_ms
    else:
        g.initial_delay = False
        g.join_deadline_ms = now_ms + g.rebalance_timeout_ms()
    g.transition(PREPARING)
    return eff + _try_complete_join(g, cfg, now_ms)     # tryCompleteElseWatch


def _try_complete_join(g: Group, cfg: GroupConfig, now_ms: float) -> list:
    """DelayedJoin.tryComplete: done as soon as every known member rejoined (an initial delay
    only completes by expiry)."""
    if g.state == PREPARING and not g.initial_delay and g.all_joined():
        return _complete_join(g, cfg, now_ms)
    return []


def _complete_join(g: Group, cfg: GroupConfig, now_ms: float) -> list:
    """GroupCoordinator.onCompleteJoin: drop members that did not rejoin, bump the generation,
    answer every JoinGroup (the leader gets the members' metadata)."""
    eff = []
    for mid in [mid for mid, m in g.members.items() if m.join_token is None]:
        g.remove(mid)
    g.join_deadline_ms = None
    if g.state == DEAD:
        return eff
    if g.members and g.leader_id not in g.members:
        g.leader_id = next(iter(g.members))
    g.generation += 1
    g.state_ts_ms = int(now_ms)
    if g.members:
        g.protocol_name = g.select_protocol()
        g.transition(COMPLETING)
        for m in g.members.values():
            eff.append(Reply(m.join_token, _join_result(g, m.member_id, with_members=m.member_id == g.leader_id)))
            m.join_token = None
            m.is_new = False
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        g.pending_sync = set(g.members)
        g.sync_deadline_ms = now_ms + g.rebalance_timeout_ms()
    else:
        g.protocol_name = None          # the protocol type stays (Empty groups list as "consumer")
        g.leader_id = None
        g.transition(EMPTY)
        eff.append(Store(g.group_id, g.generation, g.record(now_ms)))
    return eff


def _reset_and_propagate_assignment_error(g: Group, error: int) -> list:
    eff = []
    for m in g.members.values():
        m.assignment = b""
        if m.sync_token is not None:
            eff.append(Reply(m.sync_token, _sync_result(g, b"", error)))
            m.sync_token = None
    return eff


# --- SyncGroup ----------------------------------------------------------------------------------

def sync(g: Group | None, now_ms: float, token: object, *, member_id: str, generation: int,
         protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes]) -> list:
    """GroupCoordinator.handleSyncGroup / doSyncGroup. The leader's assignment is stored first
    (Store); members get it from `stored`."""
    if g is None:
        return [Reply(token, {"error_code": UNKNOWN_MEMBER_ID, "assignment": b"",
                              "protocol_type": None, "protocol_name": None})]
    if g.state == DEAD:
        return [Reply(token, _sync_result(g, b"", COORDINATOR_NOT_AVAILABLE))]
    if member_id not in g.members:
        return [Reply(token, _sync_result(g, b"", UNKNOWN_MEMBER_ID))]
    if generation != g.generation:
        return [Reply(token, _sync_result(g, b"", ILLEGAL_GENERATION))]
    if (protocol_type is not None and protocol_type != g.protocol_type) or \
            (protocol_name is not None and protocol_name != g.protocol_name):
        return [Reply(token, _sync_result(g, b"", INCONSISTENT_GROUP_PROTOCOL))]
    m = g.members[member_id]
    if g.state == EMPTY:
        return [Reply(token, _sync_result(g, b"", UNKNOWN_MEMBER_ID))]
    if g.state == PREPARING:
        return [Reply(token, _sync_result(g, b"", REBALANCE_IN_PROGRESS))]
    if g.state == STABLE:
        g.pending_sync.discard(member_id)
        m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        return [Reply(token, _sync_result(g, m.assignment))]
    # CompletingRebalance
    m.sync_token = token
    g.pending_sync.discard(member_id)
    if g.leader_id != member_id:
        return []
    for mid, mem in g.members.items():       # members the leader left out get an empty assignment
        mem.assignment = assignments.get(mid, b"")
    return [Store(g.group_id, g.generation, g.record(now_ms))]


def stored(g: Group, cfg: GroupConfig, now_ms: float, generation: int, error: int) -> list:
    """storeGroup's callback: if the group is still completing this generation, propagate the
    assignment and become Stable; on an append error reset and rebalance."""
    if g.state != COMPLETING or g.generation != generation:
        return []
    if error != NONE:
        eff = _reset_and_propagate_assignment_error(g, error)
        return eff + _maybe_prepare_rebalance(g, cfg, now_ms)
    eff = []
    for m in g.members.values():
        if m.sync_token is not None:
            eff.append(Reply(m.sync_token, _sync_result(g, m.assignment)))
            m.sync_token = None
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
    g.transition(STABLE)
    g.state_ts_ms = int(now_ms)
    return eff


# --- Heartbeat, LeaveGroup, OffsetCommit --------------------------------------------------------

def heartbeat(g: Group | None, now_ms: float, member_id: str, generation: int) -> int:
    """GroupCoordinator.handleHeartbeat: the error code; refreshes the member's session."""
    if g is None:
        return UNKNOWN_MEMBER_ID
    if g.state == DEAD:
        return COORDINATOR_NOT_AVAILABLE
    if member_id not in g.members:
        return UNKNOWN_MEMBER_ID
    if generation != g.generation:
        return ILLEGAL_GENERATION
    if g.state == EMPTY:
        return UNKNOWN_MEMBER_ID
    m = g.members[member_id]
    m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
    return REBALANCE_IN_PROGRESS if g.state == PREPARING else NONE


def leave(g: Group | None, cfg: GroupConfig, now_ms: float, member_id: str) -> tuple[int, list]:
    """GroupCoordinator.handleLeaveGroup for one dynamic member."""
    if g is None:
        return UNKNOWN_MEMBER_ID, []
    if g.state == DEAD:
        return COORDINATOR_NOT_AVAILABLE, []
    if member_id in g.pending_members:
        del g.pending_members[member_id]
        return NONE, _try_complete_join(g, cfg, now_ms)
    if member_id not in g.members:
        return UNKNOWN_MEMBER_ID, []
    return NONE, _remove_member_and_update(g, cfg, now_ms, member_id)


def _remove_member_and_update(g: Group, cfg: GroupConfig, now_ms: float, member_id: str) -> list:
    """removeMemberAndUpdateGroup: a parked JoinGroup of the member is answered UNKNOWN_MEMBER_ID
    first; then the group rebalances (or the running barrier may now complete)."""
    m = g.members[member_id]
    eff = []
    if m.join_token is not None:
        eff.append(Reply(m.join_token, _join_error("", UNKNOWN_MEMBER_ID)))
        m.join_token = None
    if m.sync_token is not None:
        eff.append(Reply(m.sync_token, _sync_result(g, b"", UNKNOWN_MEMBER_ID)))
        m.sync_token = None
    g.remove(member_id)
    if g.state in (STABLE, COMPLETING):
        eff += _maybe_prepare_rebalance(g, cfg, now_ms)
    elif g.state == PREPARING:
        eff += _try_complete_join(g, cfg, now_ms)
    return eff


def validate_commit(g: Group | None, now_ms: float, member_id: str, generation: int) -> int:
    """GroupCoordinator.handleCommitOffsets / doCommitOffsets: NONE if the commit may be stored.
    generation < 0 with an empty (or absent) group is a plain commit (assign(), no membership)."""
    if g is None:
        return NONE if generation < 0 else ILLEGAL_GENERATION
    if g.state == DEAD:
        return COORDINATOR_NOT_AVAILABLE
    if generation < 0 and g.state == EMPTY:
        return NONE
    if member_id not in g.members:
        return UNKNOWN_MEMBER_ID
    if generation != g.generation:
        return ILLEGAL_GENERATION
    if g.state == COMPLETING:
        return REBALANCE_IN_PROGRESS
    m = g.members[member_id]      # Stable or PreparingRebalance: a commit counts as a heartbeat
    m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
    return NONE


def offsets_appended(g: Group, commits: dict[tuple[str, int], tuple[int, int, str, int]], log_offset: int) -> None:
    """An offset commit reached the log at `log_offset` and was replicated: cache it unless a
    later-appended commit of the same partition is already cached (onOffsetCommitAppend)."""
    for tp, (off, epoch, meta, ts) in commits.items():
        cur = g.offsets.get(tp)
        if cur is None or cur.log_offset < log_offset:
            g.offsets[tp] = Offset(off, epoch, meta, ts, log_offset)


# --- timers and unloading -----------------------------------------------------------------------

def tick(g: Group, cfg: GroupConfig, now_ms: float) -> list:
    """Expiries that Kafka runs in its purgatories: pending member ids, member sessions
    (onExpireHeartbeat: members awaiting join or sync are covered by the rebalance timeout
    instead, new members by NewMemberJoinTimeoutMs), the join barrier (DelayedJoin,
    InitialDelayedJoin) and missing SyncGroups (onExpirePendingSync)."""
    eff: list = []
    if g.state == DEAD:
        return eff
    for mid, deadline in list(g.pending_members.items()):
        if now_ms >= deadline:
            del g.pending_members[mid]
            eff += _try_complete_join(g, cfg, now_ms)
    for mid, m in list(g.members.items()):
        if mid not in g.members or now_ms < m.heartbeat_deadline_ms:
            continue
        awaiting = m.join_token is not None or m.sync_token is not None
        if m.is_new or not awaiting:
            eff += _remove_member_and_update(g, cfg, now_ms, mid)
    if g.state == PREPARING and g.join_deadline_ms is not None and now_ms >= g.join_deadline_ms:
        if g.initial_delay and g.new_member_added and g.initial_remaining_ms > 0:
            g.new_member_added = False
            delay = min(cfg.initial_rebalance_delay_ms, g.initial_remaining_ms)
            g.initial_remaining_ms = max(g.initial_remaining_ms - delay, 0)
            g.join_deadline_ms = now_ms + delay
        else:
            g.initial_delay = False
            eff += _complete_join(g, cfg, now_ms)
    if g.state in (COMPLETING, STABLE) and g.sync_deadline_ms is not None and now_ms >= g.sync_deadline_ms:
        g.sync_deadline_ms = None
        if g.pending_sync:
            for mid in sorted(g.pending_sync):
                g.remove(mid)          # it never sent SyncGroup, so nothing of it is parked
            g.pending_sync = set()
            eff += _maybe_prepare_rebalance(g, cfg, now_ms)
    return eff


def unload(g: Group) -> list:
    """The coordinator lost the partition (GroupCoordinator.onGroupUnloaded): the group is Dead
    here; parked requests are answered NOT_COORDINATOR so the members find the new coordinator."""
    eff = []
    for m in g.members.values():
        if m.join_token is not None:
            eff.append(Reply(m.join_token, _join_error(m.member_id, NOT_COORDINATOR)))
            m.join_token = None
        if m.sync_token is not None:
            eff.append(Reply(m.sync_token, _sync_result(g, b"", NOT_COORDINATOR)))
            m.sync_token = None
    g.state = DEAD
    return eff


# --- DeleteGroups -------------------------------------------------------------------------------

def delete_check(g: Group | None) -> int:
    """GroupCoordinator.handleDeleteGroups for a group this broker coordinates and has loaded:
    NONE if it may be deleted (Empty: no members, only offsets or an empty generation left);
    GROUP_ID_NOT_FOUND for a group it does not know (or one already Dead); NON_EMPTY_GROUP while
    members remain. The caller then marks it Dead, writes the tombstones and drops it."""
    if g is None or g.state == DEAD:
        return GROUP_ID_NOT_FOUND
    if g.state != EMPTY or g.members:
        return NON_EMPTY_GROUP
    return NONE


# --- __consumer_offsets partitioning ------------------------------------------------------------

def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """GroupMetadataManager.partitionFor: Utils.abs(groupId.hashCode) % partitions, where
    Utils.abs maps Integer.MIN_VALUE to 0."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
