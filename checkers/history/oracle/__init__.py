"""The oracle: the reference history checkers, obvious and slow by design (Op objects, one
function per rule, each anomaly with its smallest witness and a sentence). The screens
(checkers/history/screens) are tested against it, and the pipeline
(checkers/history/pipeline) hands it every partition a screen flags, so every anomaly any
command reports is built here.

Entry point: checkers.history.oracle.check.check_history(history) -> Verdict (every check, in a
fixed order, under one time limit); check_per_partition without the cycle search.
Rules: index.py (the per-partition facts every rule reads), log_checks.py (Jepsen's Kafka
checker's log rules), linearizable.py (offset-witness linearizability, O(n log n)),
consumer.py (consumer-group offset rules), txns.py (transactions: aborted and precommitted
reads, atomicity, internal send skips), cycles.py (Elle-style dependency cycles across
partitions, transactions as nodes). wgl.py is the exhaustive Wing & Gong search, the oracle's own oracle for
linearizable.py on small histories."""
