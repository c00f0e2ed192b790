"""A coordinator taking over a `__consumer_offsets` partition, without sockets: a real Broker
object and a real partition log on disk, records in Kafka's schemas written into it, then
leadership handed to the GroupManager. While it loads, requests get Kafka's answers
(COORDINATOR_LOAD_IN_PROGRESS; SyncGroup REBALANCE_IN_PROGRESS; Heartbeat NONE); afterwards the
groups and offsets are those of the log (latest record per key, tombstones delete); on becoming
follower the groups are unloaded and requests get NOT_COORDINATOR."""
from __future__ import annotations

import asyncio

from impl import group_coordinator as gc
from impl import group_handlers as gh
from impl import group_records as gr
from impl.broker import Broker, BrokerConfig
from impl.protocol import codec

PARTITIONS = 1          # every group maps to partition 0


def _req(api: int, version: int, data: dict):
    r = codec.build(codec.APIS[api][0][version], data, version)
    r.with_header(correlation_id=1, client_id="t")
    return r


def _broker(tmp_path) -> Broker:
    b = Broker(BrokerConfig(node_id=0, port=0, data_dir=str(tmp_path / "b0"), coordinator="unused",
                            offsets_topic_num_partitions=PARTITIONS))
    b.topic_assignments[gh.OFFSETS_TOPIC] = {"partitions": {"0": [0]}}
    return b


def _write_log(p) -> None:
    member = gr.MemberRecord("m1", None, "c", "", 30000, 10000, b"sub", b"asg")
    old = gr.GroupRecord("g", False, "consumer", 3, "range", "m1", 1, (member,))
    new = gr.GroupRecord("g", False, "consumer", 4, "range", "m1", 2, (member,))
    recs = [(gr.offset_key("g", "t", 0), gr.offset_value(5, -1, "", 1)),
            (gr.group_key("g"), gr.group_value(old)),
            (gr.offset_key("g", "t", 0), gr.offset_value(9, 2, "m", 2)),       # later commit wins
            (gr.offset_key("g", "t", 1), gr.offset_value(3, -1, "", 2)),
            (gr.offset_key("g", "t", 1), None),                                # tombstone
            (gr.group_key("g"), gr.group_value(new)),
            (gr.offset_key("plain", "t", 0), gr.offset_value(11, -1, "", 3)),  # offsets only
            (gr.group_key("gone"), gr.group_value(old)), (gr.group_key("gone"), None)]
    for i in range(0, len(recs), 3):          # several batches
        p.log.append_as_leader(gr.batch(recs[i:i + 3]), 0)


