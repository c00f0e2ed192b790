"""History checkers: client histories of a Kafka-style log (traces/history.py) checked for
Jepsen-style anomalies, per-partition linearizability, consumer-offset rules and dependency
cycles.

Each per-partition rule is written three times, in three layers named by their role (house
style §7, §15: a fast implementation beside the obvious one):

  oracle/     the reference: the obvious object checkers over Op objects, slow and plainly
              correct; they alone decide anomalies and build witnesses and explanations.
              Entry point: checkers.history.oracle.check.check_history(history).
  screens/    the fast screens: the polars screen (screens/columnar.py, with its compiled
              scans screens/_scan.c) and the fused C screen (screens/fused.py over
              screens/_fused.c). A screen flags partitions that may hold an anomaly and
              counts what the verdicts of the others need; it never decides an anomaly, and
              must never miss one.
  pipeline/   the join: screens first, flagged partitions to the oracle, verdicts of the clean
              ones from the screens' counts. Entry points:
              checkers.history.pipeline.file_check.check_file(path) (one history file: what
              `check-history` runs) and checkers.history.pipeline.judge.judge(paired frame)
              (many runs at once: what `kafkaverify mine` runs through mine.py).

"The columnar kernel" (as BENCHMARKS.md says) is the polars screen with pipeline/judge.py. The
pipeline's verdicts are the oracle's by construction (the oracle builds every anomaly), and the
tests pin it: tests/test_history_columnar.py (pipeline == oracle on the corpus and on seeded
histories), tests/test_fused.py (the fused screen never misses what the oracle reports),
tests/test_history_linearizable.py (the oracle's offset-witness linearizability against the
exhaustive oracle/wgl.py).

Beside the three layers: result.py (the three-valued verdicts all layers return), generate.py,
seeding.py and gen_runs.py (seeded histories and runs with planted anomalies), shrink.py
(witness-driven shrinking, through the oracle), report_html.py (the HTML view of a verdict),
mine.py, spark_job.py and mine_report.py (mining bulk runs, locally or on Spark)."""
