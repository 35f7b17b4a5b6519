"""End to end through Dagster: two demo models x suite v1 x every scenario, into a real DuckDB file,
with the asset checks evaluated, and every score joined back through `lineage` to its source file."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from holistic_dagster import quality
from holistic_dagster.defs.runner import RunFailed, evaluate_suite
from holistic_dagster.metrics.scoring import metrics_per_instance
from holistic_dagster.warehouse import Warehouse
from tests.conftest import MODELS


def _one(wh: Warehouse, sql: str, params=None):
    return wh.df(sql, params).iloc[0, 0]


def test_every_stage_wrote_rows_for_every_model_and_scenario(suite_run, catalog):
    wh = suite_run["wh"]
    suite = catalog.suite("v1")
    expected_test = {}
    for name, pin in suite.scenarios.items():
        spec, _ = catalog.resolved_scenario("v1", name)
        expected_test[name] = pin.max_eval_instances * len(spec.subsets)
    counts = dict(wh.df("SELECT scenario, count(*) FROM instances WHERE split = 'test' GROUP BY 1").values)
    assert counts == expected_test
    for model in MODELS:
        for name in suite.scenarios:
            spec = catalog.scenario(name)
            n_scores = _one(wh, "SELECT count(*) FROM instance_scores WHERE model = ? AND scenario = ?", [model, name])
            assert n_scores == expected_test[name] * metrics_per_instance(spec.metrics), (model, name)
            n_prompts = _one(
                wh, "SELECT count(DISTINCT request_id) FROM prompts WHERE model = ? AND scenario = ?", [model, name]
            )
            n_completions = _one(wh, "SELECT count(*) FROM completions WHERE model = ? AND scenario = ?", [model, name])
            assert n_prompts == n_completions > 0
    families = set(wh.df("SELECT DISTINCT family FROM leaderboard WHERE version = 'v1'")["family"])
    assert families == {"accuracy", "calibration", "efficiency"}


def test_every_score_joins_back_to_its_source_file(suite_run):
    wh = suite_run["wh"]
    total = _one(wh, "SELECT count(*) FROM instance_scores")
    assert total > 0
    assert _one(wh, "SELECT count(*) FROM lineage") == total
    assert _one(wh, "SELECT count(*) FROM scores") == total
    broken = _one(
        wh,
        "SELECT count(*) FROM lineage WHERE source_sha256 IS NULL OR length(source_sha256) <> 64 "
        "OR prompt IS NULL OR completion_text IS NULL OR model_revision IS NULL",
    )
    assert broken == 0
    uris = set(wh.df("SELECT DISTINCT source_uri FROM lineage")["source_uri"])
    assert any(u.endswith("mmlu/test/abstract_algebra_test.csv") for u in uris)
    assert any(u.startswith("generator://synthetic_reasoning") for u in uris)


def test_scores_record_how_they_were_produced(suite_run):
    wh = suite_run["wh"]
    run_ids = {r.result.run_id for r in suite_run["runs"] if r.label.startswith("evaluate")}
    rows = wh.df(
        "SELECT DISTINCT model, backend, model_revision, batch_size, decoding, library_versions, "
        "dagster_run_id FROM scores"
    )
    assert set(rows["model"]) == set(MODELS) and set(rows["backend"]) == {"transformers"}
    assert set(rows["dagster_run_id"]) == run_ids
    assert rows["model_revision"].str.startswith("sha256:").all() and (rows["batch_size"] == 16).all()
    assert rows["library_versions"].str.contains('"transformers"').all()
    assert rows["decoding"].str.contains('"method"').all()


def test_every_asset_check_passed(suite_run):
    evaluations = [e for r in suite_run["runs"] for e in r.result.get_asset_check_evaluations()]
    per_model_checks = sum(len(quality.STAGE_CHECKS[s]) for s in ("prompts", "completions", "scores"))
    assert len(evaluations) == 5 * (len(quality.STAGE_CHECKS["dataset"]) + len(MODELS) * per_model_checks) + 1
    failed = [(e.asset_key.to_user_string(), e.check_name) for e in evaluations if not e.passed]
    assert failed == []


def test_the_briefly_trained_model_beats_the_untrained_one(suite_run):
    board = (
        suite_run["wh"]
        .df("SELECT model, value FROM leaderboard WHERE scenario = 'synthetic_reasoning' AND metric = 'f1_score'")
        .set_index("model")["value"]
    )
    assert board["demo-llama-tuned"] > board["demo-gpt2-untrained"] + 0.2


def test_rerunning_a_partition_replaces_it_with_identical_scores(suite_run):
    wh, defs = suite_run["wh"], suite_run["defs"]
    before = wh.df(
        "SELECT scenario, instance_id, metric, value FROM instance_scores WHERE model = 'demo-gpt2-untrained' "
        "AND family = 'accuracy' ORDER BY ALL"
    )
    evaluate_suite(defs, suite_run["instance"], "v1", ["demo-gpt2-untrained"])
    after = wh.df(
        "SELECT scenario, instance_id, metric, value FROM instance_scores WHERE model = 'demo-gpt2-untrained' "
        "AND family = 'accuracy' ORDER BY ALL"
    )
    assert after.equals(before)


def test_bad_input_fails_the_dataset_run_with_a_clear_error_and_keeps_earlier_results(
    suite_run, shared_data, tmp_path, monkeypatch
):
    wh = suite_run["wh"]
    before = wh.df("SELECT * FROM instances WHERE scenario = 'gsm8k' ORDER BY instance_id")
    broken = tmp_path / "data"
    shutil.copytree(shared_data, broken, ignore=shutil.ignore_patterns("tgi", "bold", "bbq", "humaneval"))
    (broken / "gsm8k" / "test.jsonl").chmod(0o644)
    lines = (broken / "gsm8k" / "test.jsonl").read_text().splitlines()
    lines[41] = lines[41][:-5]  # cut the end off record 42
    (broken / "gsm8k" / "test.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(broken))
    with pytest.raises(RunFailed, match=r"gsm8k/test.jsonl, record line 42: not valid JSON"):
        evaluate_suite(suite_run["defs"], suite_run["instance"], "v1", [])
    after = wh.df("SELECT * FROM instances WHERE scenario = 'gsm8k' ORDER BY instance_id")
    assert after.equals(before)


@pytest.fixture
def tampered(suite_run, tmp_path):
    copy = tmp_path / "tampered.duckdb"
    shutil.copy(suite_run["path"], copy)
    return copy


def _tamper(path, sql):
    with duckdb.connect(str(path)) as con:
        con.execute(sql)


def test_checks_fail_on_a_corrupted_dataset(tampered):
    _tamper(
        tampered,
        "UPDATE instances SET num_correct_references = 0 WHERE scenario = 'mmlu' "
        "AND instance_id = (SELECT min(instance_id) FROM instances WHERE scenario = 'mmlu' AND split = 'test')",
    )
    outcomes = {o.name: o for o in quality.check_dataset(Warehouse(tampered), "v1", "mmlu")}
    assert not outcomes["correct_reference_exists"].passed
    assert outcomes["correct_reference_exists"].details["expect_column_values_to_be_between"]["unexpected_count"] == 1
    assert outcomes["instance_ids_unique"].passed


def test_checks_fail_on_a_missing_completion(tampered):
    _tamper(
        tampered,
        "DELETE FROM completions WHERE model = 'demo-llama-tuned' AND scenario = 'boolq' AND request_id = "
        "(SELECT min(request_id) FROM completions WHERE model = 'demo-llama-tuned' AND scenario = 'boolq')",
    )
    outcomes = {o.name: o for o in quality.check_completions(Warehouse(tampered), "v1", "boolq", "demo-llama-tuned")}
    assert not outcomes["one_completion_per_request"].passed
    assert "expect_table_row_count_to_equal" in outcomes["one_completion_per_request"].details


def test_checks_fail_on_out_of_range_and_missing_scores(tampered):
    _tamper(
        tampered,
        "UPDATE instance_scores SET value = 1.5 WHERE model = 'demo-llama-tuned' AND scenario = 'mmlu' "
        "AND metric = 'exact_match' AND instance_id = (SELECT min(instance_id) FROM instance_scores "
        "WHERE scenario = 'mmlu')",
    )
    _tamper(
        tampered,
        "DELETE FROM instance_scores WHERE model = 'demo-llama-tuned' AND scenario = 'mmlu' "
        "AND metric = 'quasi_exact_match'",
    )
    outcomes = {o.name: o for o in quality.check_scores(Warehouse(tampered), "v1", "mmlu", "demo-llama-tuned", 7)}
    assert not outcomes["scores_in_range"].passed
    assert outcomes["scores_in_range"].details["expect_column_values_to_be_between"]["examples"] == [1.5]
    assert not outcomes["score_counts_consistent"].passed


def test_leaderboard_check_fails_when_a_model_lacks_a_scenario(tampered):
    _tamper(tampered, "DELETE FROM scenario_metrics WHERE model = 'demo-gpt2-untrained' AND scenario = 'gsm8k'")
    (outcome,) = quality.check_leaderboard(Warehouse(tampered), "v1", ["gsm8k", "mmlu"])
    assert not outcome.passed
    assert outcome.details["expect_column_values_to_be_between"]["unexpected_count"] == 1
