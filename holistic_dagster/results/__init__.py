"""The read model: what the summaries, the report, the alerts, the gate, the vote page, the HELM exporter, the CLI
and the Dagster UI read from the result tables, in one place below all of them. (The stages and the quality checks
read the tables through their accessors, warehouse/access/; freshness its own step_inputs; `holistic query` runs
the user's own SQL.)

- leaderboard.py: the leaderboard cells, headline columns, main metrics and significance level of a version;
- headline.py: the headline tables every view renders (terminal, Dagster UI, report);
- statistics.py: the leaderboard's bootstrap CIs and win rates; suite_score.py: a suite's mean score;
- scores.py: per-instance scores of originals, calibration pairs, paired comparisons of two models;
- predictions.py: the rows behind the report's predictions and the gate's examples;
- requests.py: latencies and stability, which the alerts grade;
- arena.py: ratings, judges, battles, votes; safety.py: the safety judges' agreement with people;
- partition.py: one partition as a record (the HELM exporter);
- trace.py: one score back through its completion, prompt, instance, source file and run.
"""
