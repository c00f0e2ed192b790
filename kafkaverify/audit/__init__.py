"""The ordering audit (`kafkaverify audit-ordering`): for each producer setting, what the model
allows (settings.py, model.py), what real clients on real brokers show under faults
(broker.py, over the nemesis), where the two agree (matrix.py), rendered as Markdown and HTML
(report.py)."""
