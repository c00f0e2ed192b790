"""Storage: append/read/roll/retention/index lookup/recovery/power loss, on real files."""
from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from impl.storage.log import LogConfig, PartitionLog, power_loss


def batch(values, ts=1000):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=ts + i, key=None, value=v, headers=[])
    return bytes(b.build())


def values(data: bytes):
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        b = DefaultRecordBatch(data[pos:pos + size])
        out += [(r.offset, r.value) for r in b]
        pos += size
    return out


def test_append_assigns_offsets_epochs_and_reads_whole_batches(tmp_path):
    lg = PartitionLog(tmp_path / "t-0")
    assert lg.append_as_leader(batch([b"a", b"b"]), 3)[:2] == (0, 1)
    assert lg.append_as_leader(batch([b"c"]), 5)[:2] == (2, 2)
    assert lg.leo == 3
    # reading from offset 1 returns the whole batch that contains it (starts at 0)
    assert values(lg.read(1, 1 << 20, 3)) == [(0, b"a"), (1, b"b"), (2, b"c")]
    # the upper bound (HW) hides the batch at 2
    assert values(lg.read(0, 1 << 20, 2)) == [(0, b"a"), (1, b"b")]
    assert lg.read(2, 1 << 20, 2) == b""
    # max_bytes=1 still returns one whole batch (KIP-74)
    assert values(lg.read(0, 1, 3)) == [(0, b"a"), (1, b"b")]
    infos = [i for i, _ in lg.batches()]
    assert [i.leader_epoch for i in infos] == [3, 5]
    assert lg.epochs.entries == [(3, 0), (5, 2)]
    assert lg.epochs.end_offset_for(3, lg.leo) == (3, 2)
    assert lg.epochs.end_offset_for(4, lg.leo) == (3, 2)
    assert lg.epochs.end_offset_for(5, lg.leo) == (5, 3)
    assert lg.epochs.end_offset_for(1, lg.leo) == (-1, -1)
    assert DefaultRecordBatch(next(lg.batches())[1]).validate_crc()


def test_an_epoch_that_appended_nothing_is_dropped_from_the_cache(tmp_path):
    """Kafka's LeaderEpochFileCache.assign removes entries starting at or after the new entry's
    start: a leader epoch assigned on an empty log (or at the same offset as the next one) is
    forgotten, so the cache stays strictly monotonic in start offsets and the OffsetsForLeaderEpoch
    answer for the forgotten epoch names the requested epoch (a nemesis run found the broker
    keeping (0, 0) beside (3, 0) and answering epoch 0 where Kafka and the model answer 2)."""
    lg = PartitionLog(tmp_path / "t-0")
    lg.epochs.assign(0, 0)
    lg.epochs.assign(3, 0)
    assert lg.epochs.entries == [(3, 0)]
    assert lg.append_as_leader(batch([b"a"]), 3)[:2] == (0, 0)
    lg.epochs.assign(4, 1)
    lg.epochs.assign(6, 1)
    assert lg.epochs.entries == [(3, 0), (6, 1)]
    # reopened from the checkpoint, the cache is the same
    lg.close()
    assert PartitionLog(tmp_path / "t-0").epochs.entries == [(3, 0), (6, 1)]


def test_roll_index_lookup_time_index_and_reopen(tmp_path):
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    lg = PartitionLog(tmp_path / "t-0", cfg)
    for i in range(60):
        lg.append_as_leader(batch([b"x" * 50, b"%d" % i], ts=10_000 + 10 * i), 0)
    assert len(lg.segments) > 5
    assert len(list(tmp_path.joinpath("t-0").glob("*.log"))) == len(lg.segments)
    for off in (0, 1, 37, 64, 119):
        got = values(lg.read(off, 1, lg.leo))
        assert got[0][0] <= off <= got[-1][0]
    assert lg.offset_for_timestamp(10_000 + 10 * 30) == (60, 10_300)
    assert lg.offset_for_timestamp(10_301) == (61, 10_301)
    assert lg.offset_for_timestamp(99_999) is None
    leo = lg.leo
    lg.close()
    lg2 = PartitionLog(tmp_path / "t-0", cfg)
    assert lg2.leo == leo and lg2.truncated_bytes_on_recovery == 0
    assert values(lg2.read(100, 1 << 20, leo))[0][0] <= 100


