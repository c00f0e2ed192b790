"""The click commands of `kafkaverify`, one module per area; each defines `register(group)`
(kafkaverify/cli.py). A command parses and checks its options, then calls the module that does
the work: kafkaverify/runs/ (model checking, proofs), kafkaverify/suite/, kafkaverify/nemesis/,
kafkaverify/audit/, checkers/ and impl/."""
