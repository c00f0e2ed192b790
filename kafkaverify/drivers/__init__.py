"""Recorded clients of any language as driver processes (docs/drivers.md): registry.py names
the drivers (their commands, their clients' defaults), process.py starts one and speaks the
JSON-lines protocol with it, producer.py presents a driver as the nemesis's in-process Producer.
The Python clients (kafka-python, confluent-kafka, aiokafka) stay in-process behind the same
interface (kafkaverify/nemesis/workload.py)."""
