"""The parts of the pytest plugin (kafkaverify/pytest_plugin.py, the `pytest11` entry point):
the fault handle a test breaks its cluster with (fault_handle.py) and the history recorder
wired to the test's own Kafka clients (client_history.py)."""
