"""Data-quality checks for every stage, expressed as Great Expectations 1.x expectations.

Each check reads what the stage actually stored in the warehouse, so a check also catches a corrupted
table. The Dagster layer turns each CheckOutcome into an asset check result; blocking checks stop
downstream stages from running on bad data.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pandas as pd

from holistic_dagster.adaptation.methods import adapter_method
from holistic_dagster.config.redaction import redact
from holistic_dagster.metrics import FAMILIES, metric, per_instance_metrics
from holistic_dagster.metrics.calibration import NOT_COMPUTED
from holistic_dagster.metrics.scoring import PER_INSTANCE_FAMILIES, metrics_per_instance
from holistic_dagster.perturbations import PERTURBATIONS
from holistic_dagster.shadow.pii_check import found_per_row
from holistic_dagster.stages.prompts import prompted_method
from holistic_dagster.validation import Expectation, expect, validate
from holistic_dagster.warehouse import Warehouse

if TYPE_CHECKING:
    from holistic_dagster.stages import StageContext


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    description: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckSpec:
    name: str
    description: str
    blocking: bool  # a failure stops downstream stages (and is an error)
    error: bool = False  # a failure is an error (red in the UI) without stopping anything


STAGE_CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "dataset": (
        CheckSpec("instances_nonempty", "The suite version's sample has at least one evaluated instance.", True),
        CheckSpec("instance_ids_unique", "Instance ids are unique within the scenario.", True),
        CheckSpec(
            "correct_reference_exists",
            "Where accuracy applies, every evaluated instance has at least one correct reference.",
            True,
        ),
        CheckSpec(
            "perturbations_linked",
            "Every perturbed instance points at an evaluated original in the same scenario and differs from it.",
            True,
        ),
    ),
    "prompts": (
        CheckSpec("prompts_cover_instances", "Every evaluated instance has at least one prompt.", True),
        CheckSpec(
            "prompt_rows_unique",
            "(instance, request) pairs are unique; prompts are non-empty (a language-modeling window: its text).",
            True,
        ),
    ),
    "completions": (
        CheckSpec("one_completion_per_request", "Exactly one completion for every distinct request.", True),
        CheckSpec(
            "completions_valid",
            "Failed requests stay within the suite's max_failure_rate; log-probabilities are <= 0.",
            True,
        ),
    ),
    "scores": (
        CheckSpec(
            "scores_in_range",
            "Every score, per instance and per scenario, lies within its metric's declared bounds (accuracy, "
            "calibration, robustness, fairness and toxicity in [0, 1], efficiency >= 0, BBQ's bias in [-1, 1]).",
            False,
        ),
        CheckSpec(
            "score_counts_consistent",
            "One score per evaluated instance, family and metric; every original has the same per-instance metrics.",
            False,
        ),
        CheckSpec(
            "applicable_families_filled",
            "Every metric family that applies to the scenario has values (an undefined value says why); "
            "no family that does not apply has any.",
            False,
        ),
    ),
    "leaderboard": (
        CheckSpec(
            "leaderboard_complete",
            "Every model on the leaderboard has values for every scenario of the suite version.",
            False,
        ),
    ),
    "battles": (
        CheckSpec(
            "verdicts_parse",
            "Judgements without a verdict ([[A]], [[B]] or [[C]] in both orders) stay within the arena's "
            "max_failure_rate, per judge; such battles are rows with an error, never votes.",
            True,
        ),
        CheckSpec(
            "battles_traceable",
            "Every battle names two different models and points at their stored completions of the instance.",
            True,
        ),
    ),
    "shadow_traffic": (
        CheckSpec(
            "pii_removed",
            "An independent PII detector (Presidio's recognizers and spaCy names, not the remover's patterns) finds "
            "no personal data in any stored text of the traffic log: messages, prompts, production's answers, record "
            "ids, slices and times. A detector that cannot run fails the check.",
            True,
        ),
    ),
    "shadow_verdicts": (
        CheckSpec(
            "verdicts_parse",
            "Judgements without a verdict stay within shadow.yaml's max_failure_rate; they are never votes.",
            True,
        ),
    ),
    "arena_ratings": (
        CheckSpec(
            "ratings_consistent",
            "Every Bradley-Terry rating is finite and inside its 95% CI, and each judge's baseline is rated 1000.",
            False,
            error=True,
        ),
    ),
    "alerts": (
        CheckSpec(
            "no_critical_alert",
            "No model crosses a critical threshold of resources/alerts.yaml against its baseline (blocking).",
            True,
        ),
        CheckSpec(
            "no_warning_alert",
            "No model crosses a warning threshold of resources/alerts.yaml against its baseline.",
            False,
        ),
    ),
    "regressions": (
        CheckSpec(
            "no_significant_regression",
            "No model is significantly worse than the revision it replaces (registry `previous`), on any "
            "scenario and metric family (paired permutation test at the suite's regression_alpha).",
            blocking=False,
            error=True,
        ),
    ),
}


def check_stage(
    name: str, stage: StageContext, version: str, scenario: str | None = None, model: str | None = None
) -> list[CheckOutcome]:
    """The checks of one stage on what it stored, with the parameters the catalog gives them (the suite's
    max_failure_rate, the scenario's rows per instance, the suite's scenarios)."""
    warehouse, catalog = stage.warehouse, stage.catalog
    if name == "dataset":
        method = adapter_method(catalog.resolved_scenario(version, scenario)[0].adapter.method)
        return check_dataset(warehouse, version, scenario, needs_references=method.needs_references)
    if name == "prompts":
        return check_prompts(warehouse, version, scenario, model)
    if name == "completions":
        return check_completions(warehouse, version, scenario, model, catalog.suite(version).max_failure_rate)
    if name == "scores":
        spec, _ = catalog.resolved_scenario(version, scenario)  # as pinned: a language_modeling pin's metrics
        method = prompted_method(stage, version, scenario, model)
        per_instance = metrics_per_instance(spec.metrics, spec.families, method, spec.extra_metrics)
        return check_scores(warehouse, version, scenario, model, metrics_per_instance=per_instance)
    if name == "leaderboard":
        return check_leaderboard(warehouse, version, list(catalog.suite(version).scenarios))
    if name == "battles":
        arena = catalog.suite(version).arena
        if not arena.judges:
            return [
                CheckOutcome(c.name, True, c.description + " No judge models: nothing judged.")
                for c in STAGE_CHECKS["battles"]
            ]
        return check_battles(warehouse, version, list(arena.judges), arena.max_failure_rate)
    if name == "arena_ratings":
        return check_ratings(warehouse, version)
    raise ValueError(f"no checks for stage {name!r} here (regressions are checked on the comparisons frame)")


def _outcome(
    stage: str,
    name: str,
    frame: pd.DataFrame,
    expectations: list[Expectation],
    *more: tuple[pd.DataFrame, list],
    examples: bool = True,
) -> CheckOutcome:
    """One check: expectations over a frame (and optionally over further frames, e.g. a subset). examples:
    whether the details quote offending values."""
    spec = next(c for c in STAGE_CHECKS[stage] if c.name == name)
    passed, details = True, {"rows_checked": len(frame)}
    for part, part_expectations in ((frame, expectations), *more):
        ok, found = validate(part, part_expectations, examples)
        passed, details = passed and ok, {**details, **found}
    return CheckOutcome(name, passed, spec.description, details)


def check_dataset(
    warehouse: Warehouse, version: str, scenario: str, needs_references: bool = True
) -> list[CheckOutcome]:
    frame = warehouse.df(
        "SELECT instance_id, split, num_correct_references, perturbation, original_instance_id, input "
        "FROM instances WHERE version = ? AND scenario = ?",
        [version, scenario],
    )
    applies = _applies(warehouse, version, scenario)
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
        _outcome("dataset", "instances_nonempty", originals, [expect.ExpectTableRowCountToBeBetween(min_value=1)]),
        _outcome(
            "dataset",
            "instance_ids_unique",
            frame,
            [expect.ExpectColumnValuesToBeUnique(column="instance_id")],
        ),
        _outcome(
            "dataset",
            "correct_reference_exists",
            test if "accuracy" in applies and needs_references else test.iloc[0:0],
            [expect.ExpectColumnValuesToBeBetween(column="num_correct_references", min_value=1)],
        ),
        _outcome(
            "dataset",
            "perturbations_linked",
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


def _applies(warehouse: Warehouse, version: str, scenario: str) -> set[str]:
    frame = warehouse.df(
        "SELECT family FROM applicability WHERE version = ? AND scenario = ? AND applies", [version, scenario]
    )
    return set(frame["family"])


def check_prompts(warehouse: Warehouse, version: str, scenario: str, model: str) -> list[CheckOutcome]:
    # a request asks about some text: its prompt, or (language modeling's first window, scored after the model's
    # start token) its continuation alone
    frame = warehouse.df(
        "SELECT instance_id, request_id, prompt || continuation AS prompt FROM prompts "
        "WHERE model = ? AND version = ? AND scenario = ?",
        [model, version, scenario],
    )
    test_ids = warehouse.df(
        "SELECT instance_id FROM instances WHERE version = ? AND scenario = ? AND split = 'test'", [version, scenario]
    )["instance_id"].tolist()
    return [
        _outcome(
            "prompts",
            "prompts_cover_instances",
            frame,
            [
                expect.ExpectTableRowCountToBeBetween(min_value=1),
                expect.ExpectColumnDistinctValuesToEqualSet(column="instance_id", value_set=test_ids),
            ],
        ),
        _outcome(
            "prompts",
            "prompt_rows_unique",
            frame,
            [
                expect.ExpectCompoundColumnsToBeUnique(column_list=["instance_id", "request_id"]),
                expect.ExpectColumnValueLengthsToBeBetween(column="prompt", min_value=1),
            ],
        ),
    ]


def check_completions(
    warehouse: Warehouse, version: str, scenario: str, model: str, max_failure_rate: float = 0.0
) -> list[CheckOutcome]:
    keys = [model, version, scenario]
    frame = warehouse.df(
        "SELECT request_id, logprob, error, error <> '' AS failed FROM completions WHERE model = ? AND version = ? "
        "AND scenario = ?",
        keys,
    )
    requested = warehouse.df(
        "SELECT DISTINCT request_id FROM prompts WHERE model = ? AND version = ? AND scenario = ?", keys
    )["request_id"].tolist()
    failures = frame[frame["failed"]]
    valid = _outcome(
        "completions",
        "completions_valid",
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
        _outcome(
            "completions",
            "one_completion_per_request",
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
    warehouse: Warehouse, version: str, scenario: str, model: str, metrics_per_instance: int
) -> list[CheckOutcome]:
    keys = [model, version, scenario]
    frame = warehouse.df(
        "SELECT s.instance_id, s.metric, s.family, s.value, s.perturbation, i.perturbation AS instance_perturbation "
        "FROM instance_scores s JOIN instances i USING (version, scenario, instance_id) "
        "WHERE s.model = ? AND s.version = ? AND s.scenario = ?",
        keys,
    )
    per_original = (
        frame[frame["instance_perturbation"] == ""]
        .loc[lambda f: f["family"].isin(PER_ORIGINAL)]
        .groupby("instance_id")
        .size()
        .rename("num_rows")
        .reset_index()
    )
    applies = _applies(warehouse, version, scenario)
    not_computed = warehouse.df(
        "SELECT count(*) AS n FROM scenario_metrics WHERE model = ? AND version = ? AND scenario = ? "
        "AND family = 'calibration' AND value IS NULL AND starts_with(note, ?)",
        [*keys, NOT_COMPUTED],
    )["n"].iat[0]
    if "calibration" in applies and not_computed:
        # calibration "not computed" (no log-probabilities): no max_prob rows were made up
        metrics_per_instance -= len(per_instance_metrics("calibration"))
    families = warehouse.df(
        "SELECT family, count(*) AS num_rows, count(value) AS num_values, "
        "count(*) FILTER (WHERE value IS NULL AND note = '') AS num_unexplained "
        "FROM scenario_metrics WHERE model = ? AND version = ? AND scenario = ? GROUP BY family",
        keys,
    )
    grid = pd.DataFrame({"family": list(FAMILIES)}).merge(families, on="family", how="left").fillna(0)
    grid["applies"] = grid["family"].isin(applies)
    grid["filled_as_declared"] = (grid["num_rows"] > 0) == grid["applies"]
    aggregates = warehouse.df(
        "SELECT metric, value FROM scenario_metrics WHERE model = ? AND version = ? AND scenario = ? "
        "AND value IS NOT NULL",  # an undefined value has its note (applicable_families_filled checks that)
        keys,
    )
    outcomes = [
        _outcome(
            "scores",
            "scores_in_range",
            frame,
            [expect.ExpectColumnValuesToNotBeNull(column="value")],
            *_within_bounds(frame),
            *_within_bounds(aggregates),
        ),
        _outcome(
            "scores",
            "score_counts_consistent",
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
        _outcome(
            "scores",
            "applicable_families_filled",
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


PER_ORIGINAL = ("accuracy", *PER_INSTANCE_FAMILIES)  # the families with a row per original and metric


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


def check_leaderboard(warehouse: Warehouse, version: str, scenarios: list[str]) -> list[CheckOutcome]:
    frame = warehouse.df(
        "SELECT model, scenario, count(value) AS num_values FROM scenario_metrics WHERE version = ? GROUP BY ALL",
        [version],
    )
    models = sorted(frame["model"].unique())
    grid = pd.DataFrame([(m, s) for m in models for s in scenarios], columns=["model", "scenario"])
    grid = grid.merge(frame, on=["model", "scenario"], how="left").fillna({"num_values": 0})
    grid["cell"] = grid["model"] + " / " + grid["scenario"]
    return [
        _outcome(
            "leaderboard",
            "leaderboard_complete",
            grid,
            [
                expect.ExpectTableRowCountToBeBetween(min_value=1),
                expect.ExpectColumnValuesToBeBetween(column="num_values", min_value=1),
            ],
        )
    ]


def check_battles(warehouse: Warehouse, version: str, judges: list[str], max_failure_rate: float) -> list[CheckOutcome]:
    frame = warehouse.df(
        "SELECT b.judge, b.battle_id, b.winner, b.model_a, b.model_b, ca.request_id AS found_a, "
        "cb.request_id AS found_b FROM battles b "
        "LEFT JOIN completions ca ON ca.version = b.version AND ca.scenario = b.scenario AND ca.model = b.model_a "
        "AND ca.request_id = b.request_a "
        "LEFT JOIN completions cb ON cb.version = b.version AND cb.scenario = b.scenario AND cb.model = b.model_b "
        "AND cb.request_id = b.request_b "
        "WHERE b.version = ? AND b.judge IN (SELECT unnest(?::VARCHAR[]))",
        [version, judges],
    )
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
    verdicts = _outcome("battles", "verdicts_parse", frame, has_rows, *per_judge)
    if not verdicts.passed:
        rates = {j: round(float((part["winner"] == "").mean()), 4) for j, (part, _) in zip(judges, per_judge)}
        verdicts = CheckOutcome(
            verdicts.name,
            False,
            f"Judgements without a verdict per judge: {rates} (max_failure_rate {max_failure_rate}): see the "
            "battles' error column",
            {**verdicts.details, "no_verdict_rate": rates},
        )
    linked = _outcome(
        "battles",
        "battles_traceable",
        frame.assign(distinct=frame["model_a"] != frame["model_b"]),
        [
            expect.ExpectColumnValuesToNotBeNull(column="found_a"),
            expect.ExpectColumnValuesToNotBeNull(column="found_b"),
            expect.ExpectColumnValuesToBeInSet(column="distinct", value_set=[True]),
        ],
    )
    return [verdicts, linked]


def check_traffic(warehouse: Warehouse, log: str) -> list[CheckOutcome]:
    """Every stored text of the log run through an independent PII detector (shadow.pii_check, not the remover's
    patterns). Fails closed: a detector that cannot run fails the check. Details name the column, line and kind
    of what was found, never the value."""
    frame = warehouse.df(
        "SELECT line, record_id, slice, messages::VARCHAR AS messages, prompt, production_text, logged_at "
        "FROM traffic WHERE log = ? ORDER BY line",
        [log],
    )
    # key-shaped tokens are looked for in free text only: ids are random tokens by design
    free_text = {"record_id": False, "slice": False, "messages": True, "prompt": True, "production_text": True,
                 "logged_at": False}  # fmt: skip
    try:
        found = frame[["line"]].assign(pii=found_per_row(frame, free_text))
    except Exception as e:  # fail closed: unchecked text is never passed as clean
        spec = next(c for c in STAGE_CHECKS["shadow_traffic"] if c.name == "pii_removed")
        return [CheckOutcome(spec.name, False, f"{spec.description} The detector could not run: {redact(str(e))}")]
    expectations = [
        expect.ExpectTableRowCountToBeBetween(min_value=1),
        expect.ExpectColumnValuesToBeInSet(column="pii", value_set=[""]),
    ]
    outcome = _outcome("shadow_traffic", "pii_removed", found, expectations, examples=False)
    left = {int(r.line): r.pii for r in found.itertuples() if r.pii}
    if not left:
        return [outcome]
    return [replace(outcome, description=f"{outcome.description} Found on lines: {left}",
                    details={**outcome.details, "found": left})]  # fmt: skip


def check_shadow_verdicts(warehouse: Warehouse, log: str, max_failure_rate: float) -> list[CheckOutcome]:
    frame = warehouse.df("SELECT candidate, record_id, winner FROM shadow_verdicts WHERE log = ?", [log])
    expectations = [
        expect.ExpectTableRowCountToBeBetween(min_value=1),
        expect.ExpectColumnValuesToBeInSet(
            column="winner", value_set=["candidate", "production", "tie"], mostly=1.0 - max_failure_rate
        ),
    ]
    return [_outcome("shadow_verdicts", "verdicts_parse", frame, expectations)]


def check_ratings(warehouse: Warehouse, version: str) -> list[CheckOutcome]:
    frame = warehouse.df(
        "SELECT judge, model, rating, ci_low, ci_high, model = baseline AS is_baseline FROM arena_ratings "
        "WHERE version = ? AND method = 'bradley_terry'",
        [version],
    )
    baseline = frame[frame["is_baseline"]]
    return [
        _outcome(
            "arena_ratings",
            "ratings_consistent",
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


def check_alerts(findings: list) -> list[CheckOutcome]:
    """One check per level: fails, naming each finding, when any finding has that level (alerts.Finding)."""
    outcomes = []
    for spec, level in zip(STAGE_CHECKS["alerts"], ("critical", "warning")):
        hits = [f.message for f in findings if f.level == level]
        details = {"graded": len(findings), level: hits[:50]}
        if not hits:
            outcomes.append(CheckOutcome(spec.name, True, spec.description, details))
        else:
            summary = "; ".join(hits[:3]) + (f" ... ({len(hits)} in all)" if len(hits) > 3 else "")
            outcomes.append(CheckOutcome(spec.name, False, f"{len(hits)} {level}: {summary}", details))
    return outcomes


def check_regressions(comparisons: pd.DataFrame) -> list[CheckOutcome]:
    """Fails when any comparison's verdict is "worse", naming the models, scenario, family and metric."""
    spec = STAGE_CHECKS["regressions"][0]
    if comparisons.empty:
        return [CheckOutcome(spec.name, True, spec.description + " No model has a `previous` revision yet.")]
    worse = comparisons[comparisons["verdict"] == "worse"]
    details = {
        "comparisons": len(comparisons),
        "worse": [
            f"{r.model_b} vs {r.model_a}: {r.scenario} / {r.family} / {r.metric}"
            f"{' [' + r.perturbation + ']' if r.perturbation else ''}: {r.mean_b:.3f} vs {r.mean_a:.3f} "
            f"(diff {r.diff:+.3f}, 95% CI [{r.ci_low:+.3f}, {r.ci_high:+.3f}], p = {r.p_value:.4f})"
            for r in worse.itertuples()
        ],
    }
    if worse.empty:
        return [CheckOutcome(spec.name, True, spec.description, details)]
    summary = "; ".join(details["worse"][:5]) + (" ..." if len(worse) > 5 else "")
    return [CheckOutcome(spec.name, False, f"Significantly worse: {summary}", details)]
