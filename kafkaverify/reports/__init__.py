"""The reports: a counterexample as a story (story.py), and what `kafkaverify check` leaves for
a CI system, JUnit XML, JSON, artefacts and the HTML summary (ci.py). Rendered from results
only; nothing here decides a verdict."""
