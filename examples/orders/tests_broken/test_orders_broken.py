"""Broken variants of the order pipeline: each test here is EXPECTED TO FAIL, and the failure
is kafkaverify's witness, not an assertion of the test (the project's own test suite runs this
folder and checks exactly that)."""
import pytest

from orders import OrderPublisher, make_producer


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
    kafka_faults.kill(leader_of=(topic, 0))
    for i in range(5, 10):
        pub.publish(i, amount=i)
