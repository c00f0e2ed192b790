# Two entry points for a newcomer: `make check` (the invariant suite) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: check test bench setup clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

check: $(STAMP)
	$(BIN)/kafkaverify check

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --timeout 600 -q

bench: $(STAMP)
	$(BIN)/python -m kafkaverify.bench

clean:
	rm -rf $(VENV)
