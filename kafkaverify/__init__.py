"""kafkaverify: the CLI, the suite runner and the reports."""
__version__ = "0.1.0"