def test_load_then_serve_then_unload(tmp_path):
    async def scenario():
        b = _broker(tmp_path)
        b.loop = asyncio.get_running_loop()
        p = b.get_partition(gh.OFFSETS_TOPIC, 0, create=True)
        _write_log(p)
        p.role, p.leader_epoch, p.isr, p.min_insync = "leader", 1, {0}, 1
        p.hw = p.log.leo
        m = b.groups
        m.on_partition_role(p)
        # loading: the loader task has not run yet
        assert m.status("g") == codec.COORDINATOR_LOAD_IN_PROGRESS
        hb = await gh.heartbeat(b, _req(12, 3, {"group_id": "g", "generation_id": 4, "member_id": "m1"}), 3)
        assert hb["error_code"] == codec.NONE
        sy = await gh.sync_group(b, _req(14, 3, {"group_id": "g", "generation_id": 4, "member_id": "m1",
                                                 "assignments": []}), 3)
        assert sy["error_code"] == codec.REBALANCE_IN_PROGRESS
        jg = await gh.join_group(b, _req(11, 5, {"group_id": "g", "session_timeout_ms": 10000,
                                                 "rebalance_timeout_ms": 10000, "member_id": "",
                                                 "protocol_type": "consumer", "protocols": []}), 5)
        assert jg["error_code"] == codec.COORDINATOR_LOAD_IN_PROGRESS
        for _ in range(100):
            if m.status("g") == 0:
                break
            await asyncio.sleep(0.01)
        assert m.owned == {0: "loaded"}
        g = m.groups["g"]
        assert (g.state, g.generation, list(g.members)) == (gc.STABLE, 4, ["m1"])
        assert {tp: o.offset for tp, o in g.offsets.items()} == {("t", 0): 9}
        assert g.offsets[("t", 0)].leader_epoch == 2 and g.offsets[("t", 0)].metadata == "m"
        assert m.groups["plain"].state == gc.EMPTY and m.groups["plain"].offsets[("t", 0)].offset == 11
        assert "gone" not in m.groups
        # the loaded member goes on at its generation, no rebalance
        hb = await gh.heartbeat(b, _req(12, 3, {"group_id": "g", "generation_id": 4, "member_id": "m1"}), 3)
        assert hb["error_code"] == 0
        fetched = await gh.offset_fetch(b, _req(9, 7, {"group_id": "g", "topics": None}), 7)
        assert [(t["name"], q["partition_index"], q["committed_offset"]) for t in fetched["topics"]
                for q in t["partitions"]] == [("t", 0, 9)]
        # a commit is appended (acks=all with ISR {0}: the HW moves at once) and cached
        oc = await gh.offset_commit(b, _req(8, 8, {"group_id": "g", "generation_id_or_member_epoch": 4,
                                                   "member_id": "m1", "topics": [{"name": "t", "partitions": [
                                                       {"partition_index": 0, "committed_offset": 12}]}]}), 8)
        assert oc["topics"][0]["partitions"][0]["error_code"] == 0
        assert g.offsets[("t", 0)].offset == 12
        end = p.log.leo
        # leadership moves away: unloaded, and the log holds the commit for the next coordinator
        p.role = "follower"
        m.on_partition_role(p)
        assert m.status("g") == codec.NOT_COORDINATOR and not m.groups
        hb = await gh.heartbeat(b, _req(12, 3, {"group_id": "g", "generation_id": 4, "member_id": "m1"}), 3)
        assert hb["error_code"] == codec.NOT_COORDINATOR
        last = list(gr.data_records(p.log.read(end - 1, 1 << 20, end)))[-1]
        assert gr.decode(last[1], last[2]) == gr.OffsetRecord("g", "t", 0, 12, -1, "", gr.decode(last[1], last[2]).commit_ts)
        m._ticker.cancel()
        b.trace.close()
    asyncio.run(scenario())


def test_commit_refused_below_min_insync_and_waits_for_the_hw(tmp_path):
    async def scenario():
        b = _broker(tmp_path)
        b.loop = asyncio.get_running_loop()
        p = b.get_partition(gh.OFFSETS_TOPIC, 0, create=True)
        p.role, p.leader_epoch, p.isr, p.min_insync, p.replicas = "leader", 1, {0}, 2, [0, 1]
        m = b.groups
        m.on_partition_role(p)
        for _ in range(1000):                      # wait for the load, bounded (10 s)
            if m.owned.get(0) == "loaded":
                break
            await asyncio.sleep(0.01)
        assert m.owned.get(0) == "loaded"
        commit = _req(8, 8, {"group_id": "solo", "generation_id_or_member_epoch": -1, "member_id": "",
                             "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]})
        oc = await gh.offset_commit(b, commit, 8)
        # NOT_ENOUGH_REPLICAS maps to COORDINATOR_NOT_AVAILABLE (GroupMetadataManager)
        assert oc["topics"][0]["partitions"][0]["error_code"] == codec.COORDINATOR_NOT_AVAILABLE
        assert p.log.leo == 0                      # refused before appending
        # ISR {0, 1}: answered only once the follower's fetch moved the HW past the record
        p.isr = {0, 1}
        p.maximal_isr = {0, 1}
        p.follower_leo = {1: 0}
        task = asyncio.ensure_future(gh.offset_commit(b, commit, 8))
        await asyncio.sleep(0.2)
        assert not task.done() and p.log.leo == 1 and p.hw == 0
        p.follower_leo = {1: 1}
        p.update_hw()
        oc = await asyncio.wait_for(task, 5)
        assert oc["topics"][0]["partitions"][0]["error_code"] == 0
        assert m.groups["solo"].offsets[("t", 0)].offset == 1
        m._ticker.cancel()
        b.trace.close()
    asyncio.run(scenario())
