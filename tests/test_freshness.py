"""Re-running an evaluation whose inputs are unchanged runs nothing: each step (datasets, a model's evaluation,
the summaries) is skipped when its inputs equal those of its last successful run and its outputs remain; a
change re-runs exactly the steps it reaches. The CLI decides it before starting Dagster."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.runner import evaluate_suite
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.warehouse import Warehouse
from tests.conftest import SMALL_SUITE, write
from tests.helpers import edit_file

MODEL = "demo-gpt2-untrained"
STEPS = ["datasets for s1", f"evaluate {MODEL}", "leaderboard"]


def test_unchanged_steps_are_skipped_and_a_change_reruns_what_it_reaches(tmp_path, monkeypatch, shared_data):
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(tmp_path / "assets" / "suites" / "s1.yaml", SMALL_SUITE)
    shutil.copytree(shared_data / "boolq", tmp_path / "data" / "boolq")
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "warehouse.duckdb"
    instance = DagsterInstance.ephemeral()

    def evaluate() -> dict[str, str]:
        """{step: why it was skipped, or "" where it ran}"""
        catalog = Catalog(tmp_path / "assets")
        defs = build_definitions(catalog, HolisticResource(warehouse_path=str(path), catalog_dir=str(catalog.root)))
        runs = evaluate_suite(defs, instance, "s1", [MODEL], catalog=catalog, skip_unchanged=True)
        return {r.label: r.skipped for r in runs}

    assert evaluate() == dict.fromkeys(STEPS, "")  # a new warehouse: everything runs
    scores = Warehouse(path).df("SELECT * FROM instance_scores ORDER BY ALL")
    runs_before = len(instance.get_runs())
    again = evaluate()
    assert all(again[s].startswith("inputs unchanged since run ") for s in STEPS), again
    assert len(instance.get_runs()) == runs_before  # no Dagster run at all

    # the data file touched but not changed: the dataset is rebuilt, comes out the same, and nothing after runs
    data = tmp_path / "data" / "boolq" / "dev.jsonl"
    os.utime(data, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns + 10**9))
    touched = evaluate()
    assert touched["datasets for s1"] == "" and touched[f"evaluate {MODEL}"] and touched["leaderboard"]

    # the scenario's template changed: every step runs again (new prompts, new scores, new summaries)
    edit_file(tmp_path / "assets" / "scenarios" / "boolq.yaml", 'input_prefix: "Passage: "', 'input_prefix: "Text: "')
    changed = evaluate()
    assert changed == dict.fromkeys(STEPS, ""), changed
    prompts = Warehouse(path).df("SELECT prompt FROM prompts WHERE version = 's1'")["prompt"]
    assert prompts.str.contains("Text: ").all()
    assert evaluate()["leaderboard"]  # and then unchanged again

    # the same files through another folder path (moved, re-mounted): content decides, nothing runs
    (tmp_path / "data").rename(tmp_path / "moved")
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path / "moved"))
    moved = evaluate()
    assert all(moved[s].startswith("inputs unchanged since run ") for s in STEPS), moved

    # an output deleted behind its back: that step runs again
    wh = Warehouse(path)
    wh.replace({"version": "s1"}, {"leaderboard_stats": wh.df("SELECT * FROM leaderboard_stats LIMIT 0")})
    assert evaluate()["leaderboard"] == ""
    assert Warehouse(path).df("SELECT count(*) AS n FROM instance_scores")["n"].iat[0] == len(scores)

    # a data folder put in front with its own copy of the file: what a run would read changed, the datasets run
    front = tmp_path / "front" / "boolq"
    shutil.copytree(tmp_path / "moved" / "boolq", front)
    (front / "dev.jsonl").write_text("".join((front / "dev.jsonl").read_text().splitlines(keepends=True)[::-1]))
    monkeypatch.setenv("HOLISTIC_DATA_DIR", f"{tmp_path / 'front'}:{tmp_path / 'moved'}")
    assert evaluate()["datasets for s1"] == ""


@pytest.mark.slow  # three `holistic evaluate` processes
def test_the_cli_skips_without_starting_dagster_when_nothing_changed(tmp_path, shared_data):
    """`holistic evaluate` after an evaluation recorded by evaluate_suite: its own plan agrees, and it answers
    from the warehouse without a Dagster run (nor Dagster: it is not imported), also from a new shell without
    HOLISTIC_DATA_DIR (the data folders it was given are remembered)."""
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(tmp_path / "assets" / "suites" / "s1.yaml", SMALL_SUITE)
    env = {
        **os.environ,
        "HOLISTIC_CATALOG": str(tmp_path / "assets"),
        "HOLISTIC_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "COLUMNS": "200",
    }
    command = [str(Path(sys.executable).with_name("holistic")), "evaluate", "--model", MODEL, "--suite", "s1"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    # no terminal (a pipe, a CI log): a line per scenario as its requests are answered, not minutes of silence
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        (n,) = con.execute("SELECT count(*) FROM completions WHERE scenario = 'boolq'").fetchone()
    line = rf"^  {MODEL} on boolq: {n} requests \({n} sent, 0 from the cache\) in \d+ s$"
    assert n > 0 and re.search(line, first.stdout, re.M), first.stdout
    probe = "import sys, runpy; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    check = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('dagster imported:', 'dagster' in sys.modules, file=sys.stderr))"
    )
    # a new shell: no HOLISTIC_DATA_DIR; the folders the first run was given are remembered in the home
    assert str(shared_data.resolve()) in (Path(os.environ["HOLISTIC_HOME"]) / "settings.toml").read_text()
    new_shell = {k: v for k, v in env.items() if k != "HOLISTIC_DATA_DIR"}
    second = subprocess.run(
        [sys.executable, "-c", f"{check}\n{probe}", *command], env=new_shell, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert "nothing changed" in second.stdout
    for step in STEPS:
        assert f"> {step}: skipped, inputs unchanged since run" in second.stdout, second.stdout
    assert "dagster imported: False" in second.stderr
    assert "accuracy (suite s1)" in second.stdout  # the leaderboard, as after any evaluation
    forced = subprocess.run([*command, "--force"], env=env, capture_output=True, text=True, timeout=600)
    assert forced.returncode == 0 and "inputs unchanged" not in forced.stdout, forced.stdout
    # s1's optional scenario without data: skipped with its reason, in one line, on every run that runs
    for run in (first, forced):
        assert "> med_qa: skipped, no local copy of its data; downloaded from https://drive" in run.stdout


@pytest.mark.slow  # two `holistic evaluate` processes and a run killed between them
def test_a_killed_run_is_marked_failed_also_when_nothing_is_left_to_run(tmp_path):
    """The README says the next evaluate marks a killed run failed; when that evaluate found every step
    unchanged it did not open the instance, and the run stayed STARTED."""
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
    from dagster._core.instance.ref import InstanceRef

    from tests.defs.test_abandoned_runs import STUCK_RUN
    from tests.helpers import kill_when

    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(tmp_path / "assets" / "suites" / "s1.yaml", SMALL_SUITE)
    home = tmp_path / "dagster"
    env = {
        **os.environ,
        "HOLISTIC_CATALOG": str(tmp_path / "assets"),
        "HOLISTIC_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        "DAGSTER_HOME": str(home),
        "COLUMNS": "200",
    }
    command = [str(Path(sys.executable).with_name("holistic")), "evaluate", "--model", MODEL, "--suite", "s1"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))

    def started() -> list:
        return instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))

    stuck = subprocess.Popen([sys.executable, "-c", STUCK_RUN], env=env, start_new_session=True)
    kill_when(stuck, started, timeout_s=120, interval_s=0.2, what="the stuck run to start")
    (zombie,) = started()
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "nothing changed" in second.stdout and "marked 1 run(s) failed whose process was killed" in second.stdout
    assert instance.get_run_by_id(zombie.run_id).status == DagsterRunStatus.FAILURE
    assert not list((home / "in_process_runs").glob("*.json"))  # its mark: dealt with


def test_a_model_file_reached_through_a_linked_folder_is_the_same_input(tmp_path):
    """A model's weights in a linked virtual environment (the console script's interpreter and `.venv/bin/python`
    see different paths to the same file) keep one key; another file does not share it."""
    from holistic_dagster.automation.freshness import files_state

    weights = write(tmp_path / "venv" / "weights.gguf", "weights")
    (tmp_path / "linked").symlink_to(tmp_path / "venv")
    direct, linked = files_state([str(weights)]), files_state([str(tmp_path / "linked" / "weights.gguf")])
    assert direct == linked and direct[0][0] == str(weights.resolve()) and direct[0][1] == len("weights")
    other = write(tmp_path / "venv" / "other.gguf", "weights")
    assert files_state([str(other)]) != direct
