"""History checkers: client histories of a Kafka-style log (traces/history.py) checked for
Jepsen-style anomalies, per-partition linearizability, consumer-offset rules and dependency
cycles. Entry point: checkers.history.run.check_history."""
