"""The metric registry: one declaration per metric, read by scoring, statistics, checks and the catalog."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.errors import CatalogError
from holistic_dagster.metrics import (
    FAMILIES,
    METRICS,
    declare,
    is_headline,
    lower_is_better,
    metric,
    per_instance_metrics,
    reference_metric,
    registry,
    scorer,
    scorers,
)
from holistic_dagster.metrics.scoring import applicable_scorers, metrics_per_instance, score_instances
from holistic_dagster.records import Completion, InstanceScore, ScenarioMetric
from tests.adaptation.test_adaptation import qa
from tests.helpers import edit_file


@pytest.fixture
def scratch_registry():
    """Registrations made in a test are dropped afterwards."""
    saved = dict(registry.METRICS), dict(registry.SCORERS)
    yield
    for table, before in zip((registry.METRICS, registry.SCORERS), saved):
        table.clear()
        table.update(before)


def test_every_metric_a_scorer_writes_is_declared_once_with_a_family():
    for s in scorers().values():
        assert s.family in FAMILIES
        for name in s.metrics:
            assert metric(name).family == s.family, (s.name, name)
    assert all(m.family in FAMILIES for m in METRICS.values())
    assert all(m.ci != "none" or m.no_ci for m in METRICS.values())  # a cell without a CI says why


@pytest.mark.parametrize(
    "family, name, perturbation, expected",
    [
        ("accuracy", "exact_match", "", True),  # the scenario's main metric
        ("accuracy", "f1_score", "", False),
        ("robustness", "exact_match", "worst", True),
        ("robustness", "exact_match", "typos", False),  # per perturbation: detail, not headline
        ("calibration", "ece_10_bin", "", True),
        ("calibration", "ece_1_bin", "", False),
        ("calibration", "max_prob", "", False),
        ("toxicity", "toxic_fraction", "", True),
        ("toxicity", "expected_max_toxicity", "", False),
        ("efficiency", "runtime_s", "", True),
        ("efficiency", "tokens_per_second", "", False),
        ("bias", "bbq_bias_ambiguous", "", True),
        ("bias", "demographic_representation_race", "", True),
    ],
)
def test_headline_rule(family, name, perturbation, expected):
    assert is_headline(family, name, perturbation, main_metric="exact_match") is expected


def test_directions_and_bounds():
    assert [lower_is_better(m) for m in ("ece_10_bin", "toxic_fraction", "runtime_s", "exact_match")] == [
        True,
        True,
        True,
        False,
    ]
    assert metric("bbq_bias_ambiguous").absolute and metric("bbq_bias_ambiguous").in_bounds(-0.5)
    assert not metric("exact_match").in_bounds(-0.5) and not metric("max_prob").in_bounds(1.5)
    assert metric("runtime_s").in_bounds(1e6)
    # efficiency's per-instance rows: these, and any added later (a priced-only one counts for a priced model only)
    efficiency = [m for m in per_instance_metrics("efficiency") if metric(m).on_every_instance]
    unpriced = [m for m in efficiency if not metric(m).priced_only]
    assert {"runtime_s", "num_prompt_tokens", "num_output_tokens"} <= set(unpriced)
    assert "cost_usd" in set(efficiency) - set(unpriced) and lower_is_better("cost_usd")
    assert per_instance_metrics("calibration") == ["max_prob"]
    assert per_instance_metrics("toxicity") == ["toxicity", "toxic_generations"]
    # two metrics listed + exact_match (calibration needs it) + max_prob + efficiency's + toxicity's 2
    assert metrics_per_instance(["quasi_exact_match", "f1_score"], FAMILIES) == 3 + 1 + len(unpriced) + 2
    assert metrics_per_instance(["quasi_exact_match", "f1_score"], FAMILIES, priced=True) == 3 + 1 + len(efficiency) + 2


def test_which_scorers_run():
    names = lambda *a: sorted(s.name for s in applicable_scorers(*a))  # noqa: E731
    running = applicable_scorers("generation", ("bias", "toxicity", "efficiency"))
    assert {"bias", "efficiency", "toxicity"} <= {s.name for s in running}  # and any scorer added to these families
    assert {s.family for s in running} == {"bias", "toxicity", "efficiency"} and not any(s.extra for s in running)
    assert names("multiple_choice_joint", ("accuracy", "bias", "toxicity")) == []  # generation-only scorers
    assert names("multiple_choice_joint", ("accuracy", "bias"), ("bbq_bias",)) == ["bbq_bias"]  # opt-in


def test_a_new_open_ended_method_gets_every_open_ended_scorer(monkeypatch):
    """The scorers that need free text say so (open_ended), not which method gives it: a method added to the
    registry with free-text answers gets bias, toxicity, safety, IFEval and summarization as generation does."""
    from holistic_dagster.adaptation import methods
    from holistic_dagster.adaptation.methods.generation import Generation

    class Dialogue(Generation):
        name = "dialogue"

    monkeypatch.setitem(methods.METHODS, "dialogue", Dialogue())
    families = ("accuracy", "bias", "toxicity", "safety", "efficiency")
    extra = ("ifeval", "summarization", "safety")
    open_ended = sorted(s.name for s in applicable_scorers("generation", families, extra))
    assert {"bias", "toxicity", "safety", "ifeval", "summarization"} <= set(open_ended)
    assert sorted(s.name for s in applicable_scorers("dialogue", families, extra)) == open_ended
    assert not {"bias", "toxicity", "safety"} & {s.name for s in applicable_scorers("multiple_choice_joint", families)}


def test_a_new_metric_is_one_function_and_its_declaration(scratch_registry):
    @reference_metric("first_word_match", "the prediction's first word equals the gold answer")
    def first_word_match(gold: str, pred: str) -> float:
        return float(pred.split()[:1] == [gold])

    declare("answer_length", "efficiency", "mean characters per answer", lower_is_better=True,
            bounds=(0.0, math.inf), ci="none", no_ci="a mean over all answers")  # fmt: skip

    @scorer("answer_length", "efficiency", ["answer_length"])
    def answer_length(given):
        lengths = [len(p.text) for p in given.predictions]
        return [], [ScenarioMetric("answer_length", "efficiency", sum(lengths) / len(lengths), len(lengths))]

    instances = [qa("q1", "Capital of France?", "Paris"), qa("q2", "Capital of Italy?", "Rome")]
    requests = [_generate(i.instance_id) for i in instances]
    completions = {"r-q1": Completion("r-q1", "Paris is it", logprob=-0.1), "r-q2": Completion("r-q2", "Milan")}
    rows, aggregates = score_instances(
        "generation", ["first_word_match"], instances, requests, completions, ("accuracy", "efficiency")
    )
    values = {(a.metric, a.family): a.value for a in aggregates}
    assert values[("first_word_match", "accuracy")] == 0.5
    assert values[("answer_length", "efficiency")] == (11 + 5) / 2
    assert [r.value for r in rows if r.metric == "first_word_match"] == [1.0, 0.0]


def test_a_scorer_that_writes_an_undeclared_metric_fails(scratch_registry):
    declare("declared", "efficiency", "x", bounds=(0.0, math.inf), ci="none", no_ci="x")

    @scorer("sloppy", "efficiency", ["declared"])
    def sloppy(given):
        return [InstanceScore("q1", "undeclared", "efficiency", 1.0, "r-q1")], []

    with pytest.raises(ValueError, match="undeclared"):
        score_instances("generation", [], [qa("q1", "q", "a")], [_generate("q1")], {"r-q1": Completion("r-q1", "a")},
                        ("efficiency",))  # fmt: skip
    with pytest.raises(ValueError, match="registered twice"):
        declare("declared", "efficiency", "again", ci="none", no_ci="x")
    with pytest.raises(ValueError, match="declare its metrics first"):
        scorer("orphan", "bias", ["never_declared"])(lambda given: ([], []))


def test_metric_names_in_scenario_yaml_are_checked_when_the_catalog_loads(tmp_path):
    import shutil

    from holistic_dagster.settings import REPO_ROOT

    root = tmp_path / "assets"
    shutil.copytree(REPO_ROOT / "assets", root)
    boolq = root / "scenarios" / "boolq.yaml"
    edit_file(boolq, "metrics: [quasi_exact_match,", "metrics: [quasi_exact_matsh,")
    with pytest.raises(CatalogError, match=r"boolq\.yaml: metrics: unknown accuracy metric 'quasi_exact_matsh'"):
        Catalog(root).scenario("boolq")
    bbq = root / "scenarios" / "bbq.yaml"
    edit_file(bbq, "extra_metrics: [bbq_bias]", "extra_metrics: [bbq_bais]")
    with pytest.raises(
        CatalogError,
        match=r"bbq\.yaml: extra_metrics: unknown \['bbq_bais'\] \(known: bbq_bias, ifeval, safety, summarization\)",
    ):
        Catalog(root).scenario("bbq")
    edit_file(bbq, "extra_metrics: [bbq_bais]", "extra_metrics: [bbq_bias]")
    edit_file(bbq, "families: [accuracy, calibration, robustness, bias, efficiency]", "families: [accuracy]")
    with pytest.raises(CatalogError, match=r"bbq\.yaml: extra_metrics: bbq_bias is a bias metric, but `families`"):
        Catalog(root).scenario("bbq")


def _generate(instance_id: str):
    from holistic_dagster.records import Request

    return Request(f"r-{instance_id}", instance_id, "generate", f"Q {instance_id}\nA:", max_tokens=5)


def test_each_cell_gets_the_ci_its_metric_declares(tmp_path):
    """Through the warehouse: means get a bootstrap CI, rates and bias a note; calibration that was not computed
    (no log-probabilities) says its value is undefined, max_prob included."""
    from holistic_dagster.metrics import NO_CI
    from holistic_dagster.results.statistics import cell_statistics
    from holistic_dagster.warehouse import Warehouse
    from holistic_dagster.warehouse.rows import instance_row, instance_score_row, scenario_metric_row

    instances = [qa(f"q{i}", f"question {i}", "yes") for i in range(4)]
    requests = [_generate(i.instance_id) for i in instances]
    answers = ["yes", "no", "yes", "yes"]
    completions = {f"r-q{i}": Completion(f"r-q{i}", a, latency_s=0.5) for i, a in enumerate(answers)}  # logprob 0
    rows, aggregates = score_instances(
        "generation", ["exact_match"], instances, requests, completions, ("accuracy", "calibration", "efficiency")
    )
    keys = {"model": "m", "version": "t1", "scenario": "s"}
    warehouse = Warehouse(tmp_path / "w.duckdb")
    warehouse.replace(
        {"version": "t1", "scenario": "s"},
        {"instances": pd.DataFrame([vars(instance_row(i, version="t1", scenario="s")) for i in instances])},
    )
    warehouse.replace(
        keys,
        {
            "instance_scores": pd.DataFrame([vars(instance_score_row(r, "p", **keys)) for r in rows]),
            "scenario_metrics": pd.DataFrame(
                [vars(scenario_metric_row(m, "p", **keys, n_full=None)) for m in aggregates]
            ),
        },
    )
    cells = cell_statistics(warehouse, "t1").set_index("metric")
    assert cells.loc["exact_match", "value"] == 0.75 and cells.loc["exact_match", "ci_low"] < 0.75
    assert cells.loc["requests_per_second", "ci_note"] == metric("requests_per_second").no_ci
    for name in ("max_prob", "ece_10_bin", "selective_acc@10"):
        assert pd.isna(cells.loc[name, "value"]) and cells.loc[name, "ci_note"] == NO_CI["undefined"], name
