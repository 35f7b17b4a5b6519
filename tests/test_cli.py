"""The `holistic` command as a user runs it (a real subprocess on the real warehouse file)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

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
    # as the report's first screen: the models by mean win rate, best first
    ranked = "SELECT model FROM win_rates WHERE version = 'v2' AND family = 'accuracy' ORDER BY mean_win_rate DESC"
    rates = suite_run["wh"].df(ranked + ", model")["model"].tolist()
    accuracy = out.stdout.split("accuracy (suite v2)")[1].split("calibration (suite v2)")[0]
    header = next(line for line in accuracy.splitlines() if rates[0] in line)
    assert header.index(rates[0]) < header.index(rates[1])
    # a row no model has a value on is one line under its table, with the reason; no shown row is all undefined
    shown = [line for line in out.stdout.splitlines() if line.startswith("│")]
    assert not any(line.count("undefined") + line.count("not computed") == 2 for line in shown)
    assert "undefined for every model on" in out.stdout
    assert "Every metric under every perturbation: holistic leaderboard --all" in out.stdout
    missing = run("leaderboard", "--version", "v7", "--db", str(suite_run["path"]))
    assert (
        missing.returncode == 1 and "unknown suite 'v7': no suite file and no results (the suites: " in missing.stderr
    )


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
    assert missing.returncode == 1 and "'nobody' is not a registered model" in missing.stderr


def invoke(small_run, *args: str):
    """`holistic` in process (typer's test runner), on suite s1's catalog: the fast tier's command tests (the
    subprocess tests above read the whole-suite warehouse, so they are slow)."""
    from typer.testing import CliRunner

    from holistic_dagster.cli import app

    return CliRunner().invoke(app, list(args), env={"HOLISTIC_CATALOG": str(small_run["catalog"].root)})


def test_query_in_process(small_run):
    db = str(small_run["path"])
    out = invoke(small_run, "query", "SELECT count(*) AS n FROM lineage WHERE version = 's1'", "--db", db)
    assert out.exit_code == 0, out.stderr
    expected = small_run["wh"].df("SELECT count(*) FROM instance_scores WHERE version = 's1'").iat[0, 0]
    assert f" {expected} " in out.stdout and "1 row(s)" in out.stdout
    out = invoke(small_run, "query", "SELECT DISTINCT model FROM scores", "--csv", "--db", db)
    assert out.exit_code == 0 and out.stdout.splitlines() == ["model", "demo-gpt2-untrained"]
    out = invoke(small_run, "query", "DROP TABLE instance_scores", "--db", db)
    assert out.exit_code == 1 and "opens the warehouse read-only" in out.stderr
    assert small_run["wh"].df("SELECT count(*) FROM instance_scores").iat[0, 0] == expected


def test_a_helm_leaderboard_shows_its_entries_that_cannot_run_here_in_their_place(small_run):
    path = small_run["catalog"].root / "suites" / "s1.yaml"
    before = path.read_text()
    entries = (
        "{legalbench: 'no data (offline): LegalBench is not here', wmt_14: 'no data (offline): WMT14 is not here'}"
    )
    path.write_text(before + f"columns: [legalbench, boolq, wmt_14, med_qa]\nnot_here: {entries}\n")
    try:
        out = invoke(
            small_run, "leaderboard", "--version", "s1", "--family", "accuracy", "--db", str(small_run["path"])
        )
    finally:
        path.write_text(before)
    assert out.exit_code == 0, out.stderr
    rows = [line.split("│")[1].strip() for line in out.stdout.splitlines() if line.count("│") > 2]
    # the suite's order, as HELM's columns; med_qa: an optional scenario without its data
    assert rows == ["mean win rate", "legalbench", "boolq", "wmt_14", "med_qa"]
    assert out.stdout.count("no data (offline)") == 3 + 3  # a cell each, and each reason below the table
    assert "wmt_14: no data (offline): WMT14 is not here" in out.stdout


def test_an_optional_scenario_without_data_is_a_row_of_no_data_with_the_reason(small_run):
    out = invoke(small_run, "leaderboard", "--version", "s1", "--family", "accuracy", "--db", str(small_run["path"]))
    assert out.exit_code == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.count("│") > 2]
    assert rows[-1].split("│")[1].strip() == "med_qa" and "no data (offline)" in rows[-1]
    assert "med_qa: no data (offline): no local copy of its data; downloaded from https://drive.google" in " ".join(
        out.stdout.split()
    )
    assert small_run["wh"].df("SELECT count(*) FROM instances WHERE scenario = 'med_qa'").iat[0, 0] == 0


def test_leaderboard_and_compare_in_process(small_run):
    db = str(small_run["path"])
    out = invoke(small_run, "leaderboard", "--version", "s1", "--db", db)
    assert out.exit_code == 0, out.stderr
    for family in ("accuracy", "calibration", "robustness", "fairness", "bias", "toxicity", "efficiency"):
        assert f"{family} (suite s1)" in out.stdout
    assert "quasi_exact_match [worst]" in out.stdout and "not applicable" in out.stdout
    # a family that applies to no scenario of the suite (s1 chooses no fairness perturbation): its table says
    # so instead of crashing (it was a pandas TypeError, exit 1)
    fairness = out.stdout.split("fairness (suite s1)")[1].split("robustness (suite s1)")[0]
    assert "not applicable: the suite version chooses no perturbations: boolq" in fairness
    missing = invoke(small_run, "leaderboard", "--version", "v7", "--db", db)
    assert missing.exit_code == 1 and "unknown suite 'v7': no suite file and no results (the suites: " in missing.stderr
    same = invoke(small_run, "compare", "demo-gpt2-untrained", "demo-gpt2-untrained", "--version", "s1", "--db", db)
    assert same.exit_code == 0, same.stderr
    assert "demo-gpt2-untrained vs demo-gpt2-untrained (suite s1, alpha 0.05, paired)" in same.stdout
    assert "no sig. change" in same.stdout and "better" not in same.stdout and "worse" not in same.stdout
    nobody = invoke(small_run, "compare", "demo-gpt2-untrained", "nobody", "--version", "s1", "--db", db)
    assert nobody.exit_code == 1 and "'nobody' is not a registered model (" in nobody.stderr
    assert "and has no results on suite 's1' (evaluated there: demo-gpt2-untrained" in nobody.stderr
    idle = invoke(small_run, "compare", "demo-gpt2-untrained", "demo-llama-tuned", "--suite", "s1", "--db", db)
    assert idle.exit_code == 1 and "'demo-llama-tuned' is not evaluated on suite 's1': holistic evaluate" in idle.stderr
    family = invoke(small_run, "leaderboard", "--family", "accuracyy", "--suite", "s1", "--db", db)
    assert family.exit_code == 1 and "unknown metric family 'accuracyy': the families are accuracy, " in family.stderr


def test_trace_and_report_in_process(small_run, tmp_path):
    instance = small_run["wh"].df("SELECT min(instance_id) FROM instance_scores WHERE version = 's1'").iat[0, 0]
    args = ["trace", "demo-gpt2-untrained", "boolq", instance, "exact_match", "--version", "s1", "--family", "accuracy"]
    out = invoke(small_run, *args, "--db", str(small_run["path"]))
    assert out.exit_code == 0, out.stderr
    for section in ("score", "completion", "prompt: generation", f"instance: {instance}", "source file", "produced by"):
        assert section in out.stdout
    assert "boolq/dev.jsonl, record line" in out.stdout
    chain = json.loads(invoke(small_run, *args, "--json", "--db", str(small_run["path"])).stdout)
    assert chain["instance"]["instance_id"] == instance and chain["score"]["metric"] == "exact_match"
    assert chain["completion"]["tokens"] and {"token", "logprob", "top"} <= set(chain["completion"]["tokens"][0])
    copy = tmp_path / "warehouse.duckdb"  # the report command refreshes the summaries: not on the shared file
    shutil.copy(small_run["path"], copy)
    out = invoke(small_run, "report", "--version", "s1", "--db", str(copy))
    assert out.exit_code == 0, out.stderr
    assert (
        "Report for suite s1: " in out.stdout and (tmp_path / "reports" / "s1" / "index.html").stat().st_size > 10_000
    )
    missing = invoke(small_run, "report", "--version", "v1", "--db", str(copy))
    assert missing.exit_code == 1 and "no scores for suite version 'v1'" in missing.stderr


def test_control_sequences_and_markup_in_the_data_reach_the_terminal_as_text(small_run, tmp_path):
    """An escape sequence in dataset text or model output drove the terminal through `query` and `trace`, and
    rich markup in it was taken as markup; now both show as text (control characters as their pictures)."""
    import duckdb

    copy = shutil.copy(small_run["path"], tmp_path / "warehouse.duckdb")
    hostile = "\x1b[2J\x1b[31mred\x9b0m [bold]loud[/bold]"
    with duckdb.connect(str(copy)) as con:
        instance = con.execute("SELECT min(instance_id) FROM instance_scores WHERE version = 's1'").fetchone()[0]
        con.execute("UPDATE instances SET input = ? WHERE version = 's1' AND instance_id = ?", [hostile, instance])
        con.execute("UPDATE prompts SET prompt = ? WHERE version = 's1' AND instance_id = ?", [hostile, instance])
    shown = "\u241b[2J\u241b[31mred\ufffd0m [bold]loud[/bold]"
    out = invoke(small_run, "query", f"SELECT input FROM instances WHERE instance_id = '{instance}'", "--db", str(copy))
    assert out.exit_code == 0 and shown in out.stdout and "\x1b" not in out.stdout, out.stdout
    csv_out = invoke(small_run, "query", "SELECT 'a\x1bb' AS v", "--csv", "--db", str(copy))
    assert "a\x1bb" in csv_out.stdout  # not a terminal: the data as it is
    args = ["trace", "demo-gpt2-untrained", "boolq", instance, "exact_match", "--version", "s1", "--family", "accuracy"]
    traced = invoke(small_run, *args, "--db", str(copy))
    assert traced.exit_code == 0, traced.stderr
    assert "\x1b" not in traced.stdout and "\x9b" not in traced.stdout
    assert traced.stdout.count("[bold]loud[/bold]") == 2  # the prompt and the instance, as written


def test_a_metric_newer_than_a_model_s_scores_says_not_computed(small_run, tmp_path):
    """A model scored before a metric existed had a blank cell with no reason."""
    import duckdb

    copy = shutil.copy(small_run["path"], tmp_path / "warehouse.duckdb")
    with duckdb.connect(str(copy)) as con:  # "newer": the same model scored again by a release with one more metric
        con.execute("INSERT INTO provenance SELECT * REPLACE ('newer-' || provenance_id AS provenance_id, "
                    "'newer' AS model) FROM provenance WHERE model = 'demo-gpt2-untrained'")  # fmt: skip
        con.execute("INSERT INTO scenario_metrics SELECT * REPLACE ('newer' AS model, 'newer-' || provenance_id AS "
                    "provenance_id) FROM scenario_metrics WHERE model = 'demo-gpt2-untrained'")  # fmt: skip
        con.execute(
            "DELETE FROM scenario_metrics WHERE model = 'demo-gpt2-untrained' AND metric = 'quasi_exact_match' "
            "AND family = 'accuracy'"
        )
        (note,) = con.execute(
            "SELECT note FROM leaderboard WHERE version = 's1' AND model = 'demo-gpt2-untrained' "
            "AND metric = 'quasi_exact_match' AND family = 'accuracy'"
        ).fetchone()
    assert note.startswith("not computed: this metric is newer than the model's scores")
    out = invoke(small_run, "leaderboard", "--version", "s1", "--all", "--family", "accuracy", "--db", str(copy))
    assert out.exit_code == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if "quasi_exact_match" in line and "[" not in line)
    assert "not computed" in row and "not computed: this metric is newer" in out.stdout


@pytest.mark.slow  # the real `dagster dev`
def test_ui_stopped_with_sigterm_stops_everything_it_started(tmp_path):
    """Reproduces issue 11: `holistic ui` stopped with SIGTERM left dagster dev's webserver, daemon and code
    server running as orphans. Started as a background job of a script is (SIGINT ignored, inherited: dagster dev
    then ignores SIGINT and SIGTERM alike), which is how CI and nohup start it."""
    import psutil

    from tests.defs.dagster_dev import start_serving, stop_session, wait_for_location
    from tests.helpers import free_port

    port, log = free_port(), tmp_path / "ui.log"
    env = {"DAGSTER_HOME": str(tmp_path / "dagster"), "HOLISTIC_WAREHOUSE": str(tmp_path / "w.duckdb")}
    as_background_job = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731
    proc = start_serving([HOLISTIC, "ui", "--port", str(port)], env, log, preexec_fn=as_background_job)
    try:
        wait_for_location(port, proc, log)
        started = psutil.Process(proc.pid).children(recursive=True)
        commands = [" ".join(p.cmdline()) for p in started]
        assert any("dagster-webserver" in c or "dagster_webserver" in c for c in commands), commands
        assert any("dagster-daemon" in c or "dagster_daemon" in c or "daemon" in c for c in commands), commands
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) is not None
        left = [" ".join(p.cmdline()) for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert left == [], f"still running after `holistic ui` stopped: {left}\n{log.read_text()[-2000:]}"
    finally:
        stop_session(proc)


def test_a_configuration_error_is_its_message_alone(tmp_path):
    shown = run("ui", HOLISTIC_EXECUTOR="celery", DAGSTER_PG_HOST="", DAGSTER_HOME=str(tmp_path))
    assert shown.returncode == 1
    assert shown.stderr.strip().splitlines() == [
        "error: HOLISTIC_EXECUTOR=celery keeps Dagster's runs and events in PostgreSQL, which every worker reaches: "
        "set DAGSTER_PG_HOST, DAGSTER_PG_PORT, DAGSTER_PG_USER, DAGSTER_PG_PASSWORD and DAGSTER_PG_DB"
    ]


def test_an_unexpected_error_is_one_line_and_its_traceback_only_with_debug(tmp_path):
    garbage = tmp_path / "not-a-warehouse.duckdb"
    garbage.write_text("these bytes are not a DuckDB database\n")
    shown = run("leaderboard", "--db", str(garbage))
    assert shown.returncode == 1 and "Traceback" not in shown.stderr, shown.stderr
    first, hint = shown.stderr.strip().splitlines()
    assert first.startswith("error: IOException:") and str(garbage) in first and "not a valid DuckDB" in first
    assert "--debug" in hint
    debugged = run("--debug", "leaderboard", "--db", str(garbage))
    assert debugged.returncode == 1 and "Traceback (most recent call last)" in debugged.stderr
    assert "warehouse/local.py" in debugged.stderr  # where it happened


def test_version_prints_the_program_version():
    from importlib.metadata import version

    shown = run("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"holistic {version('holistic-dagster')}"


def test_list_shows_each_kind_with_descriptions_and_whether_a_scenarios_data_is_here(tmp_path):
    from typer.testing import CliRunner

    from holistic_dagster.cli import app
    from holistic_dagster.metrics.registry import METRICS
    from tests.scenarios.test_narrativeqa import write_narrativeqa_files

    def listed(*args: str, **env: str) -> str:
        result = CliRunner().invoke(app, ["list", *args], env={"COLUMNS": "400", **env})
        assert result.exit_code == 0, result.output
        return result.output

    suites = listed("suites")
    assert "helm-lite-v1" in suites and "HELM Lite's leaderboard" in suites
    models = listed("models")
    assert "demo-gpt2-untrained" in models and "transformers" in models
    metrics = listed("metrics")
    assert all(name in metrics for name in METRICS) and "ece_10_bin" in metrics

    data = tmp_path / "data"
    (data / "boolq").mkdir(parents=True)
    (data / "boolq" / "dev.jsonl").write_text('{"question": "q", "passage": "p", "answer": true}\n')

    def data_column() -> dict[str, str]:
        """{scenario: its data cell}, a cell folded over several lines read whole."""
        rows: dict[str, str] = {}
        for line in listed("scenarios", HOLISTIC_DATA_DIR=str(data)).splitlines():
            cells = [c.strip() for c in line.split("│")]
            if line.startswith("│") and cells[1]:
                name = cells[1]
                rows[name] = cells[2]
            elif line.startswith("│") and cells[2]:
                rows[name] += " " + cells[2]
        return rows

    rows = data_column()
    assert rows["boolq"] == "here" and rows["synthetic_reasoning"] == "generated"
    assert rows["mmlu"].startswith("no local copy of its data")
    # a scenario that HELM's suites read in upstream's layout says so, and whether that layout is here
    said = "no local copy of its data; HELM's suites read upstream's layout: {}"
    assert rows["narrative_qa"] == said.format("no local copy of its data")
    write_narrativeqa_files(data / "narrativeqa_upstream")
    assert data_column()["narrative_qa"] == said.format("here")
    unknown = CliRunner().invoke(app, ["list", "things"])
    assert unknown.exit_code == 2 and "'things' is not one of 'models', 'suites', 'scenarios', 'metrics'" in (
        unknown.output
    )


def test_gate_takes_baseline_then_candidate_as_compare_does(tmp_path):
    from typer.testing import CliRunner

    from holistic_dagster.cli import app

    def gate(*args: str):
        return CliRunner().invoke(app, ["gate", *args, "--db", str(tmp_path / "none.duckdb")])

    twice = gate("old", "new", "--baseline", "other")
    assert twice.exit_code == 2 and "the baseline is given twice ('old' and --baseline 'other')" in twice.output
    three = gate("a", "b", "c")
    assert three.exit_code == 2 and "give [BASELINE] CANDIDATE, one or two models; got 3" in three.output
    # the order taken: `new` is judged against `old` (here there is no warehouse to judge them in)
    ordered = gate("old", "new", "--suite", "v1")
    assert (
        ordered.exit_code == 2 and "no warehouse at" in ordered.output and "is its own baseline" not in (ordered.output)
    )
    same = gate("same", "same")
    assert same.exit_code == 2 and "same is its own baseline" in same.output


def test_a_missing_data_dir_is_refused_before_anything_starts(tmp_path):
    from typer.testing import CliRunner

    from holistic_dagster.cli import app

    db = tmp_path / "w.duckdb"
    args = ["--model", "demo-gpt2-untrained", "--data-dir", str(tmp_path / "nope"), "--db", str(db)]
    shown = CliRunner().invoke(app, ["evaluate", *args])
    assert shown.exit_code == 1 and f"--data-dir {tmp_path / 'nope'}: no such folder" in shown.stderr
    assert not db.exists()  # nothing ran


@pytest.mark.slow  # a Dagster run in a subprocess
def test_a_failed_step_is_one_line_and_where_its_log_is_not_dagsters_stack_trace(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ["evaluate", "--model", "demo-gpt2-untrained", "--suite", "v1", "--data-dir", str(empty)]
    shown = run(*args, "--db", str(tmp_path / "w.duckdb"), HOLISTIC_OFFLINE="1", DAGSTER_HOME=str(tmp_path / "d"))
    assert shown.returncode == 1
    assert "Stack Trace" not in shown.stderr and "Traceback" not in shown.stderr, shown.stderr
    lines = shown.stderr.strip().splitlines()
    assert lines[-6].startswith("error: datasets for v1 failed (Dagster run ")
    assert lines[-5].startswith("boolq__dataset: holistic_dagster.errors.DataUnavailableError: scenario 'boolq': ")
    assert "(or pass it as --data-dir)" in lines[-5]
    assert lines[-1].startswith("the full log: run ") and lines[-1].endswith("holistic --debug")
    debugged = run("--debug", *args, "--db", str(tmp_path / "w2.duckdb"), HOLISTIC_OFFLINE="1",
                   DAGSTER_HOME=str(tmp_path / "d"))  # fmt: skip
    assert debugged.returncode == 1 and "STEP_FAILURE" in debugged.stderr  # Dagster's own log, asked for


def test_no_verb_declares_an_option_name_twice():
    """(export had --suite for HELM's suite name when --suite became the suite version's option: one silently
    shadowed the other.)"""
    import typer

    from holistic_dagster.cli import app
    from holistic_dagster.cli.reference import _verbs

    root = typer.main.get_command(app)
    context = root.context_class(root, info_name="holistic")
    for name, command, _ in _verbs(root, context):
        names = [opt for p in command.params for opt in (*p.opts, *p.secondary_opts)]
        assert len(names) == len(set(names)), f"holistic {name}: {sorted(n for n in names if names.count(n) > 1)}"
