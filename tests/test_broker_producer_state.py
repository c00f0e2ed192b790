"""Idempotent-producer state without sockets: the sequence rules as a table (impl.producer_state
.check_append), and on a real PartitionLog on disk: duplicates answered with their original
offsets, rebuild from the batch headers on restart, snapshots bounding the replay, truncation
removing state, follower appends building the same state."""
from __future__ import annotations

import time

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from impl.producer_state import (INVALID_PRODUCER_EPOCH, INT32_MAX, OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 UNKNOWN_PRODUCER_ID, BatchMeta, ProducerEntry, check_append, in_sequence)
from impl.storage.log import DuplicateBatch, PartitionLog, ProducerStateError


def entry(epoch: int, *seqs: tuple[int, int]) -> ProducerEntry:
    """An entry whose retained batches have the given (first, last) sequences, offsets 10 apart."""
    e = ProducerEntry(epoch)
    for i, (a, z) in enumerate(seqs):
        e.batches.append(BatchMeta(a, z, 10 * i, 10 * i + z - a))
    return e


SIX = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]     # the first falls out of the last 5

RULES = [
    # name, entry, (epoch, first_seq, last_seq), expected (kind, error, first_offset)
    ("first batch of a new producer", None, (0, 0, 4), ("append", 0, -1)),
    ("unknown producer, sequence not 0", None, (0, 5, 6), ("error", UNKNOWN_PRODUCER_ID, -1)),
    ("next in sequence", entry(0, (0, 4)), (0, 5, 9), ("append", 0, -1)),
    ("gap", entry(0, (0, 4)), (0, 6, 9), ("error", OUT_OF_ORDER_SEQUENCE_NUMBER, -1)),
    ("duplicate of the last batch", entry(0, (0, 4)), (0, 0, 4), ("duplicate", 0, 0)),
    ("duplicate within the last 5", entry(0, *SIX), (0, 2, 2), ("duplicate", 0, 20)),
    ("duplicate older than the last 5", entry(0, *SIX), (0, 0, 0), ("error", OUT_OF_ORDER_SEQUENCE_NUMBER, -1)),
    ("same first sequence, different length", entry(0, (0, 4)), (0, 0, 3), ("error", OUT_OF_ORDER_SEQUENCE_NUMBER, -1)),
    ("older epoch is fenced", entry(2, (0, 4)), (1, 5, 5), ("error", INVALID_PRODUCER_EPOCH, -1)),
    ("older epoch, even its duplicate", entry(2, (0, 4)), (1, 0, 4), ("error", INVALID_PRODUCER_EPOCH, -1)),
    ("newer epoch restarts at 0", entry(0, (0, 4)), (1, 0, 0), ("append", 0, -1)),
    ("newer epoch must restart at 0", entry(0, (0, 4)), (1, 5, 5), ("error", OUT_OF_ORDER_SEQUENCE_NUMBER, -1)),
    ("sequence wraps at Int32.MAX", entry(0, (INT32_MAX - 1, INT32_MAX)), (0, 0, 3), ("append", 0, -1)),
]


@pytest.mark.parametrize("name,e,batch_,want", RULES, ids=[r[0] for r in RULES])
def test_sequence_rules(name, e, batch_, want):
    v = check_append(e, *batch_)
    assert (v.kind, v.error, v.first_offset) == want, name


def test_in_sequence():
    assert in_sequence(4, 5) and in_sequence(INT32_MAX, 0)
    assert not in_sequence(4, 4) and not in_sequence(4, 6) and not in_sequence(-1, 1)


def idem_batch(pid: int, epoch: int, seq: int, n: int = 1, tag: bytes = b"v") -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=tag + b"%d" % (seq + i), headers=[])
    return bytes(b.build())


