"""Results exchange with HELM: `holistic import-helm` and `holistic export --format helm`, on runs that HELM 0.5.16's
own `helm-run` wrote (tests/helm/fixtures/helm_runs: synthetic reasoning, whose instances HELM generates, for
SmolLM2-135M-Instruct and a random-weight model; made by bench/helm_exchange.py --fixtures)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from holistic_dagster.errors import DataFormatError, HolisticError
from holistic_dagster.helm.exporting import export_runs
from holistic_dagster.helm.importing import import_runs
from holistic_dagster.helm.names import our_metric
from holistic_dagster.helm.runs import read_run
from holistic_dagster.results.leaderboard import main_metrics
from holistic_dagster.results.scores import compare_models
from holistic_dagster.results.trace import trace_score
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write

SUITE = Path(__file__).parent / "fixtures" / "helm_runs" / "exchange"
RUNS = sorted(p for p in SUITE.iterdir() if (p / "run_spec.json").exists())
VERSION = "helm-exchange"
SMOLLM2, RANDOM = "huggingface/smollm2-135m-instruct", "huggingface/peer-random"


def _load(path: Path):
    return json.loads(path.read_text())


def helm_values(run: Path) -> dict[tuple[str, str], float]:
    """{(instance id as imported, our metric name): value} of a run's per-instance stats we define."""
    subset = ",".join(str(v) for _, v in sorted(_load(run / "run_spec.json")["scenario_spec"]["args"].items()))
    out = {}
    for entry in _load(run / "per_instance_stats.json"):
        for stat in entry["stats"]:
            known = our_metric(stat["name"]["name"])
            if stat["count"] and "perturbation" not in stat["name"] and known:
                out[(f"{subset}/{entry['instance_id']}", known[0])] = stat["sum"] / stat["count"]
    return out


@pytest.fixture
def imported(tmp_path, catalog):
    wh = Warehouse(tmp_path / "w.duckdb")
    parts = import_runs(wh, catalog, [SUITE])
    return wh, parts


def test_import_keeps_every_per_instance_value_and_helm_s_means(imported):
    wh, parts = imported
    assert sorted((p.scenario, p.model, len(p.runs)) for p in parts) == [
        ("synthetic_reasoning", RANDOM, 2),
        ("synthetic_reasoning", SMOLLM2, 2),
    ]
    for run in RUNS:
        model = _load(run / "run_spec.json")["adapter_spec"]["model"]
        rows = wh.df(
            "SELECT instance_id, metric, value FROM instance_scores "
            "WHERE version = ? AND model = ? AND perturbation = ''",
            [VERSION, model],
        )
        stored = {(r.instance_id, r.metric): r.value for r in rows.itertuples()}
        expected = helm_values(run)
        assert len(expected) > 50 and all(stored[k] == pytest.approx(v, abs=0) for k, v in expected.items())
        # HELM's test-split means are the scenario metrics' (both modes' runs pooled; equal counts)
    stats = [s for r in RUNS if SMOLLM2.split("/")[1] in r.name for s in _load(r / "stats.json")]
    runtime = [s["mean"] for s in stats if s["name"] == {"name": "inference_runtime", "split": "test"}]
    value = wh.df(
        "SELECT value, count FROM scenario_metrics WHERE version = ? AND model = ? AND metric = 'runtime_s'",
        [VERSION, SMOLLM2],
    ).iloc[0]
    assert value["value"] == pytest.approx(sum(runtime) / 2) and value["count"] == 4  # 2 test instances x 2 modes
    splits = wh.df("SELECT split, count(*) AS n FROM instances WHERE version = ? GROUP BY split", [VERSION])
    assert dict(zip(splits["split"], splits["n"])) == {"test": 4, "valid": 4}


