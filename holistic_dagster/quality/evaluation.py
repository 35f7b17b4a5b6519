"""The checks of the evaluation's stages, per scenario: dataset (per version), prompts, completions and scores (per
model and version). Each reads what its stage stored in the warehouse, so a check also catches a corrupted table."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.adaptation.methods import adapter_method
from holistic_dagster.config.redaction import redact
from holistic_dagster.efficient.sequential import sample_order
from holistic_dagster.metrics import FAMILIES, metric, per_instance_metrics, scorers
from holistic_dagster.metrics.calibration import NOT_COMPUTED
from holistic_dagster.metrics.scoring import metrics_per_instance, on_every_original
from holistic_dagster.perturbations import PERTURBATIONS
from holistic_dagster.quality.base import CheckOutcome, declare, runs_checks
from holistic_dagster.quality.gx import expect
from holistic_dagster.results.efficient import partial_evaluation, stored_anchors
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import (
    Applicability,
    Completions,
    Instances,
    InstanceScores,
    Prompts,
    ScenarioMetrics,
)

INSTANCES_NONEMPTY = declare(
    "dataset", "instances_nonempty", "The suite version's sample has at least one evaluated instance.", blocking=True
)
INSTANCE_IDS_UNIQUE = declare(
    "dataset", "instance_ids_unique", "Instance ids are unique within the scenario.", blocking=True
)
CORRECT_REFERENCE_EXISTS = declare(
    "dataset",
    "correct_reference_exists",
    "Where accuracy applies, every evaluated instance has at least one correct reference.",
    blocking=True,
)
PERTURBATIONS_LINKED = declare(
    "dataset",
    "perturbations_linked",
    "Every perturbed instance points at an evaluated original in the same scenario and differs from it.",
    blocking=True,
)
PROMPTS_COVER_INSTANCES = declare(
    "prompts", "prompts_cover_instances", "Every evaluated instance has at least one prompt.", blocking=True
)
PROMPT_ROWS_UNIQUE = declare(
    "prompts",
    "prompt_rows_unique",
    "(instance, request) pairs are unique; prompts are non-empty (a language-modeling window: its text).",
    blocking=True,
)
ONE_COMPLETION_PER_REQUEST = declare(
    "completions", "one_completion_per_request", "Exactly one completion for every distinct request.", blocking=True
)
COMPLETIONS_VALID = declare(
    "completions",
    "completions_valid",
    "Failed requests stay within the suite's max_failure_rate; log-probabilities are <= 0.",
    blocking=True,
)
SCORES_IN_RANGE = declare(
    "scores",
    "scores_in_range",
    "Every score, per instance and per scenario, lies within its metric's declared bounds (accuracy, "
    "calibration, robustness, fairness and toxicity in [0, 1], efficiency >= 0, BBQ's bias in [-1, 1]).",
)
SCORE_COUNTS_CONSISTENT = declare(
    "scores",
    "score_counts_consistent",
    "One score per evaluated instance, family and metric; every original has the same per-instance metrics.",
)
APPLICABLE_FAMILIES_FILLED = declare(
    "scores",
    "applicable_families_filled",
    "Every metric family that applies to the scenario has values (an undefined value says why); "
    "no family that does not apply has any.",
)


@runs_checks("dataset")
def dataset_checks(stage, version: str, scenario: str, model: str | None = None) -> list[CheckOutcome]:
    spec = stage.catalog.resolved_scenario(version, scenario)[0]
    # an opt-in scorer's accuracy metrics check something else than references (IFEval's instructions)
    by_opt_in = {m for name in spec.extra_metrics for m in scorers()[name].metrics}
    compares = any(m not in by_opt_in for m in spec.metrics) or not spec.metrics
    needs = adapter_method(spec.adapter.method).needs_references and compares
    return check_dataset(stage.warehouse, version, scenario, needs_references=needs)


@runs_checks("prompts")
def prompts_checks(stage, version: str, scenario: str, model: str) -> list[CheckOutcome]:
    return check_prompts(stage.warehouse, version, scenario, model)


@runs_checks("completions")
def completions_checks(stage, version: str, scenario: str, model: str) -> list[CheckOutcome]:
    max_failure_rate = stage.catalog.suite(version).max_failure_rate
    return check_completions(stage.warehouse, version, scenario, model, max_failure_rate)


@runs_checks("scores")
def scores_checks(stage, version: str, scenario: str, model: str) -> list[CheckOutcome]:
    spec, _ = stage.catalog.resolved_scenario(version, scenario)  # as pinned: a language_modeling pin's metrics
    method = Prompts(stage.warehouse).method(version, scenario, model)
    registered = stage.deployment.models().get(model)
    priced = registered is not None and registered.price is not None
    per_instance = metrics_per_instance(spec.metrics, spec.families, method, spec.extra_metrics, priced)
    return check_scores(stage.warehouse, version, scenario, model, metrics_per_instance=per_instance)


def check_dataset(
    warehouse: ResultStore, version: str, scenario: str, needs_references: bool = True
) -> list[CheckOutcome]:
    frame = Instances(warehouse).outline(version, scenario)
    applies = Applicability(warehouse).families(version, scenario)
    test = frame[frame["split"] == "test"]
    originals = test[test["perturbation"] == ""]
    perturbed = test[test["perturbation"] != ""].merge(
        originals[["instance_id", "input"]].rename(columns={"instance_id": "original_instance_id", "input": "orig"}),
        on="original_instance_id",
        how="left",
    )
    perturbed["linked"] = perturbed["orig"].notna()
    perturbed["changed"] = perturbed["linked"] & (perturbed["input"] != perturbed["orig"])
    return [
        INSTANCES_NONEMPTY.outcome(originals, [expect.ExpectTableRowCountToBeBetween(min_value=1)]),
        INSTANCE_IDS_UNIQUE.outcome(
            frame,
            [expect.ExpectColumnValuesToBeUnique(column="instance_id")],
        ),
        CORRECT_REFERENCE_EXISTS.outcome(
            test if "accuracy" in applies and needs_references else test.iloc[0:0],
            [expect.ExpectColumnValuesToBeBetween(column="num_correct_references", min_value=1)],
        ),
        PERTURBATIONS_LINKED.outcome(
            perturbed,
            [expect.ExpectColumnValuesToBeInSet(column="linked", value_set=[True])],
            # a perturbation that also rewrites references (fairness) may change only them
            (
                perturbed[~perturbed["perturbation"].isin(_REWRITING_REFERENCES)],
                [expect.ExpectColumnValuesToBeInSet(column="changed", value_set=[True])],
            ),
        ),
    ]


_REWRITING_REFERENCES = [p.name for p in PERTURBATIONS.values() if p.perturbs_references]


def check_prompts(warehouse: ResultStore, version: str, scenario: str, model: str) -> list[CheckOutcome]:
    frame = Prompts(warehouse).texts(version, scenario, model)
    tests = Instances(warehouse).evaluated(version, scenario)
    test_ids = tests["instance_id"].tolist()
    if (partial := partial_evaluation(warehouse, version, scenario, model)) is not None:
        # a partial evaluation asks its part of the draw (the anchors, or a sample's first n) with their perturbed
        # copies, and no others
        if partial["how"] == "sample":
            draw = tests.loc[tests["instance_id"] == tests["original"], "instance_id"]
            asked = set(sample_order(draw)[: int(partial["n_evaluated"])])
        else:
            asked = set(stored_anchors(warehouse, version, scenario).instance_ids)
        test_ids = tests.loc[tests["original"].isin(asked), "instance_id"].tolist()
    return [
        PROMPTS_COVER_INSTANCES.outcome(
            frame,
            [
                expect.ExpectTableRowCountToBeBetween(min_value=1),
                expect.ExpectColumnDistinctValuesToEqualSet(column="instance_id", value_set=test_ids),
            ],
        ),
        PROMPT_ROWS_UNIQUE.outcome(
            frame,
            [
                expect.ExpectCompoundColumnsToBeUnique(column_list=["instance_id", "request_id"]),
                expect.ExpectColumnValueLengthsToBeBetween(column="prompt", min_value=1),
            ],
        ),
    ]


def check_completions(
    warehouse: ResultStore, version: str, scenario: str, model: str, max_failure_rate: float = 0.0
) -> list[CheckOutcome]:
    frame = Completions(warehouse).outcomes(version, scenario, model)
    requested = Prompts(warehouse).request_ids(version, scenario, model)
    failures = frame[frame["failed"]]
    valid = COMPLETIONS_VALID.outcome(
        frame,
        [expect.ExpectColumnMeanToBeBetween(column="failed", max_value=max_failure_rate)],
        (frame[~frame["failed"]], [expect.ExpectColumnValuesToBeBetween(column="logprob", max_value=0.0)]),
    )
    if len(failures):  # say how many and why
        # quoted into Dagster's event log: redacted (again, for rows stored before redaction) before it is cut
        reasons = failures["error"].map(redact).str.slice(0, 160).value_counts().head(5)
        valid = CheckOutcome(
            valid.name,
            valid.passed,
            f"{len(failures)} of {len(frame)} requests failed (allowed rate {max_failure_rate:g}): "
            + "; ".join(f"{n} x {reason}" for reason, n in reasons.items()),
            valid.details,
        )
    return [
        ONE_COMPLETION_PER_REQUEST.outcome(
            frame,
            [
                expect.ExpectColumnValuesToBeUnique(column="request_id"),
                expect.ExpectTableRowCountToEqual(value=len(requested)),
                expect.ExpectColumnValuesToBeInSet(column="request_id", value_set=requested),
            ],
        ),
        valid,
    ]


def check_scores(
    warehouse: ResultStore, version: str, scenario: str, model: str, metrics_per_instance: int
) -> list[CheckOutcome]:
    frame = InstanceScores(warehouse).with_instances(version, scenario, model)
    aggregates = ScenarioMetrics(warehouse)
    per_original = (
        frame[frame["instance_perturbation"] == ""]
        .loc[lambda f: [on_every_original(m, fam) for m, fam in zip(f["metric"], f["family"])]]
        .groupby("instance_id")
        .size()
        .rename("num_rows")
        .reset_index()
    )
    applies = Applicability(warehouse).families(version, scenario)
    not_computed = aggregates.undefined_with_note(version, scenario, model, "calibration", NOT_COMPUTED)
    if "calibration" in applies and not_computed:
        # calibration "not computed" (no log-probabilities): no max_prob rows were made up
        metrics_per_instance -= len(per_instance_metrics("calibration"))
    families = aggregates.per_family(version, scenario, model)
    grid = pd.DataFrame({"family": list(FAMILIES)}).merge(families, on="family", how="left").fillna(0)
    grid["applies"] = grid["family"].isin(applies)
    grid["filled_as_declared"] = (grid["num_rows"] > 0) == grid["applies"]
    defined = aggregates.defined(version, scenario, model)  # an undefined one has its note (checked below)
    outcomes = [
        SCORES_IN_RANGE.outcome(
            frame,
            [expect.ExpectColumnValuesToNotBeNull(column="value")],
            *_within_bounds(frame),
            *_within_bounds(defined),
        ),
        SCORE_COUNTS_CONSISTENT.outcome(
            frame,
            [expect.ExpectCompoundColumnsToBeUnique(column_list=["instance_id", "family", "metric"])],
            (
                per_original,
                [
                    expect.ExpectTableRowCountToBeBetween(min_value=1),
                    expect.ExpectColumnValuesToBeInSet(column="num_rows", value_set=[metrics_per_instance]),
                ],
            ),
        ),
        APPLICABLE_FAMILIES_FILLED.outcome(
            grid,
            [
                expect.ExpectColumnValuesToBeInSet(column="filled_as_declared", value_set=[True]),
                expect.ExpectColumnValuesToBeInSet(column="num_unexplained", value_set=[0]),
            ],
        ),
    ]
    missing = grid[grid["applies"] & (grid["num_rows"] == 0)]["family"].tolist()
    extra = grid[~grid["applies"] & (grid["num_rows"] > 0)]["family"].tolist()
    if missing or extra:
        last = outcomes[-1]
        problems = ([f"no values for {', '.join(missing)} (applies)"] if missing else []) + (
            [f"values for {', '.join(extra)} (does not apply)"] if extra else []
        )
        outcomes[-1] = CheckOutcome(last.name, False, f"{last.description} Found: {'; '.join(problems)}.", last.details)
    return outcomes


def _within_bounds(frame: pd.DataFrame) -> list[tuple[pd.DataFrame, list]]:
    """(rows, [expect value within bounds]) for each distinct bounds the registry declares for the rows' metrics."""
    bounds = frame["metric"].map(lambda name: metric(name).bounds)
    return [
        (
            frame[bounds == b],
            [
                expect.ExpectColumnValuesToBeBetween(
                    column="value",
                    min_value=None if b[0] == -float("inf") else b[0],
                    max_value=None if b[1] == float("inf") else b[1],
                )
            ],
        )
        for b in sorted(set(bounds))
    ]
