# Two entry points for a newcomer: `make check` (the invariant suite) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PKGS := zookeeper chromium nftables iproute2

.PHONY: check test bench mutate system-deps setup clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# Debian packages the tests use: a real ZooKeeper (and Java), headless Chromium, and nftables +
# iproute2 for the nemesis's real network partitions (network namespace + drop rules).
system-deps:
	@missing=""; \
	[ -d /usr/share/zookeeper ] || missing="$$missing zookeeper"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v nft >/dev/null || missing="$$missing nftables"; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi; \
	  echo "installing Debian packages:$$missing"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v java >/dev/null || { echo "java not found: ZooKeeper needs a JRE (apt-get install default-jre-headless)"; exit 1; }

check: $(STAMP)
	$(BIN)/kafkaverify check

test: system-deps $(STAMP)
	KAFKAVERIFY_REQUIRE_ALL=1 $(BIN)/python -m pytest -n 2 --timeout 600 -q

bench: $(STAMP)
	$(BIN)/python -m kafkaverify.bench.model
	$(BIN)/python -m kafkaverify.bench.history
	$(BIN)/python -m kafkaverify.bench.broker

# Mutation score of the protocol code (kafkaverify/bench/mutate.py): hours on 2 cores for every
# file; MUTATE_ARGS narrows it, e.g. MUTATE_ARGS="spec/rules.py".
mutate: $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,mutate]'
	nice -n 19 $(BIN)/python -m kafkaverify.bench.mutate $(MUTATE_ARGS)

clean:
	rm -rf $(VENV)
