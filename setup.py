"""The compiled part of kafkaverify, all built from this checkout's sources:

- checkers/history/screens/_scan.c, the polars screen's one-pass scans, and
  checkers/history/screens/_fused.c, check-history's fused screen; traces/_edn.c, the EDN reader
  (CPython C API, no dependency but Python's headers);
- the model, spec/*.py, compiled by Cython from the same Python source (no second implementation;
  spec/__init__.py uses a compiled module only when it is newer than its source, and
  KAFKAVERIFY_MODEL=interpreted runs the source). Without Cython, or with
  KAFKAVERIFY_COMPILE_MODEL=0, the model stays interpreted.

Everything else is in pyproject.toml; `pip install -e .` (make setup) builds this too, and
`python setup.py build_ext --inplace` rebuilds it in a checkout. It needs a C compiler and
Python's headers (Debian: build-essential python3-dev; `make system-deps` checks)."""
import os
from pathlib import Path

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
         "-Wno-missing-field-initializers"]
SCREENS = "checkers/history/screens"
extensions = [Extension("checkers.history.screens._scan", sources=[f"{SCREENS}/_scan.c"],
                        depends=[f"{SCREENS}/_arrow.h"], extra_compile_args=FLAGS),
              Extension("checkers.history.screens._fused", sources=[f"{SCREENS}/_fused.c"],
                        depends=[f"{SCREENS}/_arrow.h"], extra_compile_args=FLAGS),
              Extension("traces._edn", sources=["traces/_edn.c"], extra_compile_args=FLAGS)]


def model_extensions() -> list:
    """spec/*.py (but the package's __init__, which chooses between the builds) as Cython
    extensions, or none when Cython is absent or the build is switched off."""
    if os.environ.get("KAFKAVERIFY_COMPILE_MODEL", "1") == "0":
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    sources = sorted(p for p in Path("spec").glob("*.py") if p.name != "__init__.py")
    # annotation_typing off: the model's annotations document, they do not narrow (State is a
    # NamedTuple, which Cython would otherwise reject where a parameter says tuple)
    return cythonize([Extension(f"spec.{p.stem}", [str(p)]) for p in sources],
                     build_dir="build/cython", quiet=True, language_level=3,
                     compiler_directives={"binding": True, "annotation_typing": False})


setup(ext_modules=extensions + model_extensions())
