"""Produce answers, as the client sees them: the codes a producer's response carries in the
state (`Prod.resps`) and their Kafka names. A leaf module: the rules (spec/rules.py) decide which
code an answer gets, the views (spec/clients_view.py) print it."""
from __future__ import annotations

OK, NOT_LEADER, NOT_ENOUGH_REPLICAS, OUT_OF_ORDER_SEQUENCE, NETWORK = range(5)
CODE_NAMES = ("OK", "NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "OUT_OF_ORDER_SEQUENCE_NUMBER",
              "NETWORK_EXCEPTION")

# Transactions (spec/transaction.py): a client's phase, and the transaction states of
# TransactionMetadata as the __transaction_state records carry them.
TXN_PHASES = ("init", "ready", "in-txn", "must-abort", "must-bump", "fenced", "committing",
              "aborting")
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = range(6)
TXN_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
              "CompleteAbort")


def txn_record(code: int) -> tuple[int, int, int]:
    """A __transaction_state record's value as (state, partitions mask, ghost transaction), from
    the one integer the write table keeps it as (`txn_code`)."""
    return (code >> 4) & 15, code & 15, (code >> 8) - 1


def txn_code(state: int, parts: int, ghost: int) -> int:
    return ((ghost + 1) << 8) | (state << 4) | parts
