"""What a data-quality check is: a named, described expectation about what one stage stored, blocking or not,
declared once (`declare`); the stage -> checks table that Dagster's asset checks are built from is derived from
these declarations. A check runs its expectations (Great Expectations 1.x, quality.gx) over frames read from the
warehouse and gives a CheckOutcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from holistic_dagster.quality.gx import Expectation, validate


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    description: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """One check of one stage's output. blocking: a failure stops downstream stages (and is an error); error: a
    failure is an error (red in the UI) without stopping anything; otherwise a warning."""

    stage: str
    name: str
    description: str
    blocking: bool = False
    error: bool = False

    def outcome(
        self, frame: pd.DataFrame, expectations: list[Expectation], *more: tuple[pd.DataFrame, list], examples=True
    ) -> CheckOutcome:
        """Expectations over a frame (and optionally over further frames, e.g. a subset). examples: whether the
        details quote offending values."""
        passed, details = True, {"rows_checked": len(frame)}
        for part, part_expectations in ((frame, expectations), *more):
            ok, found = validate(part, part_expectations, examples)
            passed, details = passed and ok, {**details, **found}
        return CheckOutcome(self.name, passed, self.description, details)

    def result(self, passed: bool, description: str | None = None, details: dict | None = None) -> CheckOutcome:
        """An outcome decided without expectations (its description by default)."""
        return CheckOutcome(self.name, passed, self.description if description is None else description, details or {})


STAGE_CHECKS: dict[str, tuple[Check, ...]] = {}  # stage -> its checks, in declaration order
# stage -> the function that runs its checks on what it stored: (StageContext, version, scenario, model) -> outcomes
RUNNERS: dict[str, Callable[..., list[CheckOutcome]]] = {}


def declare(stage: str, name: str, description: str, *, blocking: bool = False, error: bool = False) -> Check:
    """Declares a check of `stage` (its name is written here only)."""
    check = Check(stage, name, description, blocking, error)
    if any(c.name == name for c in STAGE_CHECKS.get(stage, ())):
        raise ValueError(f"check {name!r} of stage {stage!r} declared twice")
    STAGE_CHECKS[stage] = (*STAGE_CHECKS.get(stage, ()), check)
    return check


def runs_checks(stage: str):
    """Registers the function that runs `stage`'s checks on what the stage stored (quality.check_stage calls it)."""

    def register(fn: Callable[..., list[CheckOutcome]]) -> Callable[..., list[CheckOutcome]]:
        RUNNERS[stage] = fn
        return fn

    return register
