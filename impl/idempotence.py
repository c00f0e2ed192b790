"""InitProducerId (api key 22): producer ids unique across the cluster, epoch 0.

Ids are handed out in blocks (Kafka's ProducerIdManager with ZooKeeper's
`/latest_producer_id_block`): a broker takes the next block number from the coordination
service with its atomic compare-and-set counter (`increment`) and serves
PRODUCER_ID_BLOCK_SIZE ids from it locally; no two brokers, and no broker before and after a
restart, ever get the same block. The per-partition sequence rules live in impl/producer_state.py.

An InitProducerId with a transactional id is the transaction coordinator's
(impl/txn_handlers.py), which takes its new producer ids from the same allocator.
"""
from __future__ import annotations

import asyncio
import logging

from impl import txn_handlers


log = logging.getLogger("impl.idempotence")

PRODUCER_ID_BLOCK_SIZE = 1000          # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
BLOCK_PATH = "/latest_producer_id_block"
COORDINATOR_NOT_AVAILABLE = 15


class ProducerIdAllocator:
    """One per broker: the current block [next, end) and a lock so concurrent requests never
    take the same id or two blocks at once."""

    def __init__(self) -> None:
        self.next = 0
        self.end = 0
        self.lock = asyncio.Lock()

    async def allocate(self, b) -> int:
        async with self.lock:
            if self.next >= self.end:
                block = await b.cc("increment", b.path(BLOCK_PATH))     # 1, 2, ... cluster-wide
                self.next = (block - 1) * PRODUCER_ID_BLOCK_SIZE
                self.end = self.next + PRODUCER_ID_BLOCK_SIZE
            pid, self.next = self.next, self.next + 1
            return pid


async def init_producer_id(b, req, version):
    out = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    if req.transactional_id:
        return await txn_handlers.init_producer_id(b, req, version)   # the transaction coordinator's
    try:
        out["producer_id"] = await b.producer_ids.allocate(b)
    except Exception as e:          # coordination unavailable: retriable for the client
        log.warning("broker %d: producer id block allocation failed: %s", b.id, e)
        out["error_code"] = COORDINATOR_NOT_AVAILABLE
        return out
    out["producer_epoch"] = 0
    return out
