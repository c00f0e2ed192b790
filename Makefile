# Two entry points for a newcomer: `make check` (the invariant suite) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PKGS := zookeeper chromium nftables iproute2
# the drivers' toolchains and clients (docs/drivers.md)
# (node and npm are looked for as commands: a nodesource nodejs carries its own npm)
DRIVER_PKGS := pkg-config librdkafka-dev libjansson-dev golang-go golang-github-shopify-sarama-dev

.PHONY: check test bench mutate system-deps setup clean build-drivers

# setup.py builds the C extensions (checkers/history/screens/_scan.c, _fused.c, traces/_edn.c) and
# the compiled model (Cython over spec/*.py) in place: a change to any reinstalls. A model module
# older than its source is never used (spec/__init__.py), so a stale build only costs speed.
$(STAMP): pyproject.toml setup.py checkers/history/screens/_scan.c checkers/history/screens/_fused.c checkers/history/screens/_arrow.h traces/_edn.c $(wildcard spec/*.py)
	@command -v cc >/dev/null || { echo "no C compiler (cc): kafkaverify builds checkers/history/screens/_scan.c; run make system-deps (or apt-get install build-essential python3-dev)"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@$(BIN)/python -c "import spec; print('model:', spec.BUILD, '(KAFKAVERIFY_MODEL=interpreted runs the source)' if spec.BUILD == 'compiled' else '(Cython or a compiler missing: the source runs)')"
	touch $(STAMP)

setup: $(STAMP) build-drivers

# The recorded clients of other languages (docs/drivers.md): kafkajs from npm (package-lock.json),
# the librdkafka C driver and the sarama Go driver (offline, GOPATH mode, Debian's sources).
# Each is built when its toolchain is there; the line says which were built.
build-drivers:
	@built=""; missing=""; \
	if command -v npm >/dev/null; then (cd drivers/kafkajs && npm ci --silent --no-audit --no-fund) && built="$$built kafkajs"; \
	else missing="$$missing kafkajs(npm)"; fi; \
	if pkg-config --exists rdkafka jansson 2>/dev/null; then $(MAKE) -s -C drivers/librdkafka && built="$$built librdkafka"; \
	else missing="$$missing librdkafka(librdkafka-dev,libjansson-dev)"; fi; \
	if command -v go >/dev/null && [ -d /usr/share/gocode/src/github.com/Shopify/sarama ]; then \
	  $(MAKE) -s -C drivers/sarama 2>&1 | grep -v -e warning -e ZSTD -e zstd -e '^ *[0-9]* |' -e '^ *|' -e cgo-gcc-prolog; \
	  [ -x drivers/sarama/kv-sarama ] && built="$$built sarama"; \
	else missing="$$missing sarama(golang-go,golang-github-shopify-sarama-dev)"; fi; \
	echo "drivers built:$${built:- none}$${missing:+; not built:$$missing}"

# Debian packages the tests use: a real ZooKeeper (and Java), headless Chromium, and nftables +
# iproute2 for the nemesis's real network partitions (network namespace + drop rules); and a C
# compiler with Python's headers, which installing kafkaverify needs (checkers/history/screens/_scan.c).
PY_H = $(PY) -c "import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"
system-deps:
	@missing=""; \
	command -v cc >/dev/null || missing="$$missing build-essential"; \
	$(PY_H) || missing="$$missing python3-dev"; \
	[ -d /usr/share/zookeeper ] || missing="$$missing zookeeper"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v nft >/dev/null || missing="$$missing nftables"; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	for p in $(DRIVER_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi; \
	  echo "installing Debian packages:$$missing"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v java >/dev/null || { echo "java not found: ZooKeeper needs a JRE (apt-get install default-jre-headless)"; exit 1; }
	@command -v cc >/dev/null || { echo "no C compiler (cc): installing kafkaverify builds checkers/history/screens/_scan.c (apt-get install build-essential)"; exit 1; }
	@$(PY_H) || { echo "Python.h not found for $(PY): installing kafkaverify builds a C extension (apt-get install python3-dev, or a Python built with its headers)"; exit 1; }

check: $(STAMP)
	$(BIN)/kafkaverify check

test: system-deps $(STAMP) build-drivers
	KAFKAVERIFY_REQUIRE_ALL=1 $(BIN)/python -m pytest -n 2 --timeout 600 -q

# The benchmarks live in benchmarks/ (not installed): run from the repository root, where
# `python -m` finds them.
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m benchmarks.model
	$(BIN)/python -m benchmarks.history
	$(BIN)/python -m benchmarks.broker

# Mutation score of the protocol code (benchmarks/mutate.py): hours on 2 cores for every
# file; MUTATE_ARGS narrows it, e.g. MUTATE_ARGS="spec/rules.py".
mutate: $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,mutate]'
	nice -n 19 $(BIN)/python -m benchmarks.mutate $(MUTATE_ARGS)

clean:
	rm -rf $(VENV)
