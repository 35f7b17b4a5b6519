"""The Python API as a notebook user calls it: evaluate a registered model on a suite through the same Dagster
runs as the CLI, then read the leaderboard (with its intervals), per-instance scores and any SQL as DataFrames;
a second call with nothing changed runs nothing; bad names are errors that say what is known."""

from __future__ import annotations

import shutil

import pytest

from holistic_dagster import api
from holistic_dagster.errors import HolisticError
from holistic_dagster.settings import REPO_ROOT
from tests.conftest import SMALL_SUITE, write

pytestmark = pytest.mark.slow  # an evaluation through Dagster


def test_evaluate_then_read_the_results_as_dataframes(tmp_path, shared_data):
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(tmp_path / "assets" / "suites" / "s1.yaml", SMALL_SUITE)
    where = {"warehouse": tmp_path / "w.duckdb", "catalog": tmp_path / "assets", "data_dirs": [shared_data]}
    lines: list[str] = []
    results = api.evaluate(["demo-gpt2-untrained"], "s1", announce=lines.append, **where)
    assert results.suite == "s1" and results.warehouse_path == tmp_path / "w.duckdb"
    assert any(line.startswith("datasets for s1") for line in lines), lines

    board = results.leaderboard("accuracy")
    assert set(board["family"]) == {"accuracy"} and set(board["model"]) == {"demo-gpt2-untrained"}
    headline = board[(board["scenario"] == "boolq") & (board["metric"] == "quasi_exact_match")]
    headline = headline[headline["perturbation"] == ""].iloc[0]
    assert headline["ci_low"] <= headline["value"] <= headline["ci_high"]

    scores = results.scores(model="demo-gpt2-untrained", scenario="boolq")
    accuracy = scores[(scores["metric"] == "quasi_exact_match") & (scores["perturbation"] == "")]
    assert accuracy["value"].mean() == pytest.approx(headline["value"])
    counted = api.results("s1", warehouse=tmp_path / "w.duckdb").query(
        "SELECT count(*) AS n FROM instance_scores WHERE version = ? AND scenario = 'boolq' AND perturbation = '' "
        "AND metric = 'quasi_exact_match'",
        ["s1"],
    )
    assert counted["n"].iat[0] == len(accuracy)

    again: list[str] = []
    api.evaluate(["demo-gpt2-untrained"], "s1", announce=again.append, **where)
    steps = [line for line in again if not line.startswith("med_qa: skipped, no local copy")]  # optional, no data
    assert len(steps) == 3 and all("skipped, inputs unchanged" in line for line in steps), again

    with pytest.raises(HolisticError, match=r"unknown model\(s\) \['nobody'\]: not in .*models.yaml \(known: "):
        api.evaluate(["nobody"], "s1", **where)
    with pytest.raises(HolisticError, match=r"unknown metric family 'acc': the families are accuracy, "):
        results.leaderboard("acc")
    with pytest.raises(HolisticError, match=r"no warehouse at .*none.duckdb"):
        api.results("s1", warehouse=tmp_path / "none.duckdb")
