"""The `holistic` command as a user runs it (a real subprocess on the real warehouse file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SUITE

HOLISTIC = str(Path(sys.executable).with_name("holistic"))


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [HOLISTIC, *args], capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200", **env}
    )


def test_query_prints_rows(suite_run):
    out = run(
        "query", "SELECT count(*) AS n FROM lineage WHERE model = 'demo-llama-tuned'", "--db", str(suite_run["path"])
    )
    assert out.returncode == 0, out.stderr
    expected = suite_run["wh"].df("SELECT count(*) FROM instance_scores WHERE model = 'demo-llama-tuned'").iat[0, 0]
    assert str(expected) in out.stdout and "1 row(s)" in out.stdout


def test_query_as_csv(suite_run):
    out = run("query", "SELECT DISTINCT model FROM scores ORDER BY model", "--csv", "--db", str(suite_run["path"]))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["model", "demo-gpt2-untrained", "demo-llama-tuned"]


def test_query_refuses_writes_with_a_clear_message(suite_run):
    out = run("query", "DROP TABLE instance_scores", "--db", str(suite_run["path"]))
    assert out.returncode == 1
    assert "opens the warehouse read-only: statements that write" in out.stderr
    assert suite_run["wh"].df("SELECT count(*) FROM instance_scores").iat[0, 0] > 0


def test_leaderboard_prints_one_table_per_family(suite_run):
    out = run("leaderboard", "--version", "v2", "--db", str(suite_run["path"]))
    assert out.returncode == 0, out.stderr
    for family in ("accuracy", "calibration", "robustness", "fairness", "bias", "toxicity", "efficiency"):
        assert f"{family} (suite v2)" in out.stdout
    assert "demo-llama-tuned" in out.stdout and "ece_10_bin" in out.stdout
    missing = run("leaderboard", "--version", "v7", "--db", str(suite_run["path"]))
    assert missing.returncode == 1 and "no results for suite version 'v7'" in missing.stderr


def test_demo_rejects_an_unknown_model_before_doing_anything(tmp_path):
    out = run("demo", "--model", "gpt-17", "--db", str(tmp_path / "w.duckdb"), DAGSTER_HOME=str(tmp_path))
    assert out.returncode == 1
    assert "unknown model 'gpt-17'" in out.stderr and not (tmp_path / "w.duckdb").exists()


def test_compare_prints_paired_verdicts(suite_run):
    out = run("compare", "demo-gpt2-untrained", "demo-llama-tuned", "--version", SUITE, "--db", str(suite_run["path"]))
    assert out.returncode == 0, out.stderr
    assert "demo-llama-tuned vs demo-gpt2-untrained (suite v2, alpha 0.05, paired)" in out.stdout
    assert "synthetic_reasoning" in out.stdout and "better" in out.stdout
    missing = run("compare", "demo-gpt2-untrained", "nobody", "--version", SUITE, "--db", str(suite_run["path"]))
    assert missing.returncode == 1 and "no instances scored for both" in missing.stderr
