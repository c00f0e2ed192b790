"""The nemesis: fault schedules (traces/schedule.py) run against the real cluster with real
clients, histories judged by checkers/history/, broker traces judged by checkers/conformance.py.
Joins the broker and the model only through traces and histories."""
