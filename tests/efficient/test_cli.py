"""`holistic efficient validate` and `plan` on the shared matrix, a bad matrix named with its problem, and a
warehouse scenario's results read as a matrix."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from holistic_dagster.cli import app
from holistic_dagster.results.matrix import scenario_matrix


def test_validate_prints_a_table_and_writes_the_figures(shared_data, tmp_path):
    # the shared file cut to 12 models x 200 items (the whole file: bench/efficient.py and the slow tests)
    whole = json.loads((shared_data / "helm_classic_responses" / "mmlu.json").read_text())
    cut = {"models": whole["models"][:12], "items": whole["items"][:200],
           "correct": [row[:200] for row in whole["correct"][:12]]}  # fmt: skip
    matrix, out = tmp_path / "cut.json", tmp_path / "v.json"
    matrix.write_text(json.dumps(cut))
    args = ["efficient", "validate", "--matrix", str(matrix), "--test-models", "helm-classic-01,helm-classic-02"]
    done = CliRunner().invoke(app, [*args, "--anchors", "40", "--seeds", "1", "--json", str(out)])
    assert done.exit_code == 0, done.output
    assert "mean absolute error" in done.output and "sequential gate, 132 pairs" in done.output
    figures = json.loads(out.read_text())
    for key in ("mae", "mae_random", "kendall_tau", "kendall_tau_random", "interval_coverage",
                "verdict_agreement", "false_alarm_rate", "mean_fraction_used"):  # fmt: skip
        assert key in figures
    assert figures["anchors"] == 40 and figures["folds"] == [["helm-classic-01", "helm-classic-02"]]
    assert figures["n_full"] == 200 and figures["method"] == "irt"  # 10 models left to fit: enough
    assert 0 <= figures["mae"] < 0.1 and 0 < figures["mean_fraction_used"] <= 1


def test_plan_says_how_many_pairs_a_tolerance_needs(shared_data):
    matrix = shared_data / "helm_classic_responses" / "mmlu.json"
    done = CliRunner().invoke(app, ["efficient", "plan", "--matrix", str(matrix), "--tolerance", "0.005"])
    assert done.exit_code == 0, done.output
    assert "not enough" in done.output and "median of 190 pairs" in done.output


def test_a_bad_matrix_is_named_with_its_problem(tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"models": ["a", "b"], "items": ["q0", "q1"], "correct": [[0, 1], [1, 7]]}))
    done = CliRunner().invoke(app, ["efficient", "validate", "--matrix", str(bad)])
    assert done.exit_code == 1 and str(bad) in done.output
    assert "'b' has values other than a score in [0, 1] or null" in done.output
    done = CliRunner().invoke(app, ["efficient", "validate"])
    assert done.exit_code == 1 and "--matrix FILE or --scenario NAME" in done.output


def test_a_warehouse_scenario_is_read_as_a_matrix(small_run):
    matrix = scenario_matrix(small_run["wh"], "s1", "boolq", "quasi_exact_match")
    assert matrix.models == ["demo-gpt2-untrained"] and matrix.correct.shape == (1, 4)
    assert set(np.unique(matrix.correct)) <= {0.0, 1.0}
    done = CliRunner().invoke(
        app, ["efficient", "plan", "--scenario", "boolq", "--version", "s1", "--tolerance", "0.02",
              "--db", str(small_run["path"])],
        env={"HOLISTIC_CATALOG": str(small_run["catalog"].root)},
    )  # fmt: skip
    assert done.exit_code == 1 and "at least two models" in done.output
