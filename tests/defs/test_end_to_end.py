"""End to end through Dagster: two demo models x suite v2 x every scenario, into a real DuckDB file,
with the asset checks evaluated, every applicable metric family filled, and every score joined back through
`lineage` to its source file."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from holistic_dagster import quality
from holistic_dagster.defs.runner import RunFailed, evaluate_suite
from holistic_dagster.metrics import FAMILIES, NO_CI
from holistic_dagster.metrics.scoring import metrics_per_instance
from holistic_dagster.warehouse import Warehouse
from tests.conftest import MODELS, SUITE


def _one(wh: Warehouse, sql: str, params=None):
    return wh.df(sql, params).iloc[0, 0]


def test_every_stage_wrote_rows_for_every_model_and_scenario(suite_run, catalog):
    wh = suite_run["wh"]
    suite = catalog.suite(SUITE)
    expected_test = {}
    for name, pin in suite.scenarios.items():
        spec, _ = catalog.resolved_scenario(SUITE, name)
        expected_test[name] = pin.max_eval_instances * len(spec.subsets)
    counts = dict(
        wh.df("SELECT scenario, count(*) FROM instances WHERE split = 'test' AND perturbation = '' GROUP BY 1").values
    )
    assert counts == expected_test
    for model in MODELS:
        for name in suite.scenarios:
            spec = catalog.scenario(name)
            n_scores = _one(
                wh,
                "SELECT count(*) FROM instance_scores s JOIN instances i USING (version, scenario, instance_id) "
                "WHERE model = ? AND scenario = ? AND i.perturbation = '' "
                "AND family IN ('accuracy', 'calibration', 'efficiency', 'toxicity')",
                [model, name],
            )
            assert n_scores == expected_test[name] * metrics_per_instance(spec.metrics, spec.families), (model, name)
            n_prompts = _one(
                wh, "SELECT count(DISTINCT request_id) FROM prompts WHERE model = ? AND scenario = ?", [model, name]
            )
            n_completions = _one(wh, "SELECT count(*) FROM completions WHERE model = ? AND scenario = ?", [model, name])
            assert n_prompts == n_completions > 0
    families = set(wh.df("SELECT DISTINCT family FROM leaderboard WHERE version = ?", [SUITE])["family"])
    assert families == set(FAMILIES)


def test_every_family_is_filled_where_it_applies_and_says_so_where_not(suite_run, catalog):
    wh = suite_run["wh"]
    board = wh.df("SELECT * FROM leaderboard WHERE version = ?", [SUITE])
    for model in MODELS:
        for name in catalog.suite(SUITE).scenarios:
            spec = catalog.scenario(name)
            cells = board[(board["model"] == model) & (board["scenario"] == name)]
            for family in FAMILIES:
                rows = cells[cells["family"] == family]
                assert len(rows) > 0, (model, name, family)  # no silent holes
                if family in spec.families and family in ("robustness", "fairness", "accuracy", "calibration"):
                    assert rows["value"].notna().all(), (model, name, family)
                elif family not in spec.families:
                    assert rows["value"].isna().all() and rows["note"].str.startswith("not applicable").all()
    # robustness and fairness: the worst case and each perturbation, never above the unperturbed accuracy
    mmlu = board[(board["scenario"] == "openbookqa") & (board["metric"] == "exact_match")]
    for model in MODELS:
        mine = mmlu[mmlu["model"] == model].set_index(["family", "perturbation"])["value"]
        assert mine[("robustness", "worst")] <= mine[("accuracy", "")] >= mine[("fairness", "worst")]
        assert {"typos", "lowercase", "mild_mix", "dialect"} <= set(mine.index.get_level_values(1))
    bbq = board[(board["scenario"] == "bbq") & (board["family"] == "bias")]
    assert set(bbq["metric"]) == {"bbq_bias_ambiguous", "bbq_bias_disambiguated"}
    assert bbq["value"].notna().all()  # separate scoring: every answer names a choice
    toxicity = board[(board["scenario"] == "bold") & (board["family"] == "toxicity")]
    assert set(toxicity["metric"]) == {"toxic_fraction", "expected_max_toxicity", "max_toxicity_probability"}
    assert set(toxicity["scorer"]) == {"lexicon:v1"}
    bias = board[(board["scenario"] == "bold") & (board["family"] == "bias")]
    assert len(bias) == 6 * len(MODELS) and (bias["value"].notna() | bias["note"].str.startswith("undefined")).all()


def test_perturbed_instances_link_to_their_originals(suite_run):
    wh = suite_run["wh"]
    frame = wh.df(
        "SELECT p.instance_id, p.perturbation, p.input, o.input AS original_input, p.source_uri = o.source_uri AS same "
        "FROM instances p JOIN instances o ON o.version = p.version AND o.scenario = p.scenario "
        "AND o.instance_id = p.original_instance_id WHERE p.perturbation <> '' AND p.version = ?",
        [SUITE],
    )
    total = _one(wh, "SELECT count(*) FROM instances WHERE perturbation <> '' AND version = ?", [SUITE])
    assert len(frame) == total > 0 and frame["same"].all()
    lower = frame[frame["perturbation"] == "lowercase"]
    assert (lower["input"] == lower["original_input"].str.lower()).all()
    assert (frame["instance_id"] == frame["instance_id"].str.split("~").str[0] + "~" + frame["perturbation"]).all()


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
    assert rows["decoding"].str.contains('"dtype": "float32"').all()  # what the numbers were computed in


def test_every_asset_check_passed(suite_run, catalog):
    evaluations = [e for r in suite_run["runs"] for e in r.result.get_asset_check_evaluations()]
    per_model_checks = sum(len(quality.STAGE_CHECKS[s]) for s in ("prompts", "completions", "scores"))
    num_scenarios = len(catalog.suite(SUITE).scenarios)
    summaries = sum(len(quality.STAGE_CHECKS[s]) for s in ("leaderboard", "regressions", "alerts"))
    expected = num_scenarios * (len(quality.STAGE_CHECKS["dataset"]) + len(MODELS) * per_model_checks) + summaries
    assert len(evaluations) == expected
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
    evaluate_suite(defs, suite_run["instance"], SUITE, ["demo-gpt2-untrained"])
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
        evaluate_suite(suite_run["defs"], suite_run["instance"], SUITE, [])
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
    outcomes = {o.name: o for o in quality.check_dataset(Warehouse(tampered), SUITE, "mmlu")}
    assert not outcomes["correct_reference_exists"].passed
    assert outcomes["correct_reference_exists"].details["expect_column_values_to_be_between"]["unexpected_count"] == 1
    assert outcomes["instance_ids_unique"].passed and outcomes["perturbations_linked"].passed


def test_checks_fail_on_a_perturbed_instance_without_its_original(tampered):
    _tamper(
        tampered,
        "UPDATE instances SET original_instance_id = 'gone' WHERE scenario = 'mmlu' AND instance_id = "
        "(SELECT min(instance_id) FROM instances WHERE scenario = 'mmlu' AND perturbation = 'typos')",
    )
    outcomes = {o.name: o for o in quality.check_dataset(Warehouse(tampered), SUITE, "mmlu")}
    assert not outcomes["perturbations_linked"].passed


def test_checks_fail_on_a_missing_completion(tampered):
    _tamper(
        tampered,
        "DELETE FROM completions WHERE model = 'demo-llama-tuned' AND scenario = 'boolq' AND request_id = "
        "(SELECT min(request_id) FROM completions WHERE model = 'demo-llama-tuned' AND scenario = 'boolq')",
    )
    outcomes = {o.name: o for o in quality.check_completions(Warehouse(tampered), SUITE, "boolq", "demo-llama-tuned")}
    assert not outcomes["one_completion_per_request"].passed
    assert "expect_table_row_count_to_equal" in outcomes["one_completion_per_request"].details


def _per_instance(catalog, scenario: str) -> int:
    spec = catalog.scenario(scenario)
    return metrics_per_instance(spec.metrics, spec.families)


def test_checks_fail_on_out_of_range_and_missing_scores(tampered, catalog):
    _tamper(
        tampered,
        "UPDATE instance_scores SET value = 1.5 WHERE model = 'demo-llama-tuned' AND scenario = 'mmlu' "
        "AND metric = 'exact_match' AND family = 'accuracy' "
        "AND instance_id = (SELECT min(instance_id) FROM instance_scores WHERE scenario = 'mmlu')",
    )
    _tamper(
        tampered,
        "DELETE FROM instance_scores WHERE model = 'demo-llama-tuned' AND scenario = 'mmlu' "
        "AND metric = 'quasi_exact_match'",
    )
    per_instance = _per_instance(catalog, "mmlu")
    outcomes = {
        o.name: o for o in quality.check_scores(Warehouse(tampered), SUITE, "mmlu", "demo-llama-tuned", per_instance)
    }
    assert not outcomes["scores_in_range"].passed
    assert outcomes["scores_in_range"].details["expect_column_values_to_be_between"]["examples"] == [1.5]
    assert not outcomes["score_counts_consistent"].passed


def test_leaderboard_check_fails_when_a_model_lacks_a_scenario(tampered):
    _tamper(tampered, "DELETE FROM scenario_metrics WHERE model = 'demo-gpt2-untrained' AND scenario = 'gsm8k'")
    (outcome,) = quality.check_leaderboard(Warehouse(tampered), SUITE, ["gsm8k", "mmlu"])
    assert not outcome.passed
    assert outcome.details["expect_column_values_to_be_between"]["unexpected_count"] == 1


def test_scores_check_fails_when_an_applicable_family_produced_nothing(tampered, catalog):
    wh, per_instance = Warehouse(tampered), _per_instance(catalog, "bold")
    assert {o.name: o.passed for o in quality.check_scores(wh, SUITE, "bold", "demo-llama-tuned", per_instance)} == {
        "scores_in_range": True,
        "score_counts_consistent": True,
        "applicable_families_filled": True,
    }
    _tamper(tampered, "DELETE FROM scenario_metrics WHERE scenario = 'bold' AND family = 'toxicity'")
    _tamper(tampered, "UPDATE scenario_metrics SET note = '' WHERE scenario = 'bold' AND family = 'bias'")
    outcome = {o.name: o for o in quality.check_scores(wh, SUITE, "bold", "demo-llama-tuned", per_instance)}
    failed = outcome["applicable_families_filled"]
    assert not failed.passed and "no values for toxicity (applies)" in failed.description


def test_every_leaderboard_cell_has_n_and_a_ci_or_says_why_not(suite_run):
    wh = suite_run["wh"]
    cells = wh.df("SELECT * FROM leaderboard_stats WHERE version = ?", [SUITE])
    assert len(cells) == _one(wh, "SELECT count(*) FROM scenario_metrics WHERE version = ?", [SUITE])
    with_ci = cells[cells["ci_low"].notna()]
    assert (with_ci["ci_low"] <= with_ci["ci_high"] + 1e-9).all()
    inside = (with_ci["ci_low"] <= with_ci["value"] + 1e-9) & (with_ci["value"] <= with_ci["ci_high"] + 1e-9)
    # a mean lies inside its percentile interval; a biased statistic (ECE on a few dozen pairs) need not, and then
    # its cell says so
    assert (inside | (with_ci["family"] == "calibration")).all()
    assert ((with_ci["ci_note"] == NO_CI["outside"]) == ~inside).all()
    no_ci = cells[cells["ci_low"].isna()]
    assert ((no_ci["ci_note"] != "") | no_ci["value"].isna() | (no_ci["family"] == "calibration")).all()
    assert set(with_ci["family"]) >= {"accuracy", "calibration", "robustness", "fairness", "toxicity", "efficiency"}
    rates = wh.df("SELECT * FROM win_rates WHERE version = ?", [SUITE])
    evaluated = set(FAMILIES) - {"safety"}  # suite v2 has no HELM Safety scenario
    assert set(rates["family"]) == evaluated and len(rates) == len(evaluated) * len(MODELS)
    assert rates["mean_win_rate"].between(0, 1).all()


def test_a_small_suite_through_dagster_fills_every_stage_and_passes_every_check(small_run):
    """The fast tier's end-to-end test (the tests above need the whole of suite v2, so they are slow): suite s1
    through the datasets, evaluate_model and leaderboard jobs, every asset check evaluated and passed, every
    family on the leaderboard (filled, or saying why not), every score joined back to its source file."""
    wh = small_run["wh"]
    assert [r.label for r in small_run["runs"]] == ["datasets for s1", "evaluate demo-gpt2-untrained", "leaderboard"]
    evaluations = [e for r in small_run["runs"] for e in r.result.get_asset_check_evaluations()]
    stages = ("dataset", "prompts", "completions", "scores", "leaderboard", "regressions", "alerts")  # one model
    assert len(evaluations) == sum(len(quality.STAGE_CHECKS[s]) for s in stages)
    assert [(e.asset_key.to_user_string(), e.check_name) for e in evaluations if not e.passed] == []
    tests = wh.df("SELECT perturbation, count(*) AS n FROM instances WHERE split = 'test' GROUP BY 1")
    assert dict(zip(tests["perturbation"], tests["n"])) == {"": 4, "typos": 4, "lowercase": 4}
    n_prompts = _one(wh, "SELECT count(DISTINCT request_id) FROM prompts WHERE version = 's1'")
    assert n_prompts == _one(wh, "SELECT count(*) FROM completions WHERE version = 's1'") > 4
    board = wh.df("SELECT * FROM leaderboard WHERE version = 's1'")
    assert set(board["family"]) == set(FAMILIES)
    filled = {"accuracy", "calibration", "robustness", "efficiency"}
    assert board[board["family"].isin(filled)]["value"].notna().all()
    assert board[~board["family"].isin(filled)]["note"].str.startswith("not applicable").all()
    cells = board[board["metric"] == "exact_match"].set_index(["family", "perturbation"])["value"]
    assert cells[("robustness", "worst")] <= cells[("accuracy", "")]
    n_scores = _one(wh, "SELECT count(*) FROM instance_scores WHERE version = 's1'")
    assert _one(wh, "SELECT count(*) FROM lineage WHERE version = 's1'") == n_scores > 0
    assert _one(wh, "SELECT count(*) FROM lineage WHERE length(source_sha256) <> 64 OR prompt IS NULL") == 0
    uris = set(wh.df("SELECT DISTINCT source_uri FROM lineage")["source_uri"])
    assert uris and all(u.endswith("boolq/dev.jsonl") for u in uris)
