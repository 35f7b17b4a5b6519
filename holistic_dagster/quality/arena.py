"""The checks of the arena: the judged battles and the ratings fitted to them."""

from __future__ import annotations

from holistic_dagster.quality.base import CheckOutcome, declare, runs_checks
from holistic_dagster.quality.gx import expect
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import ArenaRatings, Battles

VERDICTS_PARSE = declare(
    "battles",
    "verdicts_parse",
    "Judgements without a verdict ([[A]], [[B]] or [[C]] in both orders) stay within the arena's "
    "max_failure_rate, per judge; such battles are rows with an error, never votes.",
    blocking=True,
)
BATTLES_TRACEABLE = declare(
    "battles",
    "battles_traceable",
    "Every battle names two different models and points at their stored completions of the instance.",
    blocking=True,
)
RATINGS_CONSISTENT = declare(
    "arena_ratings",
    "ratings_consistent",
    "Every Bradley-Terry rating is finite and inside its 95% CI, and each judge's baseline is rated 1000.",
    error=True,
)


@runs_checks("battles")
def battles_checks(stage, version: str, scenario: str | None = None, model: str | None = None):
    arena = stage.catalog.suite(version).arena
    if not arena.judges:
        return [
            c.result(True, c.description + " No judge models: nothing judged.")
            for c in (VERDICTS_PARSE, BATTLES_TRACEABLE)
        ]
    return check_battles(stage.warehouse, version, list(arena.judges), arena.max_failure_rate)


@runs_checks("arena_ratings")
def ratings_checks(stage, version: str, scenario: str | None = None, model: str | None = None):
    return check_ratings(stage.warehouse, version)


def check_battles(
    warehouse: ResultStore, version: str, judges: list[str], max_failure_rate: float
) -> list[CheckOutcome]:
    frame = Battles(warehouse).traced(version, judges)
    per_judge = [
        (
            frame[frame["judge"] == judge],
            [
                expect.ExpectColumnValuesToBeInSet(
                    column="winner", value_set=["a", "b", "tie"], mostly=1.0 - max_failure_rate
                )
            ],
        )
        for judge in judges
    ]
    has_rows = [expect.ExpectTableRowCountToBeBetween(min_value=1)]
    verdicts = VERDICTS_PARSE.outcome(frame, has_rows, *per_judge)
    if not verdicts.passed:
        rates = {j: round(float((part["winner"] == "").mean()), 4) for j, (part, _) in zip(judges, per_judge)}
        verdicts = CheckOutcome(
            verdicts.name,
            False,
            f"Judgements without a verdict per judge: {rates} (max_failure_rate {max_failure_rate}): see the "
            "battles' error column",
            {**verdicts.details, "no_verdict_rate": rates},
        )
    linked = BATTLES_TRACEABLE.outcome(
        frame.assign(distinct=frame["model_a"] != frame["model_b"]),
        [
            expect.ExpectColumnValuesToNotBeNull(column="found_a"),
            expect.ExpectColumnValuesToNotBeNull(column="found_b"),
            expect.ExpectColumnValuesToBeInSet(column="distinct", value_set=[True]),
        ],
    )
    return [verdicts, linked]


def check_ratings(warehouse: ResultStore, version: str) -> list[CheckOutcome]:
    frame = ArenaRatings(warehouse).bradley_terry(version)
    baseline = frame[frame["is_baseline"]]
    return [
        RATINGS_CONSISTENT.outcome(
            frame,
            [
                expect.ExpectColumnValuesToNotBeNull(column="rating"),
                expect.ExpectColumnPairValuesAToBeGreaterThanB(column_A="rating", column_B="ci_low", or_equal=True),
                expect.ExpectColumnPairValuesAToBeGreaterThanB(column_A="ci_high", column_B="rating", or_equal=True),
            ],
            (
                baseline,
                [expect.ExpectColumnValuesToBeBetween(column="rating", min_value=999.999999, max_value=1000.000001)],
            ),
        )
    ]
