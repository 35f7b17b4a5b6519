"""Automation's decisions as plain functions (holistic_dagster.automation): the registry sensor's plan per
tick, stale partitions, the scenario code version. tests/defs/test_automation.py runs the real sensor."""

from __future__ import annotations

import shutil

from holistic_dagster.automation.planning import (
    REASON_TAG,
    PromptsBuild,
    find_stale,
    plan_registry_tick,
    read_cursor,
    stale_runs,
    write_cursor,
)
from holistic_dagster.clients.identity import model_identities
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.settings import REPO_ROOT


def ready(*versions: str):
    return lambda version: version in versions


def tick(previous, identities, versions=("a1",), newest=None, datasets_ready=ready("a1", "a2")):
    """One tick, through the cursor's JSON form as the sensor stores it."""
    plan = plan_registry_tick(previous, identities, list(versions), newest or max(versions), datasets_ready)
    return plan, read_cursor(write_cursor(plan.cursor))


def test_the_first_tick_records_and_requests_nothing():
    plan, cursor = tick(None, {"base": "id1"})
    assert not plan.datasets and not plan.evaluations
    assert cursor == {"models": {"base": "id1"}, "versions": ["a1"], "pending": []}
    assert plan.log == ["first tick: 1 model(s) and 1 suite version(s) recorded"]
    assert read_cursor(None) is None and read_cursor("") is None


def test_nothing_new_requests_nothing():
    _, cursor = tick(None, {"base": "id1"})
    plan, again = tick(cursor, {"base": "id1"})
    assert not plan.datasets and not plan.evaluations and again == cursor


def test_a_new_model_is_evaluated_once_on_the_newest_version():
    _, cursor = tick(None, {"base": "id1"}, versions=("a1", "a2"))
    plan, cursor = tick(cursor, {"base": "id1", "newcomer": "id2"}, versions=("a1", "a2"))
    (run,) = plan.evaluations
    assert (run.model, run.version, run.reason) == ("newcomer", "a2", "new model")
    assert run.run_key == "evaluate:newcomer:a2:id2" and run.tags == {REASON_TAG: "new model"}
    assert not plan.datasets and cursor["models"] == {"base": "id1", "newcomer": "id2"}
    # the same registry on the next tick: nothing; a repeated plan gives the same run key (a no-op in Dagster)
    assert not tick(cursor, {"base": "id1", "newcomer": "id2"}, versions=("a1", "a2"))[0].evaluations
    _, first = tick(None, {"base": "id1"}, versions=("a1", "a2"))
    assert tick(first, {"base": "id1", "newcomer": "id2"}, versions=("a1", "a2"))[0].evaluations == [run]


def test_a_new_revision_is_evaluated_with_its_reason():
    _, cursor = tick(None, {"base": "id1", "other": "x"})
    plan, _ = tick(cursor, {"base": "id1-r2", "other": "x"})
    (run,) = plan.evaluations
    assert (run.model, run.reason, run.run_key) == ("base", "new revision", "evaluate:base:a1:id1-r2")


def test_a_new_suite_version_evaluates_every_model_after_its_datasets():
    _, cursor = tick(None, {"base": "b", "newcomer": "n"})
    waiting, cursor = tick(cursor, {"base": "b", "newcomer": "n"}, versions=("a1", "a2"), datasets_ready=ready("a1"))
    assert [d.version for d in waiting.datasets] == ["a2"] and waiting.datasets[0].run_key == "datasets:a2"
    assert not waiting.evaluations
    assert sorted(p[0] for p in cursor["pending"]) == ["base", "newcomer"]  # kept until the datasets are ready
    still, cursor = tick(cursor, {"base": "b", "newcomer": "n"}, versions=("a1", "a2"), datasets_ready=ready("a1"))
    assert [d.version for d in still.datasets] == ["a2"] and len(cursor["pending"]) == 2
    done, cursor = tick(cursor, {"base": "b", "newcomer": "n"}, versions=("a1", "a2"))
    assert not done.datasets and cursor["pending"] == []
    assert sorted((r.model, r.version, r.reason) for r in done.evaluations) == [
        ("base", "a2", "new suite version"),
        ("newcomer", "a2", "new suite version"),
    ]


def test_a_removed_model_is_dropped_from_pending_and_asks_for_no_datasets():
    _, cursor = tick(None, {"base": "b", "gone": "g"})
    _, cursor = tick(cursor, {"base": "b", "gone": "g"}, versions=("a1", "a2"), datasets_ready=ready("a1"))
    _, cursor = tick(cursor, {"base": "b"}, versions=("a1", "a2"), datasets_ready=ready("a1"))
    assert [p[0] for p in cursor["pending"]] == ["base"] and set(cursor["models"]) == {"base"}
    plan, cursor = tick(cursor, {}, versions=("a1", "a2"), datasets_ready=ready("a1"))
    assert not plan.datasets and not plan.evaluations and cursor["pending"] == []


