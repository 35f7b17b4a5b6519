"""The read model: what the summaries, the report, the alerts, the CLI and the Dagster UI read from the warehouse,
in one place below all of them (nothing else queries the result tables ad hoc).

- leaderboard.py: the leaderboard cells, headline columns, main metrics and significance level of a version;
- scores.py: per-instance scores of originals, calibration pairs, paired comparisons of two models;
- trace.py: one score back through its completion, prompt, instance, source file and run.
"""
