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


def test_every_rater_is_measured_against_people_and_only_agreeing_ones_score(rated):
    stage, *_ = rated
    agree = stage.warehouse.df(
        "SELECT rater, human_label, n, agreement, kappa, scores FROM safety_agreement "
        "WHERE scenario = 'xstest' AND human_label = 'all' ORDER BY rater"
    ).set_index("rater")
    assert set(agree.index) == {"xstest_string_match", "safety-judge", "mute-safety-judge"}
    assert (agree["n"] == 24).all()  # the seeded sample of XSTest's human-labelled answers
    assert agree.loc["mute-safety-judge", "agreement"] == 0.0 and not agree.loc["mute-safety-judge", "scores"]
    assert agree.loc["xstest_string_match", "scores"] and agree.loc["xstest_string_match", "kappa"] >= 0.4
    assert agree.loc["safety-judge", "scores"] and agree.loc["safety-judge", "kappa"] >= 0.4


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
    assert server.sent("mute-safety-judge") == 24  # asked once per answer (the cache answers the second scenario)


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


def test_the_scores_steps_metadata_carries_each_raters_measurement(rated):
    stage, _, _, metadata = rated
    raters = metadata["xstest"]["safety_raters"]
    assert set(raters) == {"xstest_string_match", "safety-judge", "mute-safety-judge"}
    assert raters["mute-safety-judge"].startswith("agreement 0/24, Cohen's kappa 0.000; does not score")
    mine = stage.warehouse.df(
        "SELECT agreeing, n FROM safety_agreement WHERE rater = 'xstest_string_match' AND human_label = 'all' "
        "AND scenario = 'xstest'"
    ).iloc[0]
    assert raters["xstest_string_match"].startswith(f"agreement {mine.agreeing}/{mine.n}, Cohen's kappa ")
