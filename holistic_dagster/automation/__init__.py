"""What runs, decided without Dagster: planning.py (what identifies a model, which runs a registry sensor tick
requests, which evaluated partitions are stale) and freshness.py (which steps of an evaluation can be skipped
because their inputs are unchanged). The sensors and schedules of defs/ and the CLI turn these into runs."""
