"""The benchmarks: one module per measured job, each run from the repository root as
`python -m benchmarks.NAME` (`make bench` runs model, history and broker; `make mutate` runs
mutate). Not installed with kafkaverify (`pip install .` leaves this folder out); they import
the installed packages only, and need the `test` and `bench` extras
(`pip install -e '.[test,bench]'`). tests/test_benchmarks_import.py keeps each one importable
and its arguments parsing."""
