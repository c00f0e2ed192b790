"""Produce answers, as the client sees them: the codes a producer's response carries in the
state (`Prod.resps`) and their Kafka names. A leaf module: the rules (spec/rules.py) decide which
code an answer gets, the views (spec/clients_view.py) print it."""
from __future__ import annotations

OK, NOT_LEADER, NOT_ENOUGH_REPLICAS, OUT_OF_ORDER_SEQUENCE, NETWORK = range(5)
CODE_NAMES = ("OK", "NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "OUT_OF_ORDER_SEQUENCE_NUMBER",
              "NETWORK_EXCEPTION")
