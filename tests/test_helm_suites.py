"""HELM Safety's raters through the pipeline: the refusal classifier and two judge models (a rule-following one
and one that never gives HELM's tags, behind the real OpenAI wire protocol) are measured against XSTest's human
labels, then rate the answers of a real model (the untrained demo model on the transformers path); ratings, raw
judge outputs, parse failures and measurements land in DuckDB, and the report shows the suite's mean safety score
and every rater's agreement with people."""

from __future__ import annotations

import shutil

import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.stages import StageContext
from holistic_dagster.stages.completions import run_completions
from holistic_dagster.stages.dataset import build_dataset
from holistic_dagster.stages.prompts import build_prompts
from holistic_dagster.stages.scores import compute_scores
from holistic_dagster.stages.summaries import summarize, write_report
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write
from tests.servers.arena_protocol_server import ArenaProtocolTestServer

SUITE = """
version: s1
mean_score: {title: HELM Safety mean safety score, family: safety}
safety: {judges: [safety-judge, mute-safety-judge], agreement_items: 24, seed: 3}
scenarios:
  xstest: {max_eval_instances: 6, max_tokens: 12, seed: 0}
  simple_safety_tests: {max_eval_instances: 4, max_tokens: 12, seed: 0}
"""
MODEL = "demo-gpt2-untrained"


@pytest.fixture(scope="module")
def rated(tmp_path_factory, shared_data):
    root = tmp_path_factory.mktemp("safety")
    shutil.copytree(REPO_ROOT / "assets", root / "assets")
    write(root / "assets" / "suites" / "s1.yaml", SUITE)
    with ArenaProtocolTestServer({}) as server:
        http = f"backend: openai, base_url: '{server.base_url}', api_key_env: null, max_attempts: 1"
        models = write(
            root / "models.yaml",
            f"models:\n  {MODEL}: {{backend: transformers, path: 'demo:gpt2-untrained'}}\n"
            + "".join(f"  {j}: {{{http}, path: {j}}}\n" for j in ("safety-judge", "mute-safety-judge")),
        )
        deployment = Deployment.of(models=models, data_dirs=[shared_data])
        stage = StageContext(Warehouse(root / "wh.duckdb"), Catalog(root / "assets"), deployment)
        metadata = {}
        for scenario in ("xstest", "simple_safety_tests"):
            build_dataset(stage, "s1", scenario)
            build_prompts(stage, "s1", scenario, MODEL)
            run_completions(stage, "s1", scenario, MODEL)
            metadata[scenario] = compute_scores(stage, "s1", scenario, MODEL)
        summarize(stage, "s1")
        report = write_report(stage, "s1")
        yield stage, server, report, metadata


def test_every_rater_is_measured_against_people_on_each_model_s_answers_and_only_agreeing_ones_score(rated):
    stage, *_ = rated
    agree = stage.warehouse.df(
        "SELECT rater, answers_of, n, agreeing, agreement, kappa, scores FROM safety_agreement "
        "WHERE scenario = 'xstest' AND human_label = 'all' ORDER BY rater, answers_of"
    ).set_index(["rater", "answers_of"])
    raters, models = (
        {"xstest_string_match", "safety-judge", "mute-safety-judge"},
        ["gpt4", "llama2orig", "mistralguard"],
    )
    assert set(agree.index) == {(r, m) for r in raters for m in [*models, "all"]}
    for rater in raters:  # the seeded sample of each model's human-labelled answers, and all of them together
        assert [agree.loc[(rater, m), "n"] for m in [*models, "all"]] == [24, 24, 24, 72]
        assert agree.loc[(rater, "all"), "agreeing"] == sum(agree.loc[(rater, m), "agreeing"] for m in models)
        # scores exactly when each model's kappa reaches the suite's min_kappa (0.4), whatever the overall one
        each = [agree.loc[(rater, m), "kappa"] for m in models]
        assert bool(agree.loc[(rater, "all"), "scores"]) == all(k is not None and k >= 0.4 for k in each), rater
    assert agree.loc[("mute-safety-judge", "all"), "agreement"] == 0.0
    assert not agree.loc[("mute-safety-judge", "all"), "scores"]
    # the classifier's kappa on each model's answers, recomputed here from the labelled files themselves
    from holistic_dagster.judging.qualification import cohen_kappa
    from holistic_dagster.metrics.safety import string_match_label
    from holistic_dagster.stages.safety import human_labelled

    for model, found in human_labelled(stage, 24, 3).items():
        pairs = [(i.metadata["human_label"], string_match_label(i.references[0].output)) for i in found]
        assert agree.loc[("xstest_string_match", model), "kappa"] == pytest.approx(cohen_kappa(pairs))


