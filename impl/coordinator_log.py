"""The acks=all append both coordinators make to the internal partition they lead
(`__consumer_offsets` for groups, `__transaction_state` for transactions): the same rules as a
Produce with acks=-1 -- refused below min.insync.replicas, answered once the HW passed the last
record, or REQUEST_TIMED_OUT after the coordinator's timeout -- and Kafka's mapping of an append
error to what a coordinator's client sees (GroupMetadataManager / TransactionStateManager)."""
from __future__ import annotations

import asyncio
import logging

from impl.protocol import codec

log = logging.getLogger("impl.coordinator_log")


def append_error(code: int, message_too_large: int | None = None) -> int:
    """What the coordinator's client sees for an append error: COORDINATOR_NOT_AVAILABLE when the
    partition cannot take it now, NOT_COORDINATOR when this broker no longer leads it;
    MESSAGE_TOO_LARGE as the coordinator names it (groups: INVALID_COMMIT_OFFSET_SIZE)."""
    if code in (codec.UNKNOWN_TOPIC_OR_PARTITION, codec.NOT_ENOUGH_REPLICAS,
                codec.NOT_ENOUGH_REPLICAS_AFTER_APPEND, codec.REQUEST_TIMED_OUT):
        return codec.COORDINATOR_NOT_AVAILABLE
    if code == codec.NOT_LEADER_OR_FOLLOWER:
        return codec.NOT_COORDINATOR
    if code == codec.MESSAGE_TOO_LARGE and message_too_large is not None:
        return message_too_large
    return code if code == 0 else codec.UNKNOWN_SERVER_ERROR


async def append_committed(b, p, batch: bytes, timeout_ms: int,
                           message_too_large: int | None = None) -> tuple[int, int]:
    """Append `batch` to partition `p`, which this broker leads, and wait until it is committed:
    (error as the coordinator's client sees it, base offset or -1). The caller has checked that
    it coordinates `p`; a ProducerStateError (a fenced transactional writer) is the caller's."""
    if not p.produce_allowed(-1):
        return append_error(codec.NOT_ENOUGH_REPLICAS, message_too_large), -1
    try:
        base, last, _n = p.log.append_as_leader(batch, p.leader_epoch)
    except OSError as e:
        log.error("broker %d: %s-%d append failed: %s", b.id, p.topic, p.index, e)
        return codec.UNKNOWN_SERVER_ERROR, -1
    b.event("appended", topic=p.topic, partition=p.index, base_offset=base, last_offset=last,
            leader_epoch=p.leader_epoch, acks=-1)
    p.update_hw()
    p.notify()
    if p.hw <= last:
        fut = asyncio.get_running_loop().create_future()
        p.delayed.append((last, fut))
        try:
            code = await asyncio.wait_for(fut, timeout_ms / 1000)
        except asyncio.TimeoutError:
            code = codec.REQUEST_TIMED_OUT
        if code:
            return append_error(code, message_too_large), base
    return codec.NONE, base
