"""The protocol rules of spec/rules.py, one scenario each, as the KIPs state them."""
from spec import GENERATIONS, initial, make_config
from spec import rules
from spec.state import FOLLOWER, LEADER, NONE

ALL = GENERATIONS["current"]


def broker(log, cache, hw=0, role=FOLLOWER, le=0):
    b = initial(make_config(brokers=2)).brokers[1]
    return b._replace(log=tuple(log), cache=tuple(cache), hw=hw, role=role, le=le)


def test_end_offset_for_latest_epoch_is_leo_and_older_is_next_start():
    cache = ((0, 0), (2, 3), (5, 7))
    assert rules.end_offset_for(cache, 9, 5) == 9
    assert rules.end_offset_for(cache, 9, 2) == 7
    assert rules.end_offset_for(cache, 9, 1) == 3      # unknown epoch: start of the next higher


def test_epoch_end_offset_answers_largest_epoch_not_above_request():
    cache = ((0, 0), (2, 3), (5, 7))
    assert rules.epoch_end_offset(cache, 9, 4) == (2, 7)
    assert rules.epoch_end_offset(cache, 9, 5) == (5, 9)
    # Below every cached epoch Kafka answers (requested epoch, first start offset), and
    # UNDEFINED only above every epoch (LeaderEpochFileCache.endOffsetFor).
    assert rules.epoch_end_offset(((3, 0),), 2, 1) == (1, 0)
    assert rules.epoch_end_offset(((3, 0),), 2, 4) == (-1, -1)


def test_hw_truncation_before_kip101_drops_unacknowledged_suffix():
    f = broker([(0, 0), (1, 0)], [(0, 0)], hw=1)
    leader = broker([(0, 0), (1, 0)], [(0, 0)], hw=2, role=LEADER)
    assert rules.truncation_offset(f, leader, frozenset()) == 1          # KIP-101 S1: loses r1
    assert rules.truncation_offset(f, leader, frozenset({"epoch-truncation"})) == 2


def test_kip279_follower_walks_back_to_common_epoch():
    # KIP-279: follower wrote r2@1 in epoch 1 the leader never saw; the leader's epochs are 0, 2.
    f = broker([(0, 0), (2, 1)], [(0, 0), (1, 1)], hw=1)
    leader = broker([(0, 0), (1, 0), (3, 2)], [(0, 0), (2, 2)], hw=1, role=LEADER, le=2)
    kip101 = frozenset({"epoch-truncation"})
    assert rules.truncation_offset(f, leader, kip101) == 2               # keeps the divergent r2
    assert rules.truncation_offset(f, leader, kip101 | {"epoch-end-offset"}) == 1


def test_truncate_on_epoch_change_only_with_kafka_7164():
    f = broker([(0, 0)], [(0, 0)], role=FOLLOWER, le=0)._replace(leader=0, trunc=False)
    assert not rules.must_truncate_on_become_follower(f, 0, 1, frozenset())
    assert rules.must_truncate_on_become_follower(f, 0, 1, frozenset({"truncate-on-epoch-change"}))
    assert rules.must_truncate_on_become_follower(f, 1, 1, frozenset())     # new leader: always
    # not a follower before (a restarted broker told the partition is offline): always, fix or not
    restarted = f._replace(role=NONE, leader=-1)
    assert rules.must_truncate_on_become_follower(restarted, -1, 1, frozenset())


def test_kip966_recovery_never_prefers_a_log_an_unclean_shutdown_emptied():
    """Balanced unclean recovery ranks (last epoch, log end): an empty cache ranks below every
    epoch, so a replica with records wins over an emptied one."""
    kept = broker([(0, 0)], [(0, 0)])
    emptied = broker([], [])
    assert rules.unclean_recovery_choice(0b011, (kept, emptied)) == 0b001
    assert rules.unclean_recovery_choice(0b011, (emptied, kept)) == 0b010


def test_maximal_isr_counts_union_while_pending():
    # A pending removal still counts with KIP-497; without it the leader acts on the committed
    # ISR alone, so a pending addition is ignored (the hazard KIP-497 closed).
    ld = broker([(0, 0)], [(0, 0)], role=LEADER)._replace(isr=0b011, pending=0b001)
    assert rules.hw_members(ld, frozenset({"maximal-isr"})) == 0b011
    assert rules.hw_members(ld, frozenset()) == 0b011
    ld = ld._replace(isr=0b001, pending=0b011)
    assert rules.hw_members(ld, frozenset({"maximal-isr"})) == 0b011
    assert rules.hw_members(ld, frozenset()) == 0b001


def test_min_isr_hw_blocks_advance_below_min_isr():
    ld = broker([(0, 0)], [(0, 0)], role=LEADER)._replace(isr=0b01, pending=-1, pos=(1, -1))
    assert rules.leader_hw(ld, 0, 2, frozenset()) == 1
    assert rules.leader_hw(ld, 0, 2, frozenset({"min-isr-hw"})) == 0


def test_isr_expansion_needs_epoch_start_with_kafka_7128():
    ld = broker([(0, 0), (1, 0), (2, 1)], [(0, 0), (1, 2)], hw=1, role=LEADER, le=1)
    assert rules.may_join_isr(ld, 1, frozenset())
    assert not rules.may_join_isr(ld, 1, frozenset({"isr-expand-epoch-start"}))
    assert rules.may_join_isr(ld, 2, frozenset({"isr-expand-epoch-start"}))


def test_stale_controller_epoch_rejected_only_with_fencing():
    b = broker([], [], le=3)._replace(ce=5)
    assert rules.control_request_accepted(b, 4, 4, frozenset())
    assert not rules.control_request_accepted(b, 4, 4, frozenset({"controller-epoch-fencing"}))
    assert not rules.control_request_accepted(b, 5, 3, ALL)               # leader epoch not newer
