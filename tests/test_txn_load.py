"""The transaction coordinator and the group's transactional offsets taking over a partition,
without sockets: a real Broker object and real partition logs on disk.

- `__transaction_state`: requests get COORDINATOR_LOAD_IN_PROGRESS while the partition loads;
  afterwards each id's state is its latest record's, a Prepare* transaction is being finished
  (its marker task runs), and on becoming follower the ids are dropped (NOT_COORDINATOR).
- `__consumer_offsets`: a TxnOffsetCommit is appended as a transactional batch and held pending;
  a COMMIT marker makes it the group's offset, an ABORT drops it; a coordinator loading the log
  rebuilds the same from the batches and control records (an open transaction stays pending)."""
from __future__ import annotations

import asyncio

from impl import group_handlers as gh
from impl import group_records as gr
from impl import txn_handlers as th
from impl import txn_records as tr
from impl.broker import Broker, BrokerConfig
from impl.protocol import codec


def _req(api: int, version: int, data: dict):
    r = codec.build(codec.APIS[api][0][version], data, version)
    r.with_header(correlation_id=1, client_id="t")
    return r


def _broker(tmp_path) -> Broker:
    b = Broker(BrokerConfig(node_id=0, port=0, data_dir=str(tmp_path / "b0"), coordinator="unused",
                            offsets_topic_num_partitions=1, transaction_state_num_partitions=1))
    b.topic_assignments[gh.OFFSETS_TOPIC] = {"partitions": {"0": [0]}}
    b.topic_assignments[th.TXN_TOPIC] = {"partitions": {"0": [0]}}
    return b


def _lead(b, topic):
    p = b.get_partition(topic, 0, create=True)
    p.role, p.leader_epoch, p.isr, p.min_insync = "leader", 3, {0}, 1
    p.hw = p.log.leo
    return p


async def _loaded(m, key) -> None:
    for _ in range(200):
        if m.status(key) == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not loaded")


def test_transaction_state_load_finishes_prepared_and_unloads(tmp_path):
    async def scenario():
        b = _broker(tmp_path)
        b.loop = asyncio.get_running_loop()
        p = b.get_partition(th.TXN_TOPIC, 0, create=True)
        recs = [tr.TxnRecord("a", 1, 0, 60000, tr.EMPTY),
                tr.TxnRecord("a", 1, 0, 60000, tr.ONGOING, frozenset({("t", 0)}), 5, 5),
                tr.TxnRecord("a", 1, 0, 60000, tr.PREPARE_COMMIT, frozenset({("t", 0)}), 6, 5),
                tr.TxnRecord("b", 2, 4, 60000, tr.COMPLETE_ABORT, frozenset(), 7, 1)]
        for r in recs:
            p.log.append_as_leader(tr.batch([(tr.key(r.transactional_id), tr.value(r))]), 0)
        p = _lead(b, th.TXN_TOPIC)
        b.topic_assignments["t"] = {"partitions": {"0": [1]}}        # its leader unknown: markers retry
        m = b.txns
        m.on_partition_role(p)
        assert m.status("a") == codec.COORDINATOR_LOAD_IN_PROGRESS
        r = await th.end_txn(b, _req(26, 3, {"transactional_id": "a", "producer_id": 1, "producer_epoch": 0,
                                             "committed": True}), 3)
        assert r["error_code"] == codec.COORDINATOR_LOAD_IN_PROGRESS
        await _loaded(m, "a")
        assert (m.txns["a"].state, m.txns["a"].partitions, m.coordinator_epoch[0]) == \
            (tr.PREPARE_COMMIT, frozenset({("t", 0)}), 3)
        assert (m.txns["b"].state, m.txns["b"].epoch) == (tr.COMPLETE_ABORT, 4)
        assert "a" in m.markers and "b" not in m.markers        # the prepared commit is being finished
        # meanwhile the same EndTxn is CONCURRENT_TRANSACTIONS, a new producer instance waits too
        r = await th.end_txn(b, _req(26, 3, {"transactional_id": "a", "producer_id": 1, "producer_epoch": 0,
                                             "committed": True}), 3)
        assert r["error_code"] == codec.CONCURRENT_TRANSACTIONS
        r = await th.init_producer_id(b, _req(22, 4, {"transactional_id": "a", "transaction_timeout_ms": 60000,
                                                      "producer_id": -1, "producer_epoch": -1}), 4)
        assert r["error_code"] == codec.CONCURRENT_TRANSACTIONS
        # a new incarnation of "b": epoch bumped, written, answered
        r = await th.init_producer_id(b, _req(22, 4, {"transactional_id": "b", "transaction_timeout_ms": 60000,
                                                      "producer_id": -1, "producer_epoch": -1}), 4)
        assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (0, 2, 5)
        last = list(tr.data_records(p.log.read(p.log.leo - 1, 1 << 20, p.log.leo)))[-1]
        assert tr.decode(last[1], last[2]).producer_epoch == 5
        p.role = "follower"
        m.on_partition_role(p)
        assert m.status("a") == codec.NOT_COORDINATOR and not m.txns and not m.markers
        m._ticker.cancel()
        b.trace.close()
    asyncio.run(scenario())


