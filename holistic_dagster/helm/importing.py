"""HELM runs into the warehouse: each (scenario, model) becomes a model partition of a suite version, with its
instances, prompts, completions, per-instance scores and scenario metrics, and lineage to the run folder.

Two ways in:
- into a suite version of the catalog (`--version v5`): HELM's instances must be the version's own (the same
  question and choices; a suite with `conventions: helm` and HELM's max_eval_instances draws the same ones), so
  an imported model is compared with ours instance by instance;
- into a version of its own (default `helm-<suite>`), which holds HELM's instances as HELM wrote them, for any
  scenario HELM has.

Every run is read and checked, and every row built, before anything is written; the rows of all partitions are
written in one transaction. What is not imported, and says so: perturbed instances (HELM's robustness and
fairness runs) and train trials after the first.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from holistic_dagster.errors import DataFormatError, HolisticError
from holistic_dagster.helm.names import our_metric, scenario_for_group
from holistic_dagster.helm.runs import HelmRun, RequestState, find_run_folders, read_run
from holistic_dagster.records import Completion, Instance, Reference, Request, request_id, sha256_json
from holistic_dagster.warehouse.access import Instances, SourceFiles
from holistic_dagster.warehouse.rows import (
    completion_row,
    instance_row,
    prompt_row,
    references_of,
    source_file_row,
)

BACKEND = "helm"  # provenance.backend of an imported partition: how the leaderboard and report mark it
MAIN_METRICS = ("exact_match", "quasi_exact_match", "f1_score", "rouge_l", "bits_per_byte")


@dataclass
class Partition:
    """One imported (scenario, model): its runs (one per subset) and the rows built from them."""

    scenario: str
    model: str
    runs: list[HelmRun]
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    instances: dict[str, Instance] = field(default_factory=dict)  # a version of its own: the instances to write
    skipped: dict[str, int] = field(default_factory=dict)  # what was not imported, and how many


def default_version(runs: list[HelmRun]) -> str:
    suites = sorted({run.suite for run in runs})
    if len(suites) > 1:
        raise HolisticError(f"these runs come from several HELM suites ({', '.join(suites)}): pass --version")
    return f"helm-{suites[0]}"


def import_runs(warehouse, catalog, paths: list[Path], version: str | None = None) -> list[Partition]:
    runs = [read_run(folder) for folder in find_run_folders(paths)]
    warehouse.ensure_schema()  # a new warehouse: this import is its first content
    version = version or default_version(runs)
    into_suite = version in catalog.suite_versions()
    partitions: dict[tuple[str, str], Partition] = {}
    for run in runs:
        key = (scenario_for_group(run.group), run.model)
        part = partitions.setdefault(key, Partition(*key, runs=[]))
        twin = next((r for r in part.runs if r.subset == run.subset), None)
        if twin is not None:
            raise HolisticError(
                f"{twin.folder} and {run.folder}: two runs of {run.model} on {run.group} {run.subset!r} (another "
                "method or setting?): import them into different versions (--version)"
            )
        part.runs.append(run)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    for part in partitions.values():
        ours = None
        if into_suite:
            catalog.resolved_scenario(version, part.scenario)  # the suite must have the scenario
            ours = _our_instances(warehouse, version, part.scenario)
        _build(part, version, ours, now, catalog)
    jobs = []
    instances = _merged_instances(warehouse, version, [p for p in partitions.values() if not into_suite])
    for scenario, (rows, sources) in instances.items():
        jobs.append(({"version": version, "scenario": scenario}, {"instances": rows, "source_files": sources}))
    for part in partitions.values():
        jobs.append(({"version": version, "scenario": part.scenario, "model": part.model}, part.frames))
        provenance = part.provenance["provenance_id"]
        jobs.append(({"provenance_id": provenance}, {"provenance": pd.DataFrame([part.provenance])}))
    warehouse.replace_partitions(jobs)
    return list(partitions.values())


# --- instances ---------------------------------------------------------------------------------------------------


def _key(text: str, references) -> tuple:
    return text, tuple(references)


def _our_instances(warehouse, version: str, scenario: str) -> dict[tuple, str]:
    """{(input, reference texts): instance_id} of the version's evaluated instances of the scenario."""
    rows = Instances(warehouse).originals(version, scenario)
    if rows.empty:
        raise HolisticError(
            f"suite version {version!r} has no instances of {scenario!r} in {warehouse.path} yet: evaluate a model on "
            f"it first (holistic evaluate --version {version}), or import into a version of its own (leave out "
            "--version)"
        )
    return {_key(r.input, [x["output"] for x in references_of(r.references)]): r.instance_id for r in rows.itertuples()}