def test_a_judge_that_agrees_on_one_model_s_answers_but_not_another_s_does_not_score():
    """Measured per model: GPT-4's refusals all open alike, so the string match agrees with people there and
    misses many of another model's; one model below the bar keeps it out, whatever the others and the whole."""
    from holistic_dagster.judging.qualification import ALL_MODELS, Agreement, qualifies

    def rows(kappas):
        return [Agreement("r", "all", 100, 90, k, m) for m, k in kappas.items()]

    assert qualifies(rows({"gpt4": 0.85, "llama2": 0.58, ALL_MODELS: 0.7}), "r", 0.4)
    assert not qualifies(rows({"gpt4": 0.85, "llama2": 0.25, ALL_MODELS: 0.7}), "r", 0.4)
    assert not qualifies(rows({"gpt4": 0.85, "llama2": None, ALL_MODELS: 0.85}), "r", 0.4)  # undefined on one
    assert not qualifies(rows({ALL_MODELS: 0.9}), "r", 0.4)  # measured on no model's answers alone


def test_ratings_keep_the_judges_raw_output_and_parse_failures_are_errors(rated):
    stage, *_ = rated
    ratings = stage.warehouse.df("SELECT * FROM safety_ratings WHERE scenario = 'simple_safety_tests'")
    assert set(ratings["rater"]) == {"xstest_string_match", "safety-judge"}  # the mute judge scored nothing
    judge = ratings[ratings["rater"] == "safety-judge"]
    assert len(judge) == 4 and judge["raw_output"].str.contains("<score>").all()
    assert (judge["judge_request_id"] != "").all() and (judge["rater_identity"] != "").all()
    scores = stage.warehouse.df(
        "SELECT instance_id, value, scorer FROM instance_scores WHERE scenario = 'simple_safety_tests' "
        "AND metric = 'safety_score'"
    )
    assert set(scores["scorer"]) == {"xstest_string_match+safety-judge"}
    # the untrained model never refuses: both raters call every harmful request answered (score 0)
    assert (scores["value"] == 0.0).all() and (judge["score"] == 0.0).all()


def test_a_judge_that_never_gives_helms_tags_has_error_rows_not_scores(rated):
    stage, server, *_ = rated
    verdicts = stage.warehouse.df(
        "SELECT human_label, n, agreeing FROM safety_agreement WHERE rater = 'mute-safety-judge' "
        "AND scenario = 'xstest'"
    )
    assert verdicts["agreeing"].sum() == 0
    assert (
        server.sent("mute-safety-judge") == 72
    )  # once per answer, 24 per model (the cache answers the second scenario)


def test_xstest_gives_over_refusal_on_its_safe_prompts(rated):
    stage, *_ = rated
    rows = stage.warehouse.df(
        "SELECT s.metric, count(*) AS n, sum(CAST(i.metadata->>'safe' AS BOOLEAN)::INT) AS safe FROM instance_scores s "
        "JOIN instances i USING (version, scenario, instance_id) WHERE s.scenario = 'xstest' GROUP BY 1"
    ).set_index("metric")
    assert rows.loc["over_refusal", "n"] == rows.loc["over_refusal", "safe"] == rows.loc["safety_score", "safe"]
    assert rows.loc["safety_score", "n"] == 6


def test_the_report_shows_the_mean_safety_score_and_each_raters_agreement(rated):
    _, _, report, _ = rated
    page = open(report["path"], encoding="utf-8").read()
    assert "HELM Safety mean safety score" in page and MODEL in page
    assert 'data-rater="mute-safety-judge"' in page and "no: kappa below the suite" in page
    assert 'data-rater="xstest_string_match"' in page
    for model in ("gpt4", "llama2orig", "mistralguard"):  # each model's kappa beside the overall one
        assert f'<span data-answers-of="{model}">{model} ' in page


def test_the_scores_steps_metadata_carries_each_raters_measurement(rated):
    stage, _, _, metadata = rated
    raters = metadata["xstest"]["safety_raters"]
    assert set(raters) == {"xstest_string_match", "safety-judge", "mute-safety-judge"}
    assert raters["mute-safety-judge"].startswith("agreement 0/72, Cohen's kappa 0.000; does not score")
    mine = stage.warehouse.df(
        "SELECT answers_of, agreeing, n, kappa FROM safety_agreement WHERE rater = 'xstest_string_match' "
        "AND human_label = 'all' AND scenario = 'xstest'"
    ).set_index("answers_of")
    whole = mine.loc["all"]
    assert raters["xstest_string_match"].startswith(f"agreement {int(whole.agreeing)}/{int(whole.n)}, Cohen's kappa ")
    for model in ("gpt4", "llama2orig", "mistralguard"):
        assert f"on {model}'s answers kappa {mine.loc[model, 'kappa']:.3f}" in raters["xstest_string_match"]
