"""The compiled part of kafkaverify: checkers/history/screens/_scan.c, the polars screen's
one-pass scans, and checkers/history/screens/_fused.c, check-history's fused screen (CPython C
API, no dependency but Python's headers). Everything else is in
pyproject.toml; `pip install -e .` (make setup) builds this too, and
`python setup.py build_ext --inplace` rebuilds it in a checkout. It needs a C compiler and
Python's headers (Debian: build-essential python3-dev; `make system-deps` checks)."""
from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
         "-Wno-missing-field-initializers"]
SCREENS = "checkers/history/screens"
setup(ext_modules=[Extension("checkers.history.screens._scan", sources=[f"{SCREENS}/_scan.c"],
                             depends=[f"{SCREENS}/_arrow.h"], extra_compile_args=FLAGS),
                   Extension("checkers.history.screens._fused", sources=[f"{SCREENS}/_fused.c"],
                             depends=[f"{SCREENS}/_arrow.h"], extra_compile_args=FLAGS),
                   Extension("traces._edn", sources=["traces/_edn.c"], extra_compile_args=FLAGS)])
