"""The order pipeline's own tests, on a real three-broker cluster from the kafkaverify plugin.
Every client is recorded (kafka_history); when a test body ends the plugin heals the faults,
reads the topic to its end and checks the history -- lost, duplicated or reordered orders fail
the test with a witness even where these assertions would not notice."""
import pytest

from orders import Ledger, OrderPublisher, make_consumer, make_producer

pytestmark = pytest.mark.kafka_cluster(brokers=3, scope="module")


def test_every_confirmed_order_is_booked(kafka_cluster, kafka_history, kafka_topic):
    topic = kafka_topic(replication_factor=3, min_insync=2)
    pub = OrderPublisher(kafka_history.producer(make_producer(kafka_cluster.bootstrap)), topic)
    for i in range(20):
        assert pub.publish(i, amount=10 * i)
    ledger = Ledger(kafka_history.consumer(make_consumer(kafka_cluster.bootstrap)), topic)
    ledger.run_until(pub.confirmed)
    assert sum(ledger.booked.values()) == sum(10 * i for i in range(20))


def test_confirmed_orders_survive_a_leader_crash(kafka_cluster, kafka_faults, kafka_history, kafka_topic):
    topic = kafka_topic(replication_factor=3, min_insync=2)
    pub = OrderPublisher(kafka_history.producer(make_producer(kafka_cluster.bootstrap)), topic)
    for i in range(10):
        assert pub.publish(i, amount=i)
    kafka_faults.crash(leader_of=(topic, 0))
    for i in range(10, 20):         # during fail-over some may stay unconfirmed: that is allowed
        pub.publish(i, amount=i)
    assert any(i >= 10 for i in pub.confirmed), "no order confirmed after the fail-over"
    ledger = Ledger(kafka_history.consumer(make_consumer(kafka_cluster.bootstrap)), topic)
    ledger.run_until(pub.confirmed)


# Committed offsets go through the group coordinator; one offsets partition keeps the
# cluster's start quick.
@pytest.mark.kafka_cluster(brokers=3, scope="module", offsets_topic_num_partitions=1)
def test_ledger_commits_what_it_booked(kafka_cluster, kafka_history, kafka_topic):
    topic = kafka_topic(replication_factor=3, min_insync=2)
    pub = OrderPublisher(kafka_history.producer(make_producer(kafka_cluster.bootstrap)), topic)
    for i in range(10):
        assert pub.publish(i, amount=i)
    consumer = make_consumer(kafka_cluster.bootstrap, group="ledger")
    ledger = Ledger(kafka_history.consumer(consumer, group="ledger", delivery="at-least-once"), topic, commit=True)
    ledger.run_until(pub.confirmed)
