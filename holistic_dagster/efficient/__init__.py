"""Evaluation sized to the decision, pure numerics (no Dagster, no warehouse): a 2PL item response fit (irt.py),
anchors and estimates with intervals measured on the population (anchors.py), a group-sequential regression test
and sample-size planning (sequential.py), and their validation on a models x items matrix (validation.py)."""