def test_log_answers_duplicates_with_original_offsets_and_refuses_gaps(tmp_path):
    lg = PartitionLog(tmp_path / "t-0")
    assert lg.append_as_leader(idem_batch(7, 0, 0, 3), 0)[:2] == (0, 2)
    assert lg.append_as_leader(idem_batch(8, 0, 0, 1), 0)[:2] == (3, 3)      # another producer
    assert lg.append_as_leader(idem_batch(7, 0, 3, 2), 0)[:2] == (4, 5)
    with pytest.raises(DuplicateBatch) as d:
        lg.append_as_leader(idem_batch(7, 0, 0, 3), 0)
    assert (d.value.first_offset, d.value.last_offset) == (0, 2)
    with pytest.raises(ProducerStateError) as e:
        lg.append_as_leader(idem_batch(7, 0, 9, 1), 0)
    assert e.value.code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lg.leo == 6                                    # nothing appended by either
    lg.close()


def test_state_rebuilt_from_log_on_restart_and_snapshot_bounds_the_replay(tmp_path):
    d = tmp_path / "t-0"
    lg = PartitionLog(d)
    for s in range(0, 20, 2):
        lg.append_as_leader(idem_batch(5, 0, s, 2), 0)
    lg.flush()
    lg.close()
    lg = PartitionLog(d)                                  # no snapshot: replays all 10 batches
    assert lg.producers.describe()["5"]["last_seq"] == 19
    with pytest.raises(DuplicateBatch) as dup:
        lg.append_as_leader(idem_batch(5, 0, 16, 2), 0)   # within the last 5 after the rebuild
    assert dup.value.first_offset == 16
    assert lg.producers.take_snapshot() is not None       # state at offset 20
    lg.append_as_leader(idem_batch(5, 0, 20, 2), 0)
    lg.flush()
    lg.close()
    lg = PartitionLog(d)
    assert lg.producers.snapshot_offset == 20
    assert lg.producers.load(lg) == 1                      # only the batch after the snapshot
    assert lg.producers.describe()["5"]["last_seq"] == 21
    lg.close()


def test_truncation_removes_producer_state_and_stale_snapshots(tmp_path):
    lg = PartitionLog(tmp_path / "t-0")
    for s in range(0, 6, 2):
        lg.append_as_leader(idem_batch(5, 0, s, 2), 0)    # offsets 0-5, seqs 0-5
    lg.producers.take_snapshot()                          # at 6
    lg.truncate_to(2)                                     # a follower cutting its divergent tail
    assert lg.producers.describe()["5"]["last_seq"] == 1
    assert not list((tmp_path / "t-0").glob("*06.snapshot"))
    # the batch [2, 3] is no longer a duplicate: appending it again is in sequence
    assert lg.append_as_leader(idem_batch(5, 0, 2, 2, tag=b"again"), 1)[:2] == (2, 3)
    lg.truncate_to(0)
    assert lg.producers.describe() == {}
    lg.close()


def test_follower_appends_build_the_same_state(tmp_path):
    leader, fol = PartitionLog(tmp_path / "l"), PartitionLog(tmp_path / "f")
    leader.append_as_leader(idem_batch(3, 0, 0, 2), 4)
    leader.append_as_leader(idem_batch(3, 1, 0, 1), 4)    # a new epoch restarts the sequence
    fol.append_as_follower(leader.read(0, 1 << 20, leader.leo))
    assert fol.producers.describe() == leader.producers.describe()
    with pytest.raises(ProducerStateError) as e:
        fol.append_as_leader(idem_batch(3, 0, 2, 1), 5)   # the old epoch is fenced after fail-over
    assert e.value.code == INVALID_PRODUCER_EPOCH
    leader.close()
    fol.close()


def test_power_loss_drops_snapshots_above_the_surviving_log(tmp_path):
    from impl.storage.log import LogConfig, power_loss
    d = tmp_path / "t-0"
    lg = PartitionLog(d, LogConfig(flush_messages=2))
    lg.append_as_leader(idem_batch(9, 0, 0, 2), 0)        # flushed by policy
    lg.append_as_leader(idem_batch(9, 0, 2, 1), 0)        # not flushed
    lg.producers.take_snapshot()                          # at 3: above what survives
    lg.close()
    assert power_loss(d)
    lg = PartitionLog(d)
    assert lg.leo == 2 and lg.producers.describe()["9"]["last_seq"] == 1
    assert [p.name for p in d.glob("*.snapshot")] == []
    lg.close()
