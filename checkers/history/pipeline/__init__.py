"""The pipeline: the screens (checkers/history/screens) first, then the oracle
(checkers/history/oracle) on the partitions they flag; the verdicts of partitions nothing
flags come from the screens' counts. So every anomaly and witness is the oracle's, at the
screens' cost for clean partitions.

Entry points:
  file_check.check_file(path) -> FileCheck   one history file end to end: what `check-history`
                                             runs (fused C screen, polars screen, oracle).
  judge.judge(paired, fetch, headers)        a frame of one or many runs (polars screen, then
                                             oracle): what file_check and mining (mine.py) call.
tests/test_history_columnar.py pins the pipeline's verdicts to the oracle's."""