def test_retention_by_size_and_time(tmp_path):
    cfg = LogConfig(segment_bytes=500, retention_bytes=1500)
    lg = PartitionLog(tmp_path / "t-0", cfg)
    for i in range(40):
        lg.append_as_leader(batch([b"y" * 60], ts=1000 + i), 0)
    n = len(lg.segments)
    assert lg.apply_retention(now_ms=2000) > 0
    assert lg.size_bytes - lg.segments[0].size < 1500 and len(lg.segments) < n
    assert lg.log_start_offset > 0
    assert lg.read(0, 1 << 20, lg.leo) == b""          # below log start: nothing
    cfg2 = LogConfig(segment_bytes=500, retention_ms=10)
    lg2 = PartitionLog(tmp_path / "u-0", cfg2)
    for i in range(20):
        lg2.append_as_leader(batch([b"y" * 60], ts=1000), 0)
    assert lg2.apply_retention(now_ms=1005) == 0
    assert lg2.apply_retention(now_ms=5000) > 0
    assert len(lg2.segments) == 1                       # the active segment is never deleted


def test_truncate_to_cuts_records_and_epochs(tmp_path):
    cfg = LogConfig(segment_bytes=300)
    lg = PartitionLog(tmp_path / "t-0", cfg)
    for e in range(6):
        lg.append_as_leader(batch([b"%d" % e, b"z" * 40]), e)
    assert lg.leo == 12
    lg.truncate_to(5)      # not a batch boundary: the batch 4..5 goes entirely
    assert lg.leo == 4
    assert [e for e, _ in lg.epochs.entries] == [0, 1]
    assert values(lg.read(0, 1 << 20, 100))[-1][0] == 3
    lg.append_as_leader(batch([b"new"]), 9)
    assert lg.leo == 5 and lg.epochs.entries[-1] == (9, 4)
    lg.close()
    lg = PartitionLog(tmp_path / "t-0", cfg)
    assert lg.leo == 5 and lg.epochs.entries[-1] == (9, 4)


def test_follower_append_keeps_offsets_and_epochs(tmp_path):
    leader = PartitionLog(tmp_path / "l")
    leader.append_as_leader(batch([b"a", b"b"]), 2)
    leader.append_as_leader(batch([b"c"]), 4)
    fol = PartitionLog(tmp_path / "f")
    data = leader.read(0, 1 << 20, leader.leo)
    assert fol.append_as_follower(data) == (0, 2)
    assert fol.append_as_follower(data) is None          # a retried fetch is idempotent
    assert fol.epochs.entries == [(2, 0), (4, 2)]
    assert values(fol.read(0, 1 << 20, 3)) == values(data)


def _last_log(d):
    return sorted(d.glob("*.log"))[-1]