def _helm_instance(run: HelmRun, index: int, state: RequestState) -> Instance:
    inst = state.instance
    source = run.files["scenario_state.json"]
    return Instance(
        instance_id=f"{run.subset}/{inst.id}" if run.subset else inst.id,
        split=inst.split,
        input=inst.input.text,
        references=tuple(Reference(r.output.text, r.correct) for r in inst.references),
        source=source,
        record=f"request_states[{index}]",
        subset=run.subset,
        is_multiple_choice=run.spec.adapter_spec.method.startswith("multiple_choice"),
        metadata={"helm_instance_id": inst.id, **({"sub_split": inst.sub_split} if inst.sub_split else {})},
    )


def _merged_instances(warehouse, version: str, parts: list[Partition]) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """Per scenario, its instances so far (other models' imports) with this import's: an id seen before must be the
    same question with the same references."""
    out = {}
    for scenario in sorted({p.scenario for p in parts}):
        new: dict[str, Instance] = {}
        for part in (p for p in parts if p.scenario == scenario):
            for iid, inst in part.instances.items():
                _same(new.setdefault(iid, inst), inst)
        old = Instances(warehouse).where(version=version, scenario=scenario)
        rows = {r["instance_id"]: r for r in old.to_dict("records")}
        for iid, inst in new.items():
            row = vars(instance_row(inst, version=version, scenario=scenario))
            if iid in rows and (rows[iid]["input"], references_of(rows[iid]["references"])) != (
                row["input"],
                references_of(row["references"]),
            ):
                raise HolisticError(
                    f"{inst.source.uri}: instance {inst.metadata['helm_instance_id']} ({inst.subset}) differs from the "
                    f"one imported into {version!r} before under the same id: import it into another version"
                )
            rows[iid] = row
        sources = SourceFiles(warehouse).where(version=version, scenario=scenario)
        files = {r["uri"]: r for r in sources.to_dict("records")}
        for part in (p for p in parts if p.scenario == scenario):
            for run in part.runs:
                for f in run.files.values():
                    files[f.uri] = vars(source_file_row(f, version=version, scenario=scenario))
        out[scenario] = (pd.DataFrame(list(rows.values())), pd.DataFrame(list(files.values())))
    return out


def _same(a: Instance, b: Instance) -> None:
    if (a.input, a.references) != (b.input, b.references):
        raise HolisticError(f"{b.source.uri}: instance {b.instance_id} differs between two runs of one model")


# --- requests, completions, scores -------------------------------------------------------------------------------


def _request(run: HelmRun, state: RequestState, instance_id: str) -> Request:
    r = state.request
    prompt, continuation, kind = r.prompt, "", "generate"
    if r.echo_prompt and r.max_tokens == 0:  # a scored continuation (separate multiple choice, language modeling)
        kind = "score"
        if state.reference_index is not None:
            choice = " " + state.instance.references[state.reference_index].output.text
            if prompt.endswith(choice):  # HELM sends the question and the choice as one text
                prompt, continuation = prompt[: -len(choice)], choice
    stop = tuple(r.stop_sequences)
    return Request(
        request_id=request_id(
            kind=kind, prompt=prompt, continuation=continuation, max_tokens=r.max_tokens,
            temperature=r.temperature, stop=stop,
        ),
        instance_id=instance_id,
        kind=kind,
        prompt=prompt,
        continuation=continuation,
        choice_index=state.reference_index,
        is_null_context=state.request_mode == "calibration",
        max_tokens=r.max_tokens,
        temperature=r.temperature,
        stop=stop,
        num_train_instances=state.num_train_instances,
        truncated=state.prompt_truncated,
    )  # fmt: skip


def _completion(state: RequestState, rid: str, num_prompt_tokens: int) -> Completion:
    result = state.result
    assert result is not None  # read_run checked
    if not result.success:
        return Completion(rid, "", error=result.error or "HELM recorded a failed request")
    c = result.completions[0]
    return Completion(
        request_id=rid,
        text=c.text,
        tokens=tuple(t.text for t in c.tokens),
        logprobs=tuple(t.logprob for t in c.tokens),
        logprob=c.logprob,
        num_prompt_tokens=num_prompt_tokens,
        num_completion_tokens=len(c.tokens),
        latency_s=result.request_time or 0.0,
        finish_reason=str((c.finish_reason or {}).get("reason", "")),
    )


