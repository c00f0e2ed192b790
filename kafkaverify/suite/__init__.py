"""The invariant suite behind `kafkaverify check`: its stages (stages.py), which stages run under
which budget (budget.py), and the run that executes them and writes the reports (run.py)."""