def test_recovery_truncates_torn_tail(tmp_path):
    d = tmp_path / "t-0"
    lg = PartitionLog(d)
    for i in range(5):
        lg.append_as_leader(batch([b"r%d" % i]), 0)
    lg.close()
    p = _last_log(d)
    size = p.stat().st_size
    with open(p, "r+b") as f:
        f.truncate(size - 7)                        # torn write in the last batch
    lg = PartitionLog(d)
    assert lg.leo == 4
    assert lg.truncated_bytes_on_recovery == size - 7 - (size // 5) * 4
    assert p.stat().st_size == (size // 5) * 4
    lg.append_as_leader(batch([b"after"]), 0)
    assert values(lg.read(0, 1 << 20, 5))[-1] == (4, b"after")


def test_recovery_truncates_at_corrupt_crc(tmp_path):
    d = tmp_path / "t-0"
    lg = PartitionLog(d)
    for i in range(5):
        lg.append_as_leader(batch([b"r%d" % i]), 0)
    one = lg.size_bytes // 5
    lg.close()
    p = _last_log(d)
    with open(p, "r+b") as f:
        f.seek(one * 3 - 3)                         # inside batch 2's records
        b = f.read(1)
        f.seek(one * 3 - 3)
        f.write(bytes([b[0] ^ 0xFF]))
    events = []
    lg = PartitionLog(d, on_recovered=lambda leo, cut: events.append((leo, cut)))
    assert lg.leo == 2 and events == [(2, one * 3)]
    # garbage only (not even a header) also recovers to empty without raising
    with open(p, "wb") as f:
        f.write(b"\x00garbage")
    lg.close()
    lg = PartitionLog(d)
    assert lg.leo == 0


def test_power_loss_truncates_unflushed_writes(tmp_path):
    d = tmp_path / "data" / "t-0"
    lg = PartitionLog(d, LogConfig(flush_messages=3))
    lg.append_as_leader(batch([b"a", b"b", b"c"]), 0)    # flushed by policy (3 messages)
    lg.append_as_leader(batch([b"d"]), 0)                # not flushed
    assert lg.leo == 4
    lg.close()
    lost = power_loss(tmp_path / "data")
    assert sum(lost.values()) > 0
    lg = PartitionLog(d)
    assert lg.leo == 3
    # flush by age
    lg2 = PartitionLog(tmp_path / "data" / "u-0", LogConfig(flush_ms=50))
    lg2.append_as_leader(batch([b"a"]), 0, now_ms=0)
    assert not lg2.maybe_flush(now_ms=10)
    assert lg2.maybe_flush(now_ms=60)
    lg2.append_as_leader(batch([b"b"]), 0, now_ms=70)
    lg2.close()
    power_loss(tmp_path / "data")
    assert PartitionLog(tmp_path / "data" / "u-0").leo == 1


def test_hw_checkpoint_survives_and_is_capped_by_leo(tmp_path):
    d = tmp_path / "t-0"
    lg = PartitionLog(d)
    lg.append_as_leader(batch([b"a", b"b"]), 0)
    lg.checkpoint_hw(2)
    lg.close()
    assert PartitionLog(d).checkpointed_hw == 2
    lg = PartitionLog(d)
    lg.truncate_to(1)
    assert lg.checkpointed_hw == 0 or lg.checkpointed_hw <= lg.leo


def test_a_closed_log_never_touches_a_reused_descriptor_number(tmp_path):
    """Segment descriptors are bare numbers: once closed, the number goes to the next file or
    socket the process opens. A second close (a topic deleted while another task still held its
    partition) or a read after the close must fail, not close or read that other file."""
    lg = PartitionLog(tmp_path / "t-0")
    lg.append_as_leader(batch([b"a"]), 0)
    number = lg.segments[0].fd
    lg.close()
    other = tmp_path / "other"
    other.write_bytes(b"not a log segment")
    fd = os.open(other, os.O_RDONLY)
    try:
        if fd != number:            # put the other file exactly on the freed number
            os.dup2(fd, number)
            os.close(fd)
        lg.close()                  # again: must not close the other file
        assert os.fstat(number).st_ino == other.stat().st_ino
        with pytest.raises(OSError):
            lg.read(0, 1 << 20, 1)  # must not serve the other file's bytes
        assert os.pread(number, 3, 0) == b"not"
    finally:
        os.close(number)


def test_a_checkpoint_decided_before_a_truncation_never_lands_after_it(tmp_path):
    """The periodic HW checkpoint runs on an executor thread with an HW read on the loop; a
    truncation on the loop in between writes its own checkpoint. The older decision is dropped,
    so the file never holds an HW above what the log had after the cut."""
    d = tmp_path / "t-0"
    lg = PartitionLog(d)
    for i in range(10):
        lg.append_as_leader(batch([b"v%d" % i]), 0)
    lg.checkpoint_hw(7)
    stale = lg.hw_ticket()            # the loop decides to checkpoint HW 9 off-loop ...
    lg.truncate_to(5)                 # ... a follower truncation runs first: writes 5
    assert (d / "hw-checkpoint").read_text() == "5\n" and lg.checkpointed_hw == 5
    lg.checkpoint_hw(9, stale)        # ... then the executor gets to it: dropped
    assert (d / "hw-checkpoint").read_text() == "5\n" and lg.checkpointed_hw == 5
    for i in range(5):                # the log regrows; a restart must not take HW 9 from disk
        lg.append_as_leader(batch([b"w%d" % i]), 1)
    lg.close()
    assert PartitionLog(d).checkpointed_hw == 5

    # also when nothing needed cutting in the checkpoint itself (it was below the cut)
    lg = PartitionLog(d)
    lg.checkpoint_hw(3)
    stale = lg.hw_ticket()
    lg.truncate_to(6)
    lg.checkpoint_hw(8, stale)
    assert (d / "hw-checkpoint").read_text() == "3\n"
    # a checkpoint decided after the cut (or made on the loop) is written as before
    lg.checkpoint_hw(4, lg.hw_ticket())
    assert (d / "hw-checkpoint").read_text() == "4\n"
    newer = lg.hw_ticket()
    lg.checkpoint_hw(6)               # a later write on the loop wins over an earlier ticket
    lg.checkpoint_hw(5, newer)
    assert (d / "hw-checkpoint").read_text() == "6\n"
    lg.close()