def _prediction(states: list[tuple[RequestState, Request]]) -> tuple[str, str]:
    """(the prediction, the request that carries it) of one instance's requests: the generated text (a joint
    multiple-choice letter mapped to its choice), or the choice a separate multiple-choice run scored highest."""
    state, request = states[0]
    if request.kind == "generate":
        result = state.result
        text = result.completions[0].text if result and result.success else ""
        if state.output_mapping:
            text = state.output_mapping.get(text.strip(), text)
        return text, request.request_id
    scored = [(s, r) for s, r in states if not r.is_null_context and s.result and s.result.success]
    if not scored:
        return "", request.request_id
    best, best_request = max(scored, key=lambda sr: sr[0].result.completions[0].logprob)
    index = best.reference_index
    return (best.instance.references[index].output.text if index is not None else ""), best_request.request_id


def _build(part: Partition, version: str, ours: dict[tuple, str] | None, now: datetime, catalog) -> None:
    keys = {"version": version, "scenario": part.scenario, "model": part.model}
    first = part.runs[0]
    provenance_id = "helm-" + sha256_json([sorted(f.sha256 for f in r.files.values()) for r in part.runs])[:24]
    adapter = first.spec.adapter_spec
    prompts, completions, scores, metrics, imported = [], {}, [], [], []
    skipped: dict[str, int] = defaultdict(int)
    for run in part.runs:
        ids: dict[str, str] = {}  # HELM's instance id -> ours
        by_instance: dict[str, list[tuple[RequestState, Request]]] = defaultdict(list)
        stats = {(e.instance_id, e.train_trial_index): e for e in run.instance_stats if e.perturbation is None}
        for index, state in enumerate(run.states):
            if state.instance.perturbation is not None:
                skipped["perturbed request states (HELM robustness/fairness)"] += 1
                continue
            if state.train_trial_index > 0:
                skipped["request states of train trials after the first"] += 1
                continue
            helm_id = state.instance.id
            if helm_id not in ids:
                inst = _helm_instance(run, index, state)
                if ours is None:
                    part.instances.setdefault(inst.instance_id, inst)
                    ids[helm_id] = inst.instance_id
                else:
                    found = ours.get(_key(inst.input, [r.output for r in inst.references]))
                    if found is None:
                        raise DataFormatError(
                            run.files["scenario_state.json"].uri,
                            f"request_states[{index}]",
                            f"instance {helm_id} ({run.subset or run.group}: {inst.input[:80]!r}) is not one of suite "
                            f"version {version!r}'s {part.scenario} instances: import into a version of its own (leave "
                            "out --version)",
                        )
                    ids[helm_id] = found
            iid = ids[helm_id]
            request = _request(run, state, iid)
            by_instance[helm_id].append((state, request))
            prompts.append(vars(prompt_row(request, adapter.method, f"helm run {run.spec.name}", **keys)))
        for helm_id, states in by_instance.items():
            iid = ids[helm_id]
            entry = stats.get((helm_id, 0))
            values = {} if entry is None else {
                s.name.name: (s.mean if s.mean is not None else s.sum / s.count)
                for s in entry.stats if s.count and s.name.perturbation is None
            }  # fmt: skip
            tokens = int(values.get("num_prompt_tokens", 0)) if len(states) == 1 else 0
            for state, request in states:
                if request.request_id not in completions:
                    completion = _completion(state, request.request_id, tokens)
                    completions[request.request_id] = vars(completion_row(completion, provenance_id, **keys))
            prediction, carrier = _prediction(states)
            for name, value in values.items():
                known = our_metric(name)
                if known is None:
                    skipped[f"per-instance values of {name} (a metric we do not define)"] += 1
                    continue
                ours_name, family = known
                scores.append({**keys, "instance_id": iid, "metric": ours_name, "family": family, "value": value,
                               "request_id": carrier, "prediction": prediction, "provenance_id": provenance_id,
                               "perturbation": "", "scorer": ""})  # fmt: skip
        imported.append(_imported_row(run, keys, provenance_id, now))
    scores_frame = pd.DataFrame(scores)
    metrics = _scenario_metrics(part, scores_frame, keys, provenance_id, version, ours is not None)
    main = _main_metric(catalog, part.scenario, set(scores_frame["metric"]) if len(scores_frame) else set())
    for row in imported:
        row["main_metric"] = main
    part.skipped = dict(skipped)
    part.provenance = _provenance(provenance_id, part.model, adapter, now)
    part.frames = {
        "prompts": pd.DataFrame(prompts).drop_duplicates(["instance_id", "request_id"]),
        "completions": pd.DataFrame(list(completions.values())),
        "instance_scores": scores_frame,
        "scenario_metrics": pd.DataFrame(metrics),
        "imported_runs": pd.DataFrame(imported),
    }


