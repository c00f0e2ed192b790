"""The replica fetcher (Kafka's ReplicaFetcherThread): a follower's loop that truncates as the
generation's rule says, then fetches from the leader (Fetch with replica_id = own id) and hands
each answer to its Partition (impl/partition.py), which decides what to append, cut or take as
its HW. This part only talks: requests out, responses in, back-off on errors.

The connection is anything with `async request(api_key, version, body)` answering objects with
the response's fields (impl.netclient.AsyncConn on the wire; tests pass a scripted one).

Test-only hook: while `pause_file` exists the fetcher stops fetching (after truncating), used to
script the KIP-101 scenarios.
"""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Callable

from impl.netclient import AsyncConn
from impl.partition import Partition
from impl.protocol import codec

log = logging.getLogger("impl.broker")

REPLICA_FETCH_MAX_BYTES = 4 << 20
TRUNCATION_ROUNDS_MAX = 16        # KIP-279 rounds; each strictly lowers the local epoch


class ReplicaFetcher:
    def __init__(self, node_id: int, fixes: frozenset[str], fetch_wait_ms: int, pause_file: Path,
                 leader_address: Callable[[int], tuple[str, int] | None],
                 connect: Callable[[str, int, str], AsyncConn] = AsyncConn):
        self.node_id, self.fixes, self.fetch_wait_ms = node_id, fixes, fetch_wait_ms
        self.pause_file = pause_file
        self.leader_address = leader_address
        self.connect = connect

    def _epoch_field(self, epoch: int) -> int:
        """The current leader epoch our requests carry: ours with KIP-320, else "none"."""
        return epoch if "fetch-epoch-fencing" in self.fixes else -1

    async def run(self, p: Partition, leader: int, epoch: int) -> None:
        """Follow `leader` at `epoch` until superseded. Started on every LeaderAndIsr that makes
        us a follower; its task is cancelled by the next one."""
        conn = None
        backoff = 0.05
        try:
            while p.role == "follower" and p.leader == leader and p.leader_epoch == epoch:
                addr = self.leader_address(leader)
                if addr is None:
                    await asyncio.sleep(0.1)
                    continue
                if conn is None:
                    conn = self.connect(addr[0], addr[1], f"replica-{self.node_id}")
                try:
                    if p.needs_truncation:
                        await self.truncate(p, conn, epoch)
                        if not p.fetches_for(epoch):
                            break        # superseded meanwhile: the flag is the new fetcher's
                        p.truncation_done(epoch)
                    if self.pause_file.exists():      # test hook: truncate, but fetch nothing
                        await asyncio.sleep(0.05)
                        continue
                    await self.fetch_once(p, conn, epoch)
                    backoff = 0.05
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError) as e:
                    log.info("fetcher %s-%d -> %d: %s", p.topic, p.index, leader, e)
                    if conn:
                        conn.close()
                    conn = None
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
        except asyncio.CancelledError:
            pass
        finally:
            if conn:
                conn.close()

    async def truncate(self, p: Partition, conn, epoch: int) -> None:
        """Truncate before fetching: by the HW without `epoch-truncation`, else by the leader's
        OffsetsForLeaderEpoch answers (KIP-101), round after round (KIP-279; bounded by
        TRUNCATION_ROUNDS_MAX -- past it the fetcher fetches from where it got to, and the
        leader's out-of-range answer or the next truncation takes over)."""
        if "epoch-truncation" not in self.fixes:
            p.truncate_by_hw()
            return
        for _ in range(TRUNCATION_ROUNDS_MAX):
            req_epoch = p.log.epochs.latest_epoch()
            if req_epoch < 0:
                return                # empty log: nothing to truncate
            resp = await conn.request(23, 3, {
                "replica_id": self.node_id,
                "topics": [{"topic": p.topic, "partitions": [{
                    "partition": p.index, "current_leader_epoch": self._epoch_field(epoch),
                    "leader_epoch": req_epoch}]}]})
            if not p.fetches_for(epoch):
                return                # superseded while waiting (see Partition.fetches_for)
            r = resp.topics[0].partitions[0]
            if r.error_code:
                raise ConnectionError(f"OffsetsForLeaderEpoch error {r.error_code}")
            if p.truncation_round(req_epoch, r.leader_epoch, r.end_offset):
                return

    async def fetch_once(self, p: Partition, conn, epoch: int) -> None:
        fetch_offset = p.log.leo
        resp = await conn.request(1, 12, {
            "replica_id": self.node_id, "max_wait_ms": self.fetch_wait_ms, "min_bytes": 1,
            "max_bytes": REPLICA_FETCH_MAX_BYTES, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": p.topic, "partitions": [{
                "partition": p.index, "current_leader_epoch": self._epoch_field(epoch),
                "fetch_offset": fetch_offset, "last_fetched_epoch": -1, "log_start_offset": p.log.log_start_offset,
                "partition_max_bytes": REPLICA_FETCH_MAX_BYTES}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        if not p.fetches_for(epoch):
            return
        r = resp.responses[0].partitions[0]
        if r.error_code == codec.OFFSET_OUT_OF_RANGE:
            await self.handle_out_of_range(p, conn, epoch)
            return
        if r.error_code:
            await asyncio.sleep(0.1)
            return
        if r.records and p.log.leo == fetch_offset and not p.append_fetched(bytes(r.records)):
            return
        p.take_leader_hw(r.high_watermark)

    async def handle_out_of_range(self, p: Partition, conn, epoch: int) -> None:
        """Pre-KIP-101 behaviour kept in all generations: when our LEO is past the leader's,
        truncate to the leader's LEO; below its log start, restart at its log start."""
        resp = await conn.request(2, 4, self._list_offsets(p, -1))
        if not p.fetches_for(epoch):
            return
        if p.out_of_range(resp.topics[0].partitions[0].offset):
            return
        resp = await conn.request(2, 4, self._list_offsets(p, -2))
        if not p.fetches_for(epoch):
            return
        p.restart_at_log_start(resp.topics[0].partitions[0].offset)

    def _list_offsets(self, p: Partition, timestamp: int) -> dict:
        return {"replica_id": self.node_id, "isolation_level": 0, "topics": [
            {"name": p.topic, "partitions": [{"partition_index": p.index, "current_leader_epoch": -1,
                                              "timestamp": timestamp}]}]}
