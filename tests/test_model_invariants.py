"""The invariants of spec/invariants.py as predicates, on states built by hand: each names the
state that breaks it and stays quiet on its nearest neighbour that does not. The search tests
reach these states only at bounds too large for the fast tests, or in one generation only."""
from __future__ import annotations

from spec import initial, make_config
from spec.invariants import (active, group_at_most_once, group_single_owner, leader_completeness, log_matching,
                             min_isr_durability, producer_acked_durable, producer_send_order,
                             step_violation, strong_isr)

GROUP = make_config("current", consumers=2, records=2)


def _members(s, *gens):
    return s._replace(grp=s.grp._replace(cons=tuple(c._replace(gen=g) for c, g in zip(s.grp.cons, gens))))


def test_group_single_owner_in_any_generation():
    s = initial(GROUP)
    assert group_single_owner(GROUP, _members(s, 0, 0)) is not None
    msg = group_single_owner(GROUP, _members(s, 1, 1))
    assert msg == "consumers c0 and c1 both own the partition in generation 1"
    assert group_single_owner(GROUP, _members(s, 0, 1)) is None       # an old generation's member
    assert group_single_owner(GROUP, _members(s, -1, -1)) is None     # no member yet
    dead = s._replace(grp=s.grp._replace(cons=(s.grp.cons[0]._replace(gen=1, alive=False),
                                               s.grp.cons[1]._replace(gen=1))))
    assert group_single_owner(GROUP, dead) is None


def test_monotonic_epochs_catches_an_epoch_going_back_on_a_running_broker():
    cfg = make_config("current")
    s = initial(cfg)
    ahead = s._replace(brokers=(s.brokers[0]._replace(le=1),) + s.brokers[1:])
    assert step_violation(cfg, ahead, s) == ("MonotonicEpochs", "b0's leader epoch went back from 1 to 0")
    ce = s.brokers[0].ce
    ce_back = s._replace(brokers=(s.brokers[0]._replace(ce=ce + 1),) + s.brokers[1:])
    assert step_violation(cfg, ce_back, s) == (
        "MonotonicEpochs", f"b0's controller epoch went back from {ce + 1} to {ce}")
    assert step_violation(cfg, s, ahead) is None                   # forward is fine
    # a restart (a new session) starts from what the disk kept: not a step back
    restarted = s._replace(brokers=(s.brokers[0]._replace(gen=s.brokers[0].gen + 1),) + s.brokers[1:])
    assert step_violation(cfg, ahead, restarted) is None


def test_producer_acked_durable_asks_for_the_acknowledged_record_itself():
    """A later record of the same producer on the leader does not stand in for a missing one."""
    cfg = make_config("current", producers=1, records=2)
    s = initial(cfg)
    s = s._replace(writes=((0, 0, -1, 0), (0, 1, -1, 1)),
                   prods=(s.prods[0]._replace(nxt=2, seqn=2, lack=1, out=(0, 1)),))
    both = s._replace(brokers=(s.brokers[0]._replace(log=((0, 0), (1, 0))),) + s.brokers[1:])
    assert producer_acked_durable(cfg, both) is None       # each acknowledged record found as itself
    only_later = s._replace(brokers=(s.brokers[0]._replace(log=((1, 0),)),) + s.brokers[1:])
    assert producer_acked_durable(cfg, only_later) == (
        "producer p0's record 0, acknowledged at offset 0, is missing from the leader b0 (epoch 0)")


def test_unclean_election_waives_the_durability_promises_only():
    """Unclean election waives the durability promises (scoped invariants), never the model's
    own bookkeeping, log matching, epoch uniqueness, the leader's quorum (module docstring) or
    progress (spec/progress.py)."""
    kept = {"HwBelowLeo", "LogMatching", "UniqueLeaderPerEpoch", "ReplicationQuorumSuperset",
            "EpochCacheMatchesLog", "FetchResponseMatchesEpoch", "PendingIsrMatchesRole",
            "HwProgress", "ElectionProgress"}
    durability = {"AckedDurable", "ConsistentReads", "MinIsrDurability", "StrongIsr", "LeaderCompleteness",
                  "LeaderCandidateCompleteness", "NoCommittedRecordLostGlobally"}
    assert {inv.name for inv in active(make_config("current", unclean=True))} == kept
    assert {inv.name for inv in active(make_config("current"))} == kept | durability
    # clients: ordering, duplicates and group membership stay promised; the group's committed
    # offsets live in a replicated log and are a durability promise like the records
    producers = dict(producers=1, retries=1, records=2)
    assert ({inv.name for inv in active(make_config("current", unclean=True, **producers))}
            == kept | {"ProducerSendOrder", "ProducerExactlyOnce"})
    group = dict(consumers=2, records=2)
    assert ({inv.name for inv in active(make_config("current", unclean=True, **group))}
            == kept | {"GroupSingleOwner", "GroupFencedNeverCommits", "GroupAtLeastOnce"})
    assert ({inv.name for inv in active(make_config("current", **group))}
            == kept | durability | {"GroupSingleOwner", "GroupFencedNeverCommits", "GroupAtLeastOnce",
                                    "GroupCommittedOffsetNeverBack"})


def test_strong_isr_names_the_record_and_the_member_without_it():
    cfg = make_config("current", brokers=2)
    s = initial(cfg)
    ld = s.brokers[0]._replace(log=((7, 0),), cache=((0, 0),), hw=1, flushed=1)
    s = s._replace(brokers=(ld, s.brokers[1]), zk=s.zk._replace(isr=0b11))
    assert strong_isr(cfg, s) == ("r7 at offset 0 is below leader b0's high watermark 1, but ISR "
                                  "member b1 has nothing there")
    assert strong_isr(cfg, s._replace(brokers=(ld, s.brokers[1]._replace(log=((7, 0),))))) is None