def _imported_row(run, keys: dict, provenance_id: str, now: datetime) -> dict:
    """The imported_runs row of one HELM run: where it came from (its files with their checksums) and its spec."""
    files = [{"name": Path(f.uri).name, "sha256": f.sha256, "num_bytes": f.num_bytes} for f in run.files.values()]
    return {
        **keys,
        "run_name": run.spec.name,
        "subset": run.subset,
        "folder": str(run.folder),
        "files": json.dumps(files),
        "adapter_method": run.spec.adapter_spec.method,
        "description": str(run.about.get("description", "")),
        "run_spec": json.dumps(run.raw_spec),
        "provenance_id": provenance_id,
        "imported_at": now,
    }


def _scenario_metrics(part: Partition, scores: pd.DataFrame, keys, provenance_id, version, into_suite) -> list[dict]:
    """Per metric, over the evaluated (test) instances: the mean of the per-instance values; a metric HELM only
    computes per run (ECE, perplexity) comes from stats.json, averaged over the runs where there are several
    (HELM's leaderboard averages its runs too)."""
    test_ids = {
        iid for run in part.runs for s in run.states if s.instance.split == "test" and s.instance.perturbation is None
        for iid in [f"{run.subset}/{s.instance.id}" if run.subset else s.instance.id]
    }  # fmt: skip
    out = []
    if len(scores):
        on_test = scores if into_suite else scores[scores["instance_id"].isin(test_ids)]
        for (name, family), rows in on_test.groupby(["metric", "family"]):
            out.append({**keys, "metric": name, "family": family, "value": float(rows["value"].mean()),
                        "count": len(rows), "provenance_id": provenance_id, "perturbation": "", "scorer": "",
                        "note": ""})  # fmt: skip
    per_instance = {(r["metric"], r["family"]) for r in out}
    run_level: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in part.runs:
        for s in run.stats:
            if s.name.split == "test" and s.name.perturbation is None and s.count and s.name.sub_split is None:
                name = our_metric(s.name.name)
                if name is not None and name not in per_instance:
                    run_level[name].append(s.mean if s.mean is not None else s.sum / s.count)
    n = len(test_ids)
    for (name, family), values in run_level.items():
        out.append({**keys, "metric": name, "family": family, "value": sum(values) / len(values), "count": n,
                    "provenance_id": provenance_id, "perturbation": "", "scorer": "", "note": ""})  # fmt: skip
    return out


def _main_metric(catalog, scenario: str, names: set[str]) -> str:
    """The metric an imported scenario is ranked by: the catalog's for a scenario it has, else the first of
    MAIN_METRICS the runs computed."""
    try:
        main = catalog.scenario(scenario).main_metric
        if main in names:
            return main
    except HolisticError:
        pass
    return next((m for m in MAIN_METRICS if m in names), "")


def _provenance(provenance_id: str, model: str, adapter, now: datetime) -> dict[str, Any]:
    return {
        "provenance_id": provenance_id,
        "model": model,
        "backend": BACKEND,
        "model_path": adapter.model_deployment or adapter.model,
        "model_revision": "not recorded by HELM",
        "batch_size": None,
        "max_context": None,
        "decoding": json.dumps(
            {
                "method": adapter.method,
                "temperature": adapter.temperature,
                "max_tokens": adapter.max_tokens,
                "stop": adapter.stop_sequences,
                "max_train_instances": adapter.max_train_instances,
                "max_eval_instances": adapter.max_eval_instances,
            }  # fmt: skip
        ),
        "hardware": "",
        "library_versions": json.dumps({"helm": "imported run"}),
        "dagster_run_id": None,
        "created_at": now,
    }
