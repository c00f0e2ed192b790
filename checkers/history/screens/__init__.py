"""The screens: the fast implementations of the per-partition rules, which flag partitions
instead of deciding anomalies. A flag means "the oracle must look" (checkers/history/oracle);
a partition no screen flags is clean, and its verdict comes from the screen's counts. A
screen may flag a partition without an anomaly, never miss one with an anomaly or a note.

  columnar.py  the polars screen over Arrow/polars frames of one or many runs: `lean_plan`
               (encode + prepare), `pair`, `screen` -> Screen; `screen_runs` for mining.
               Its one-pass scans are compiled in _scan.c (module checkers.history.screens._scan).
  fused.py     the fused C screen (_fused.c, module checkers.history.screens._fused) over one
               history's decoded columns, slice by slice: `fused_screen`, `grouped_screen`.
  _arrow.h     the Arrow C data interface structs both C files read.

setup.py builds the two C extensions in place here (`python setup.py build_ext --inplace`).
The pipeline (checkers/history/pipeline) runs the screens and hands what they flag to the
oracle."""
