"""Which steps of an evaluation can be skipped: a step is skipped when its inputs are what they were when it
last succeeded and what it wrote is still in the warehouse. No Dagster here: `holistic evaluate` decides
before it starts Dagster, so a re-run with nothing changed costs a warehouse read, not a pipeline.

A step's inputs:
- datasets (per suite version): this package's code, the suite file, each scenario's definition and template
  (its code version), and the source files the last run read (size and modification time, each keyed by its place
  in the data folder that holds it, not by the folder's path: the same files in a moved folder are the same
  input; a changed file re-runs the step, and when its instances come out the same, nothing after);
- a model's evaluation (per model and version): the code, the suite file, the scenario definitions, the model's
  registry entry with its checkpoint files (size and time) for a local model, and the dataset rows;
- the summaries (per version: leaderboard, regressions, report): the code, the suite file, the registry (a
  `previous:` link changes the regressions), and the score rows of every model evaluated on the version.
Inputs are fingerprinted as a hash of their content: rows through DuckDB's hash of each row, files by stat.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from holistic_dagster.clients.registry import model_files
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.records import code_fingerprint, sha256_json
from holistic_dagster.results.leaderboard import report_path
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import Instances, LeaderboardStats, ScenarioMetrics, SourceFiles

DATA = "data:"  # a file's key below whichever data folder holds it


def _data_key(path: str, data_dirs: Sequence[Path]) -> tuple[str, str]:
    """(the file's key, the file a run would read now): a file inside a data folder is keyed by its place below
    it, so that the same files reached through another folder path (a moved or re-mounted folder, a symlink) are
    the same input; it is looked up as a run looks it up, in the first of today's data folders that holds that
    place (a folder added in front with another copy is a change). A file recorded at a path that is gone is
    looked for by its longest tail found below today's folders. Any other file is keyed by its real path: a model's
    weights reached through a linked folder (a linked virtual environment) are the same input."""
    p = Path(path)
    place = next((p.relative_to(d) for d in data_dirs if p.is_relative_to(d)), None)
    if place is None and not p.exists():
        place = next(
            (Path(*p.parts[k:]) for k in range(1, len(p.parts)) if any((d / Path(*p.parts[k:])).exists() for d in
             data_dirs)),
            None,
        )  # fmt: skip
    if place is None:
        return os.path.realpath(path), path
    found = next((d / place for d in data_dirs if (d / place).exists()), p)
    return DATA + place.as_posix(), str(found)


def files_state(paths: list[str], data_dirs: Sequence[Path] = ()) -> list[list[Any]]:
    """[key, size, mtime_ns] per file (None for a file that is gone); key: the real path, or for a file in one of
    the data folders its place below it (_data_key)."""
    state = []
    for key, path in sorted({_data_key(p, data_dirs) for p in paths}):
        try:
            st = os.stat(path)
            state.append([key, st.st_size, st.st_mtime_ns])
        except OSError:
            state.append([key, None, None])
    return state


@dataclass
class Step:
    """One step of an evaluation: `kind` datasets | evaluate | summaries, its partition, the fingerprint of its
    inputs (with the files whose state is part of it), and whether it can be skipped."""

    kind: str
    partition: str
    fingerprint: str
    files: list[list[Any]] = field(default_factory=list)
    scenarios: list[str] = field(default_factory=list)  # those it covers (a suite's optional ones without data: not)
    skip_reason: str = ""  # non-empty: unchanged since the run it names

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.partition


def _rows(warehouse: ResultStore, table: str, where: str, params: list[Any]) -> list[Any] | None:
    """Count and an order-free hash of a table's rows (None for a table an earlier release did not have)."""
    try:
        frame = warehouse.df(f"SELECT count(*) AS n, bit_xor(hash(t)) AS h FROM {table} t WHERE {where}", params)
    except duckdb.CatalogException:
        return None
    return [int(frame["n"].iat[0]), None if pd.isna(frame["h"].iat[0]) else int(frame["h"].iat[0])]


def _suite_inputs(catalog: Catalog, version: str) -> dict[str, Any]:
    suite = catalog.suite(version)
    return {
        "code": code_fingerprint(),
        "suite": catalog.suite_source(version),  # and the suite it extends, if any
        "scenarios": {s: catalog.code_version(s) for s in suite.scenarios},
        "max_eval_instances": catalog.max_eval_instances,  # a cap changes every sample
    }


def datasets_step(deployment: Deployment, warehouse: ResultStore, catalog: Catalog, version: str) -> Step:
    files = SourceFiles(warehouse).source_uris(version) if warehouse.path.exists() else []
    scenarios, skipped = deployment.runnable(version)
    # not the data folders' paths: the files read, by their place in them, size and time (files_state)
    inputs = {
        **_suite_inputs(catalog, version),
        "skipped": sorted(skipped),  # an optional scenario's data arriving runs the step again
    }
    return Step("datasets", version, sha256_json(inputs)[:24], files_state(files, deployment.data_dirs), scenarios)


def evaluate_step(
    deployment: Deployment,
    warehouse: ResultStore,
    catalog: Catalog,
    version: str,
    spec: ModelSpec,
    efficient: int | None = None,
) -> Step:
    exists = warehouse.path.exists()
    inputs = {
        **_suite_inputs(catalog, version),
        "model": spec.model_dump(mode="json"),
        "instances": _rows(warehouse, "instances", "version = ?", [version]) if exists else None,
    }
    if efficient:  # the anchors asked (refitted when new full results land) and how many
        anchors = _rows(warehouse, "anchor_instances", "version = ?", [version]) if exists else None
        inputs["efficient"] = {"anchors": efficient, "anchor_rows": anchors}
    files = files_state(model_files(spec, deployment.model_cache))
    return Step("evaluate", f"{spec.name}|{version}", sha256_json(inputs)[:24], files, deployment.runnable(version)[0])


def summaries_step(
    deployment: Deployment, warehouse: ResultStore, catalog: Catalog, version: str, registry: dict[str, ModelSpec]
) -> Step:
    scored = {
        table: _rows(warehouse, table, "version = ?", [version]) if warehouse.path.exists() else None
        for table in ("instance_scores", "scenario_metrics", "applicability", "stability")
    }
    alerts = deployment.alerts_path  # its rules grade the version (asset `alerts`)
    inputs = {
        **_suite_inputs(catalog, version),
        "registry": {name: spec.model_dump(mode="json") for name, spec in sorted(registry.items())},
        "alerts": alerts.read_text(encoding="utf-8") if alerts.exists() else None,
        **scored,
    }
    return Step("summaries", version, sha256_json(inputs)[:24], scenarios=deployment.runnable(version)[0])


def suite_steps(
    deployment: Deployment,
    version: str,
    models: Sequence[str],
    registry: Mapping[str, ModelSpec],
    efficient: int | None = None,
) -> list[tuple[str, Callable[[], Step]]]:
    """An evaluation's steps in order, each with its label and how to take its inputs (just before it runs,
    after the steps it depends on): the one plan `holistic evaluate` checks and evaluate_suite runs."""
    warehouse, catalog = deployment.warehouse(), deployment.catalog()
    how = f" efficiently ({efficient} anchors per scenario)" if efficient else ""
    return [
        (f"datasets for {version}", lambda: datasets_step(deployment, warehouse, catalog, version)),
        *[
            (
                f"evaluate {m}{how}",
                lambda m=m: evaluate_step(deployment, warehouse, catalog, version, registry[m], efficient),
            )
            for m in models
        ],
        ("leaderboard", lambda: summaries_step(deployment, warehouse, catalog, version, dict(registry))),
    ]


def outputs_present(warehouse: ResultStore, step: Step) -> bool:
    """What the step wrote is still there (a deleted row or report re-runs it)."""
    if step.kind == "datasets":
        found = Instances(warehouse).scenarios(step.partition)
    elif step.kind == "evaluate":
        model, version = step.partition.split("|")
        found = ScenarioMetrics(warehouse).scenarios(version, model)
    else:
        if not report_path(warehouse, step.partition).exists():
            return False
        found = LeaderboardStats(warehouse).scenarios(step.partition)
    return set(step.scenarios) <= found


def mark_skippable(warehouse: ResultStore, step: Step) -> Step:
    """Sets step.skip_reason when its inputs equal those of its last successful run and its outputs remain."""
    if not warehouse.path.exists():
        return step
    try:
        last = warehouse.df(
            "SELECT fingerprint, files, run_id, recorded_at FROM step_inputs WHERE step = ? AND partition = ?",
            list(step.key),
        )
    except duckdb.CatalogException:  # a warehouse written before steps were recorded
        return step
    if last.empty or last["fingerprint"].iat[0] != step.fingerprint:
        return step
    if json.loads(last["files"].iat[0]) != step.files or not outputs_present(warehouse, step):
        return step
    when = pd.Timestamp(last["recorded_at"].iat[0]).strftime("%Y-%m-%d %H:%M")
    step.skip_reason = f"inputs unchanged since run {last['run_id'].iat[0][:8]} ({when})"
    return step


def record(warehouse: ResultStore, step: Step, run_id: str, files: list[list[Any]] | None = None) -> None:
    """Remembers the inputs of a step that succeeded (files: their state after the run, where it read them)."""
    row = {
        "step": step.kind,
        "partition": step.partition,
        "fingerprint": step.fingerprint,
        "files": json.dumps(step.files if files is None else files),
        "run_id": run_id,
        "recorded_at": pd.Timestamp.now(tz="UTC").tz_localize(None),
    }
    warehouse.upsert("step_inputs", pd.DataFrame([row]))