def _txn_commit(gid, offset, pid, epoch, version=3, generation=-1, member=""):
    return _req(28, version, {"transactional_id": "tx", "group_id": gid, "producer_id": pid, "producer_epoch": epoch,
                              "generation_id": generation, "member_id": member, "group_instance_id": None,
                              "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                                       "committed_leader_epoch": -1,
                                                                       "committed_metadata": ""}]}]})


def test_transactional_offsets_pending_until_their_marker_and_rebuilt_on_load(tmp_path):
    async def scenario():
        b = _broker(tmp_path)
        b.loop = asyncio.get_running_loop()
        p = _lead(b, gh.OFFSETS_TOPIC)
        m = b.groups
        m.on_partition_role(p)
        await _loaded(m, "g")
        for gid, off, pid in (("g", 10, 7), ("h", 20, 8), ("k", 30, 9)):
            r = await gh.txn_offset_commit(b, _txn_commit(gid, off, pid, 1), 3)
            assert r["topics"][0]["partitions"][0]["error_code"] == 0
        assert "g" not in m.groups or ("t", 0) not in m.groups["g"].offsets       # pending, not committed
        assert set(m.txn_offsets) == {7, 8, 9}
        # a stable-offsets fetch (KIP-447) sees the pending commit as unstable; a plain one does not
        for stable, code in ((True, codec.UNSTABLE_OFFSET_COMMIT), (False, 0)):
            f = await gh.offset_fetch(b, _req(9, 7, {"group_id": "g", "require_stable": stable,
                                                     "topics": [{"name": "t", "partition_indexes": [0]}]}), 7)
            assert (f["topics"][0]["partitions"][0]["error_code"], f["topics"][0]["partitions"][0]["committed_offset"]) \
                == (code, -1)
        # the markers: 7 commits, 8 aborts (9 stays open)
        for pid, commit in ((7, True), (8, False)):
            p.log.append_marker(pid, 1, commit, 0, p.leader_epoch)
            m.txn_marker_written(0, pid, commit)
        p.hw = p.log.leo
        assert m.groups["g"].offsets[("t", 0)].offset == 10
        assert "h" not in m.groups or ("t", 0) not in m.groups["h"].offsets
        assert set(m.txn_offsets) == {9}
        # an older epoch of producer 9 is fenced at the append (the log's INVALID_PRODUCER_EPOCH)
        r = await gh.txn_offset_commit(b, _txn_commit("k", 31, 9, 0), 3)
        assert r["topics"][0]["partitions"][0]["error_code"] == codec.INVALID_PRODUCER_EPOCH
        # a fresh coordinator for the same log rebuilds the same view
        b2 = _broker(tmp_path)
        b2.loop = b.loop
        p.log.flush()
        p2 = _lead(b2, gh.OFFSETS_TOPIC)
        m2 = b2.groups
        m2.on_partition_role(p2)
        await _loaded(m2, "g")
        assert m2.groups["g"].offsets[("t", 0)].offset == 10
        assert "h" not in m2.groups or ("t", 0) not in m2.groups["h"].offsets
        assert {pid: {k: o.offset for k, o in offs.items()} for pid, offs in m2.txn_offsets.items()} == \
            {9: {("k", "t", 0): 30}}
        m2.txn_marker_written(0, 9, True)
        assert m2.groups["k"].offsets[("t", 0)].offset == 30
        for mm, bb in ((m, b), (m2, b2)):
            mm._ticker.cancel()
            bb.trace.close()
    asyncio.run(scenario())
