"""Graded regression alerts, a feature of its own: grading.py grades each model against its baseline per rule of
resources/alerts.yaml (schema: config/alerts.py) and scenario (critical, warning or ok); delivery.py posts what
fails to a Slack-compatible webhook, with bounded posts, retries and a record of what could not be delivered.
The stage is stages/summaries.grade_alerts; the Dagster wiring (asset, checks, sensor) is in defs/."""
