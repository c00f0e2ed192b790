"""Broken variants of the order pipeline: each test here is EXPECTED TO FAIL, and the failure
is kafkaverify's witness, not an assertion of the test (the project's own test suite runs this
folder and checks exactly that)."""
import pytest

from orders import EagerLedger, OrderPublisher, make_consumer, make_producer


# acks=1 confirms an order once the leader alone has it. The followers are made to lag (their
# replication link is cut; a long replica lag time keeps them in the ISR), so the leader's crash
# hands leadership to a follower without the confirmed orders.
@pytest.mark.kafka_cluster(brokers=3, replica_lag_time_max_ms=60000)
def test_fast_publisher_keeps_confirmed_orders(kafka_cluster, kafka_faults, kafka_history, kafka_topic):
    topic = kafka_topic(replication_factor=3, min_insync=2, assignment={0: [0, 1, 2]})
    kafka_cluster.wait_for_leaders(topic, isr_size=3)
    kafka_faults.stall_replication(1)
    kafka_faults.stall_replication(2)
    pub = OrderPublisher(kafka_history.producer(make_producer(kafka_cluster.bootstrap, acks=1)), topic)
    for i in range(5):
        assert pub.publish(i, amount=i)
    kafka_faults.crash(leader_of=(topic, 0))
    for i in range(5, 10):
        pub.publish(i, amount=i)


# The EagerLedger commits the partition's end offset before it has polled (processed) the
# orders below it, while declaring at-least-once: a crash there would skip them. The history
# shows the commit passing offsets the group had not yet received.
@pytest.mark.kafka_cluster(brokers=3, offsets_topic_num_partitions=1)
def test_eager_ledger_claims_at_least_once(kafka_cluster, kafka_history, kafka_topic):
    topic = kafka_topic(replication_factor=3, min_insync=2)
    pub = OrderPublisher(kafka_history.producer(make_producer(kafka_cluster.bootstrap)), topic)
    for i in range(10):
        assert pub.publish(i, amount=i)
    consumer = make_consumer(kafka_cluster.bootstrap, group="ledger")
    ledger = EagerLedger(kafka_history.consumer(consumer, group="ledger", delivery="at-least-once"), topic)
    ledger.run_until(pub.confirmed)