def test_log_matching_compares_every_pair_of_replicas():
    """The model allows up to five brokers: with four replicas, the third and the fourth are
    compared too."""
    cfg = make_config("current", brokers=4)
    s = initial(cfg)
    bs = list(s.brokers)
    bs[2] = bs[2]._replace(log=((0, 0),), cache=((0, 0),), hw=1, flushed=1)
    bs[3] = bs[3]._replace(log=((1, 0),), cache=((0, 0),), hw=1, flushed=1)
    assert log_matching(cfg, s._replace(brokers=tuple(bs))) == (
        "b2 and b3 disagree at offset 0 below both high watermarks: r0 vs r1")
    bs[3] = bs[3]._replace(log=((0, 0),))
    assert log_matching(cfg, s._replace(brokers=tuple(bs))) is None


def _producer_state(cfg, out, log):
    s = initial(cfg)
    return s._replace(writes=tuple((0, k, -1, k) for k in range(len(out))),
                      prods=(s.prods[0]._replace(nxt=len(out), seqn=len(out), lack=len(out) - 1, out=out),),
                      brokers=(s.brokers[0]._replace(log=log),) + s.brokers[1:])


def test_producer_send_order_names_the_records_and_their_offsets():
    cfg = make_config("current", producers=1, records=2)
    assert producer_send_order(cfg, _producer_state(cfg, (0, 1), ((0, 0), (1, 0)))) is None
    assert producer_send_order(cfg, _producer_state(cfg, (1, 0), ((1, 0), (0, 0)))) == (
        "producer p0 sent record 0 before record 1, but they were acknowledged at offsets 1 and 0: "
        "out of send order")


def test_producer_acked_durable_exempts_only_doomed_records():
    """A record every holder lost to power loss is exempt; the others are still asked for."""
    cfg = make_config("current", producers=1, records=2)
    s = _producer_state(cfg, (0, 1), ((1, 0),))          # record 0 is not on the leader
    assert producer_acked_durable(cfg, s) is not None
    assert producer_acked_durable(cfg, s._replace(doomed=0b01)) is None
    # a doomed record can come back: a fetch response in flight when its last holder lost it
    back = _producer_state(cfg, (0, 1), ((0, 0), (1, 0)))
    assert producer_acked_durable(cfg, back._replace(doomed=0b01)) is None


def test_strong_isr_exempts_only_the_damaged_member_itself():
    """A member that lost data in a crash is exempt until the controller removes it; another
    member's damage exempts nobody else."""
    cfg = make_config("current", brokers=3)
    s = initial(cfg)
    ld = s.brokers[0]._replace(log=((7, 0),), cache=((0, 0),), hw=1, flushed=1)
    s = s._replace(brokers=(ld, s.brokers[1], s.brokers[2]._replace(log=((7, 0),))), zk=s.zk._replace(isr=0b111))
    assert strong_isr(cfg, s._replace(damaged=0b010)) is None
    assert "ISR member b1 has nothing there" in strong_isr(cfg, s._replace(damaged=0b100))


def test_leader_completeness_counts_records_consumers_read_as_committed():
    """A record read below a HW is committed even if never acknowledged with acks=all."""
    cfg = make_config("current")
    s = initial(cfg)
    s = s._replace(exposed=(0, 1, 2), acked=0,
                   brokers=(s.brokers[0]._replace(log=((0, 0), (1, 0))),) + s.brokers[1:])
    assert leader_completeness(cfg, s) == (
        "leader b0 (epoch 0) lacks committed record(s) r2, acknowledged or already read by consumers")
    assert leader_completeness(cfg, s._replace(exposed=(0, 1))) is None


def test_min_isr_durability_counts_only_copies_of_the_same_record():
    cfg = make_config("current", min_isr=2)
    s = initial(cfg)
    ld = s.brokers[0]._replace(log=((1, 0),), cache=((0, 0),), hw=1, flushed=1)
    other = s._replace(brokers=(ld, s.brokers[1]._replace(log=((0, 0),))))
    assert min_isr_durability(cfg, other) == (
        "r1 at offset 0 is below leader b0's high watermark but held by 1 replica(s), fewer than "
        "min.insync.replicas=2")
    assert min_isr_durability(cfg, s._replace(brokers=(ld, s.brokers[1]._replace(log=((1, 0),))))) is None


def test_group_at_most_once_catches_a_second_processing():
    cfg = make_config("current", consumers=1, records=2, commit="before")
    s = initial(cfg)
    assert group_at_most_once(cfg, s._replace(grp=s.grp._replace(processed=(1, 1)))) is None
    assert group_at_most_once(cfg, s._replace(grp=s.grp._replace(processed=(1, 2)))) == "record d1 was processed twice"


def test_producer_acked_durable_asks_for_every_acknowledged_record_and_no_open_one():
    cfg = make_config("current", producers=1, records=2)
    assert producer_acked_durable(cfg, _producer_state(cfg, (0, 1), ((0, 0),))) == (
        "producer p0's record 1, acknowledged at offset 1, is missing from the leader b0 (epoch 0)")
    # record 1 is still open (-1), failed (-2) or of unknown outcome (-3): not asked for
    for out in (-1, -2, -3):
        assert producer_acked_durable(cfg, _producer_state(cfg, (0, out), ((0, 0),))) is None
