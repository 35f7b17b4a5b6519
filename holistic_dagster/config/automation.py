"""resources/automation.yaml (optional): when the `rerun_stale` schedule re-evaluates stale partitions, how often the
daemon's sensors look for work, and whether the `model_registry` sensor evaluates a new model efficiently first
(docs/how-to/efficient.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from holistic_dagster.config.schema import read_yaml, validate
from holistic_dagster.records import Strict


class AutomationSettings(Strict):
    rerun_stale_cron: str = Field("0 3 * * *", min_length=1)  # a cron expression, UTC
    # a new model answers only this many anchors per scenario first (unset: evaluated in full); the
    # `complete_undecided` sensor then completes each scenario whose estimate leaves its place undecided
    efficient_anchors: int | None = Field(None, ge=2)
    # seconds between two looks of the sensors a user waits on (a registry change, new votes, alerts to post, the
    # conditions that bring the leaderboard, regressions and report after scores); the housekeeping ones (abandoned
    # runs, undecided estimates, shadow traffic logs) look half as often
    sensor_interval_seconds: int = Field(30, ge=1)

    @property
    def housekeeping_interval_seconds(self) -> int:
        return 2 * self.sensor_interval_seconds


def load_automation(path: Path) -> AutomationSettings:
    """The automation settings (the file is optional: without it, the defaults)."""
    path = Path(path)
    return validate(AutomationSettings, read_yaml(path) or {}, path) if path.exists() else AutomationSettings()