def test_identities_and_their_warnings():
    specs = {"m": ModelSpec(name="m", backend="transformers", path="demo:x")}
    identities, warnings = model_identities(specs, None)
    assert list(identities) == ["m"] and not warnings
    revised = {"m": specs["m"].model_copy(update={"revision": "r2"})}
    assert model_identities(revised, {"models": identities})[0]["m"] != identities["m"]
    batch = {"m": specs["m"].model_copy(update={"batch_size": 4})}
    assert model_identities(batch, None)[0] == identities  # a setting, not part of the identity
    down = {"t": ModelSpec(name="t", backend="tgi", path="t", base_url="http://127.0.0.1:9", watch=True)}
    kept, warnings = model_identities(down, {"models": {"t": "last"}})
    assert kept == {"t": "last"} and warnings[0].startswith("t: could not read the served revision")


def build(code="c1", used="2", history=(("2", "d1"), ("1", "d0")), scenario="s", model="m", version="v"):
    return PromptsBuild(scenario, model, version, code, used, history)


def test_stale_on_code_version_and_on_data_version():
    assert find_stale([build()], {"s": "c1"}) == {}
    assert find_stale([build(code="c0")], {"s": "c1"}) == {("m", "v"): {"s definition changed"}}
    # prompts built from an older dataset materialization with other content
    assert find_stale([build(used="1")], {"s": "c1"}) == {("m", "v"): {"s dataset changed"}}
    # the dataset was rebuilt with the same content: not stale
    assert find_stale([build(used="1", history=(("2", "d0"), ("1", "d0")))], {"s": "c1"}) == {}
    # unknown input, or no dataset history: only the code version counts
    assert find_stale([build(used=None), build(history=(), model="m2")], {"s": "c1"}) == {}
    both = find_stale(
        [build(code="c0", used="1"), build(scenario="t", code="t0"), build(model="m2")], {"s": "c1", "t": "t1"}
    )
    assert both == {("m", "v"): {"s definition changed", "s dataset changed", "t definition changed"}}


def test_stale_runs_are_keyed_by_tick_and_say_why():
    runs = stale_runs({("m", "v"): {"b changed", "a changed"}, ("a", "v"): {"x"}}, "2026-11-30T03:00:00+00:00")
    assert [(r.model, r.run_key) for r in runs] == [
        ("a", "stale:a:v:2026-11-30T03:00:00+00:00"),
        ("m", "stale:m:v:2026-11-30T03:00:00+00:00"),
    ]
    assert runs[1].tags == {REASON_TAG: "stale: a changed, b changed"}


def test_code_version_follows_the_scenario_file_and_its_template(tmp_path):
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    catalog = Catalog(tmp_path / "assets")
    first = catalog.code_version("synthetic_reasoning")
    assert first == Catalog(tmp_path / "assets").code_version("synthetic_reasoning") and len(first) == 12
    template = catalog.templates_dir / catalog.scenario("synthetic_reasoning").adapter.template_file
    template.write_text(template.read_text() + "\n")
    second = catalog.code_version("synthetic_reasoning")
    spec = tmp_path / "assets" / "scenarios" / "synthetic_reasoning.yaml"
    spec.write_text(spec.read_text() + "# edited\n")
    assert len({first, second, catalog.code_version("synthetic_reasoning")}) == 3


def test_an_estimate_whose_interval_holds_another_models_value_is_completed():
    from holistic_dagster.automation.planning import undecided_estimates

    estimates = [
        {"model": "new", "version": "v5", "scenario": "mmlu", "metric": "exact_match", "ci_low": 0.30, "ci_high": 0.40},
        {
            "model": "new",
            "version": "v5",
            "scenario": "boolq",
            "metric": "exact_match",
            "ci_low": 0.70,
            "ci_high": 0.80,
        },
        {"model": "new", "version": "v4", "scenario": "mmlu", "metric": "exact_match", "ci_low": 0.30, "ci_high": 0.40},
    ]
    measured = [
        {"model": "a", "version": "v5", "scenario": "mmlu", "metric": "exact_match", "value": 0.35},  # inside
        {"model": "a", "version": "v5", "scenario": "boolq", "metric": "exact_match", "value": 0.60},  # outside
        {
            "model": "a",
            "version": "v4",
            "scenario": "mmlu",
            "metric": "quasi_exact_match",
            "value": 0.35,
        },  # other metric
        {"model": "new", "version": "v4", "scenario": "mmlu", "metric": "exact_match", "value": 0.35},  # itself
        {"model": "b", "version": "v4", "scenario": "mmlu", "metric": "exact_match", "value": float("nan")},
    ]
    (run,) = undecided_estimates(estimates, measured)
    assert (run.model, run.version, run.scenarios) == ("new", "v5", ("mmlu",))
    assert run.run_key == "complete:new:v5:mmlu" and "mmlu" in run.tags["holistic/reason"]
    assert undecided_estimates([], measured) == []