def test_imported_runs_keep_lineage_to_helm_s_files(imported):
    wh, _ = imported
    rows = wh.df("SELECT * FROM imported_runs WHERE version = ? AND model = ?", [VERSION, SMOLLM2])
    assert sorted(rows["run_name"]) == sorted(_load(r / "run_spec.json")["name"] for r in RUNS if "smollm2" in r.name)
    for row in rows.itertuples():
        for f in json.loads(row.files):
            assert f["sha256"] == hashlib.sha256((Path(row.folder) / f["name"]).read_bytes()).hexdigest()
    iid = "pattern_match/id10394"
    chain = trace_score(wh, SMOLLM2, VERSION, "synthetic_reasoning", iid, "exact_match")
    folder = next(r for r in RUNS if "pattern_match" in r.name and "smollm2" in r.name)
    state = next(s for s in _load(folder / "scenario_state.json")["request_states"] if s["instance"]["id"] == "id10394")
    assert chain["prompt"]["prompt"] == state["request"]["prompt"]
    assert chain["completion"]["text"] == state["result"]["completions"][0]["text"]
    assert chain["provenance"]["backend"] == "helm"
    source = Path(chain["source_file"]["uri"])
    assert source.name == "scenario_state.json" and chain["instance"]["record"].startswith("request_states[")
    assert chain["source_file"]["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert chain["imported_run"]["folder"].endswith("model=huggingface_smollm2-135m-instruct")


def test_imported_models_are_compared_on_their_shared_instances(imported, catalog):
    wh, _ = imported
    main = main_metrics(wh, catalog, VERSION)
    assert main == {"synthetic_reasoning": "quasi_exact_match"}  # the catalog's, which HELM computed
    frame = compare_models(wh, VERSION, RANDOM, SMOLLM2, main_metric=main)
    row = frame[(frame["family"] == "accuracy")].iloc[0]
    assert row["metric"] == "quasi_exact_match" and row["n"] == 4  # the test split's instances, both modes


def test_a_second_import_replaces_its_partitions_and_keeps_the_others(tmp_path, catalog):
    wh = Warehouse(tmp_path / "w.duckdb")
    import_runs(wh, catalog, [r for r in RUNS if "peer-random" in r.name])
    import_runs(wh, catalog, [r for r in RUNS if "smollm2" in r.name], version=VERSION)
    import_runs(wh, catalog, [r for r in RUNS if "smollm2" in r.name], version=VERSION)  # again: replaced, not doubled
    counts = wh.df("SELECT model, count(*) AS n FROM instance_scores GROUP BY model")
    expected = {m: sum(len(helm_values(r)) for r in RUNS if m.split("/")[1] in r.name) for m in (RANDOM, SMOLLM2)}
    assert dict(zip(counts["model"], counts["n"])) == expected
    assert wh.df("SELECT count(*) AS n FROM instances").iat[0, 0] == 8


def _broken_copy(tmp_path: Path, run_index: int, file: str, edit) -> Path:
    suite = tmp_path / "runs" / "exchange"
    shutil.copytree(SUITE, suite)
    path = suite / RUNS[run_index].name / file
    path.write_text(edit(path.read_text()))
    return suite


def _edited(text: str, change) -> str:
    data = json.loads(text)
    change(data)
    return json.dumps(data)


BROKEN = [
    ("scenario_state.json", lambda t: t.replace('"completions"', '"completion"', 1),
     r"record request_states\[0\]: result.completions: empty for a successful request"),
    ("scenario_state.json", lambda t: _edited(t, lambda d: d["request_states"][0]["instance"]["input"].pop("text")),
     r"record request_states\[0\]\.instance\.input\.text: Field required"),
    ("per_instance_stats.json", lambda t: t.replace('"id10394"', '"id99999"', 1),
     r"record \[0\]: instance_id 'id99999' is not an instance of"),
    ("stats.json", lambda t: t[:-20], "not readable JSON"),
    ("run_spec.json", lambda t: t.replace('"adapter_spec"', '"adapter"', 1), r"record adapter_spec: Field required"),
    # HELM's schema's types: a number written as a string is no number
    ("stats.json", lambda t: _edited(t, lambda d: d[0].update(mean="1")),
     r"record \[0\]\.mean: Input should be a valid number"),
    ("per_instance_stats.json", lambda t: _edited(t, lambda d: d[0]["stats"][0].update(sum="1")),
     r"record \[0\]\.stats\[0\]\.sum: Input should be a valid number"),
    ("per_instance_stats.json", lambda t: _edited(t, lambda d: d[0]["stats"][0].update(count="1")),
     r"record \[0\]\.stats\[0\]\.count: Input should be a valid integer"),
    # NaN and Infinity, which JSON readers accept, and null where HELM writes a number
    ("stats.json", lambda t: t.replace('"mean": ', '"mean": NaN, "_was": ', 1),
     r"record \[\d+\]\.mean: Input should be a finite number"),
    ("per_instance_stats.json", lambda t: _edited(t, lambda d: d[0]["stats"][0].update(sum=None)),
     r"record \[0\]\.stats\[0\]\.sum: Input should be a valid number"),
    ("per_instance_stats.json", lambda t: t.replace('"sum": ', '"sum": Infinity, "_was": ', 1),
     r"record \[0\]\.stats\[0\]\.sum: Input should be a finite number"),
    # the files of one run belong together: HELM writes the run's adapter spec into both
    ("scenario_state.json", lambda t: _edited(t, lambda d: d["adapter_spec"].update(model="other/model")),
     r"record adapter_spec: differs from run_spec.json's: the files are not one run's"),
]  # fmt: skip


@pytest.mark.parametrize(("file", "edit", "message"), BROKEN, ids=[f"{b[0]}-{i}" for i, b in enumerate(BROKEN)])
def test_a_broken_run_fails_naming_file_and_field_and_imports_nothing(tmp_path, catalog, file, edit, message):
    wh = Warehouse(tmp_path / "w.duckdb")
    import_runs(wh, catalog, [RUNS[0]], version=VERSION)  # an earlier import, which must stay as it was
    before = wh.df("SELECT * FROM instance_scores ORDER BY ALL")
    suite = _broken_copy(tmp_path, 3, file, edit)
    with pytest.raises(DataFormatError, match=message) as failure:
        import_runs(wh, catalog, [suite], version=VERSION)
    assert str(suite / RUNS[3].name / file) in str(failure.value)
    after = wh.df("SELECT * FROM instance_scores ORDER BY ALL")
    assert after.equals(before)
    assert wh.df("SELECT count(*) FROM imported_runs").iat[0, 0] == 1


@pytest.mark.parametrize("file", ["scenario_state.json", "stats.json", "per_instance_stats.json"])
def test_a_run_file_that_is_another_run_s_is_refused(tmp_path, catalog, file):
    """A run folder whose file is a symbolic link (to another run's) or a copy of another run's scenario state
    is not one run: refused, nothing imported."""
    suite = tmp_path / "runs" / "exchange"
    shutil.copytree(SUITE, suite)
    wh = Warehouse(tmp_path / "w.duckdb")
    import_runs(wh, catalog, [RUNS[0]], version=VERSION)  # an earlier import, which must stay as it was
    mixed = suite / RUNS[3].name / file
    mixed.unlink()
    mixed.symlink_to(suite / RUNS[2].name / file)
    with pytest.raises(DataFormatError, match=f"{file}: a symbolic link .*: a run's files must be its own"):
        import_runs(wh, catalog, [suite])
    mixed.unlink()
    # another model's scenario state, copied in: its adapter spec is not this run's
    shutil.copy(suite / RUNS[0].name / "scenario_state.json", suite / RUNS[3].name / "scenario_state.json")
    shutil.copy(SUITE / RUNS[3].name / file, mixed) if file != "scenario_state.json" else None
    with pytest.raises(DataFormatError, match="adapter_spec: differs from run_spec.json's"):
        import_runs(wh, catalog, [suite])
    assert wh.df("SELECT count(*) FROM imported_runs").iat[0, 0] == 1


def test_a_folder_without_runs_or_with_a_missing_file_is_refused(tmp_path, catalog):
    wh = Warehouse(tmp_path / "w.duckdb")
    with pytest.raises(DataFormatError, match="no HELM run folders"):
        import_runs(wh, catalog, [tmp_path])
    run = tmp_path / "one"
    shutil.copytree(RUNS[0], run)
    (run / "stats.json").unlink()
    with pytest.raises(DataFormatError, match=r"one: not a complete HELM run folder, missing stats.json"):
        import_runs(wh, catalog, [run])


def test_importing_into_a_catalog_version_matches_its_instances(tmp_path, catalog):
    """HELM's instances become the version's own ids where question and references are the same; one that the
    version does not have fails the import."""
    from holistic_dagster.helm.runs import read_run
    from holistic_dagster.warehouse.rows import instance_row, source_file_row

    wh = Warehouse(tmp_path / "w.duckdb")
    with pytest.raises(HolisticError, match="has no instances of 'synthetic_reasoning'"):
        import_runs(wh, catalog, [RUNS[1]], version="v5")
    run = read_run(RUNS[1])  # the version's dataset, as the dataset stage writes it, with the same questions
    from holistic_dagster.helm.importing import _helm_instance

    ours = [_helm_instance(run, i, s) for i, s in enumerate(run.states) if s.instance.split == "test"]
    rows = [{**vars(instance_row(i, version="v5", scenario="synthetic_reasoning")),
             "instance_id": f"pattern_match/test/{n}"} for n, i in enumerate(ours)]  # fmt: skip
    import pandas as pd

    source = [vars(source_file_row(ours[0].source, version="v5", scenario="synthetic_reasoning"))]
    wh.replace({"version": "v5", "scenario": "synthetic_reasoning"},
               {"instances": pd.DataFrame(rows), "source_files": pd.DataFrame(source)})  # fmt: skip
    with pytest.raises(DataFormatError, match=r"instance id1898 .* is not one of suite version 'v5'"):
        import_runs(wh, catalog, [RUNS[1]], version="v5")  # its valid-split instances are not v5's
    states = _load(RUNS[1] / "scenario_state.json")
    states["request_states"] = [s for s in states["request_states"] if s["instance"]["split"] == "test"]
    copy = tmp_path / "test-only" / RUNS[1].name
    shutil.copytree(RUNS[1], copy)
    write(copy / "scenario_state.json", json.dumps(states))
    stats = [e for e in _load(copy / "per_instance_stats.json") if e["instance_id"] in ("id10394", "id6906")]
    write(copy / "per_instance_stats.json", json.dumps(stats))
    import_runs(wh, catalog, [copy], version="v5")
    ids = wh.df("SELECT DISTINCT instance_id FROM instance_scores WHERE version = 'v5' ORDER BY 1")["instance_id"]
    assert ids.tolist() == ["pattern_match/test/0", "pattern_match/test/1"]
    assert wh.df("SELECT count(*) FROM instances WHERE version = 'v5'").iat[0, 0] == 2  # the dataset's, untouched


def test_export_then_import_keeps_every_per_instance_value(imported, tmp_path):
    """HELM -> import -> export -> HELM's layout, read back by our reader of HELM's files (the fields HELM's
    dataclasses require) and imported again: every value as HELM wrote it."""
    wh, _ = imported
    folder = export_runs(wh, VERSION, tmp_path / "out", suite="again")
    assert folder == tmp_path / "out" / "runs" / "again"
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == [r.name for r in RUNS]
    for run in RUNS:
        exported = read_run(folder / run.name)
        original = read_run(run)
        assert exported.spec == original.spec  # an imported run's spec goes back as it came
        assert [s.request.prompt for s in exported.states] == [s.request.prompt for s in original.states]
        assert helm_values(folder / run.name) == pytest.approx(helm_values(run), abs=1e-12)
        em = {s.name.split: s.mean for s in original.stats if s.name.name == "exact_match" and not s.name.perturbation}
        em_out = {s.name.split: s.mean for s in exported.stats if s.name.name == "exact_match"}
        assert em_out == em
    again = Warehouse(tmp_path / "again.duckdb")
    import_runs(again, catalog_of(), [folder])
    query = "SELECT model, instance_id, metric, value FROM instance_scores ORDER BY ALL"
    assert again.df(query)["value"].tolist() == pytest.approx(wh.df(query)["value"].tolist(), abs=1e-12)


def catalog_of():
    from holistic_dagster.config.catalog import Catalog

    return Catalog()


def test_export_of_our_own_run_is_read_as_helm_runs(small_run, tmp_path):
    """A suite version of ours in HELM's layout: one run per (model, scenario), the prompts as asked, each
    per-instance score under HELM's name, the means HELM's Stat computes."""
    wh = small_run["wh"]
    folder = export_runs(wh, "s1", tmp_path / "out")
    (run,) = [read_run(p) for p in folder.iterdir() if p.is_dir()]
    assert run.spec.name == "boolq:model=demo-gpt2-untrained" and run.group == "boolq"
    prompts = wh.df(
        "SELECT prompt || continuation AS p FROM prompts WHERE version = 's1' AND instance_id NOT LIKE '%~%'"
    )
    assert sorted(s.request.prompt for s in run.states) == sorted(prompts["p"])
    exact = wh.df(
        "SELECT value FROM instance_scores WHERE version = 's1' AND metric = 'exact_match' AND family = 'accuracy' "
        "AND instance_id NOT LIKE '%~%'"
    )["value"]
    stat = next(s for s in run.stats if s.name.name == "exact_match" and not s.name.perturbation)
    assert len(exact) == 4 and stat.count == 1 and stat.mean == pytest.approx(exact.mean())  # one trial's mean
    assert any(s.name.name == "inference_runtime" for s in run.stats)  # runtime_s, under HELM's name
    means = {(s.name.name, s.name.split): s.mean for s in run.stats if not s.name.perturbation}
    assert means[("num_instances", "test")] == 4
    shots = wh.df(
        "SELECT avg(n) FROM (SELECT max(num_train_instances) AS n FROM prompts WHERE version = 's1' "
        "AND instance_id NOT LIKE '%~%' GROUP BY instance_id)"
    ).iat[0, 0]
    assert means[("num_train_instances", "test")] == pytest.approx(shots)  # HELM's "# train", from our prompts
    worst = wh.df(
        "SELECT avg(value) FROM instance_scores WHERE version = 's1' AND family = 'robustness' "
        "AND metric = 'exact_match' AND perturbation = 'worst'"
    ).iat[0, 0]
    robustness = next(s for s in run.stats if s.name.name == "exact_match" and s.name.perturbation)
    assert robustness.name.perturbation["name"] == "robustness" and robustness.mean == pytest.approx(worst)


def test_export_never_deletes_what_it_did_not_write(small_run, tmp_path):
    """A runs/<suite>/ folder that holds a user's files is refused (it was deleted whole before); --replace
    replaces only the runs an earlier export wrote, and refuses when one of them holds a file of the user's."""
    wh, out = small_run["wh"], tmp_path / "out"
    theirs = out / "runs" / "s1"
    write(theirs / "notes.md", "my notes")
    write(theirs / "their_helm_run" / "run_spec.json", "{}")
    with pytest.raises(HolisticError, match="exists and is not empty: nothing was written"):
        export_runs(wh, "s1", out)
    with pytest.raises(HolisticError, match="was not written by `holistic export`"):
        export_runs(wh, "s1", out, replace=True)
    assert sorted(p.name for p in theirs.rglob("*")) == ["notes.md", "run_spec.json", "their_helm_run"]

    ours = export_runs(wh, "s1", out, suite="mine")
    (run,) = [p.name for p in ours.iterdir() if p.is_dir()]
    with pytest.raises(HolisticError, match="exists and is not empty"):
        export_runs(wh, "s1", out, suite="mine")
    write(ours / "README.md", "kept")  # beside the runs: kept, and the runs are replaced
    (ours / run / "stats.json").write_text("[]")
    export_runs(wh, "s1", out, suite="mine", replace=True)
    assert (ours / "README.md").read_text() == "kept" and json.loads((ours / run / "stats.json").read_text())
    for name in ("../escaped", "..", "a/b"):  # a suite name is a folder under runs/, never a path out of it
        with pytest.raises(HolisticError, match="a folder name under runs/"):
            export_runs(wh, "s1", out, suite=name)
    assert sorted(p.name for p in out.iterdir()) == ["runs"]
    write(ours / run / "my_analysis.txt", "mine")  # inside a run the export wrote: refused, nothing touched
    with pytest.raises(HolisticError, match=r"holds files the export did not write \(my_analysis.txt\)"):
        export_runs(wh, "s1", out, suite="mine", replace=True)
    assert (ours / run / "my_analysis.txt").read_text() == "mine" and (ours / run / "stats.json").exists()


@pytest.mark.parametrize("stray", ["../victim", "..", ".", "", "a/b"])
def test_a_manifest_that_names_anything_but_a_run_folder_is_refused_and_nothing_touched(small_run, tmp_path, stray):
    """An edited or planted manifest must not steer --replace out of runs/<suite>/ (a run named ../victim would
    have been moved aside and lost)."""
    wh, out = small_run["wh"], tmp_path / "out"
    ours = export_runs(wh, "s1", out, suite="mine")
    victim = write(out / "runs" / "victim" / "keep.txt", "precious")
    manifest = json.loads((ours / ".holistic-export.json").read_text())
    manifest["runs"][stray] = ["keep.txt"]
    (ours / ".holistic-export.json").write_text(json.dumps(manifest))
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    with pytest.raises(HolisticError, match="names runs that are no folder of"):
        export_runs(wh, "s1", out, suite="mine", replace=True)
    assert victim.read_text() == "precious" and sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_cli_import_and_export(tmp_path, monkeypatch):
    from dagster import AssetKey, DagsterInstance, MultiPartitionKey
    from typer.testing import CliRunner

    from holistic_dagster.cli import app

    def run(*args: str):
        return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))  # the instance `holistic ui` would open
    db = str(tmp_path / "w.duckdb")
    done = run("import-helm", str(SUITE), "--db", db)
    assert done.exit_code == 0, done.output
    assert "imported into suite version helm-exchange" in done.output and "holistic compare" in done.output
    with DagsterInstance.get() as instance:  # the UI shows the imported partitions, marked as imported
        (event,) = instance.fetch_materializations(AssetKey(["synthetic_reasoning", "scores"]), limit=10).records[
            :1
        ]  # newest first
        materialization = event.asset_materialization
        assert materialization.partition in (
            MultiPartitionKey({"model": m, "version": VERSION}) for m in (SMOLLM2, RANDOM)
        )
        assert materialization.metadata["imported_from"].value == "HELM"
        assert instance.has_dynamic_partition("model", SMOLLM2) and instance.has_dynamic_partition("version", VERSION)
    board = run("leaderboard", "--version", VERSION, "--db", db)
    assert board.exit_code == 0 and f"{SMOLLM2} (HELM run)" in board.output, board.output
    report = run("report", "--version", VERSION, "--db", db)  # a version the catalog does not have
    assert report.exit_code == 0, report.output
    index = (tmp_path / "reports" / VERSION / "index.html").read_text()
    assert "Imported from HELM runs" in index and SMOLLM2 in index and "synthetic_reasoning" in index
    out = run("export", "--format", "helm", "--version", VERSION, "--out", str(tmp_path / "o"), "--db", db)
    assert out.exit_code == 0 and "4 HELM runs" in out.output, out.output
    bad = run("import-helm", str(tmp_path / "o" / "runs" / "missing"), "--db", db)
    assert bad.exit_code == 1 and "not a folder" in bad.output
    fmt = run("export", "--format", "csv", "--out", str(tmp_path / "o"), "--db", db)
    assert fmt.exit_code == 1 and "unknown export format 'csv'" in fmt.output


def test_import_into_a_shared_results_store(tmp_path, catalog):
    """The folder store (many writer processes) takes an import as the DuckDB file does, and reads it back."""
    from holistic_dagster.warehouse import open_warehouse

    (tmp_path / "store").mkdir()
    store = open_warehouse(tmp_path / "store")
    import_runs(store, catalog, [SUITE])
    counts = store.df("SELECT model, count(*) AS n FROM instance_scores GROUP BY model")
    expected = {m: sum(len(helm_values(r)) for r in RUNS if m.split("/")[1] in r.name) for m in (RANDOM, SMOLLM2)}
    assert dict(zip(counts["model"], counts["n"])) == expected
    assert store.df("SELECT count(*) FROM imported_runs").iat[0, 0] == 4
    assert store.df("SELECT count(*) FROM provenance WHERE backend = 'helm'").iat[0, 0] == 2
