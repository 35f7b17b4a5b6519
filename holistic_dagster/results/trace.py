"""Trace one score back to everything that produced it: the score, the raw completion with its
log-probabilities, the exact prompt, the instance and its references (and the original, for a perturbed
instance), the source file with its checksum, and how and by which Dagster run it was produced."""

from __future__ import annotations

from typing import Any

import duckdb

from holistic_dagster.errors import HolisticError
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import (
    Completions,
    ImportedRuns,
    Instances,
    InstanceScores,
    Prompts,
    Provenance,
    SourceFiles,
)
from holistic_dagster.warehouse.records import InstanceScoresRow, PromptsRow, ProvenanceRow
from holistic_dagster.warehouse.rows import completion_tokens, json_list, metadata_of, references_of


def trace_score(
    warehouse: ResultStore, model: str, version: str, scenario: str, instance_id: str, metric: str, family: str = ""
) -> dict[str, Any]:
    """The chain as plain values (what `holistic trace --json` prints). Rows are read as the tables' typed records, so
    a renamed column is named by the type checker here, not found by whoever reads the chain."""
    score = _score(warehouse, model, version, scenario, instance_id, metric, family)
    asked = {"model": model, "version": version, "scenario": scenario, "request_id": score.request_id}
    completion = Completions(warehouse).typed_rows((), **asked)[0]
    prompt = Prompts(warehouse).typed_rows((), **asked)[0]
    instance = _instance(warehouse, version, scenario, instance_id)
    evaluated = (
        instance if prompt.instance_id == instance_id else _instance(warehouse, version, scenario, prompt.instance_id)
    )  # a worst-case score points at the perturbed instance that gave it
    original = None
    if instance["original_instance_id"]:
        original = _instance(warehouse, version, scenario, instance["original_instance_id"])
    source = SourceFiles(warehouse).typed_rows(version=version, scenario=scenario, uri=instance["source_uri"])[0]
    provenance = Provenance(warehouse).typed_rows(provenance_id=score.provenance_id)[0]
    return {
        "score": {"family": score.family, "metric": score.metric, "perturbation": score.perturbation,
                  "value": score.value, "prediction": score.prediction, "scorer": score.scorer},
        "completion": {
            "request_id": completion.request_id,
            "text": completion.text,
            "logprob": completion.logprob,
            "tokens": [{"token": t, "logprob": lp, "top": top} for t, lp, top in completion_tokens(completion)],
            "finish_reason": completion.finish_reason,
            "latency_s": completion.latency_s,
            "error": completion.error,
        },
        "prompt": _prompt(prompt),
        "instance": instance,
        "evaluated_instance": evaluated if evaluated is not instance else None,
        "original_instance": original,
        "source_file": {"uri": source.uri, "sha256": source.sha256, "revision": source.revision,
                        "num_bytes": source.num_bytes},
        "provenance": _provenance(provenance),
        "imported_run": _imported_run(warehouse, version, scenario, model, instance["subset"]),
    }  # fmt: skip


def _prompt(row: PromptsRow) -> dict[str, Any]:
    return {
        "kind": row.kind, "adapter_method": row.adapter_method, "template": row.template, "prompt": row.prompt,
        "continuation": row.continuation, "choice_index": row.choice_index,
        "num_train_instances": row.num_train_instances, "truncated": row.truncated,
        "num_prompt_tokens": row.num_prompt_tokens, "max_tokens": row.max_tokens, "temperature": row.temperature,
        "stop": row.stop,
    }  # fmt: skip


def _provenance(row: ProvenanceRow) -> dict[str, Any]:
    return {
        "backend": row.backend, "model_path": row.model_path, "model_revision": row.model_revision,
        "batch_size": row.batch_size, "decoding": row.decoding, "hardware": row.hardware,
        "library_versions": row.library_versions, "dagster_run_id": row.dagster_run_id,
        "created_at": row.created_at.isoformat(),
    }  # fmt: skip


def _score(
    warehouse: ResultStore, model: str, version: str, scenario: str, instance_id: str, metric: str, family: str
) -> InstanceScoresRow:
    """The one instance_scores row traced; an error saying what the instance has, or which families to choose from."""
    accessor = InstanceScores(warehouse)
    keys = {"model": model, "version": version, "scenario": scenario, "instance_id": instance_id, "metric": metric}
    scores = accessor.typed_rows(order_by=("family",), **keys, **({"family": family} if family else {}))
    if not scores:
        known = accessor.metrics_of_instance(version, scenario, model, instance_id)
        hint = f"; this instance has: {', '.join(known)}" if known else " (no scores for that instance: check the id)"
        raise HolisticError(f"no score {metric!r} for {model} / {version} / {scenario} / {instance_id}{hint}")
    if len(scores) > 1:
        raise HolisticError(
            f"{metric!r} exists in families {', '.join(s.family for s in scores)} for this instance: pass --family"
        )
    return scores[0]


def _imported_run(
    warehouse: ResultStore, version: str, scenario: str, model: str, subset: str
) -> dict[str, Any] | None:
    """A partition imported from HELM: the run folder it came from (the one for the instance's subset)."""
    try:
        imported = ImportedRuns(warehouse).run_for(version, scenario, model, subset)
    except duckdb.CatalogException:  # a file no release with imports has written to yet
        return None
    if imported.empty:
        return None
    return {**imported.iloc[0][["run_name", "folder"]].to_dict(), "files": json_list(imported["files"].iat[0])}


def _instance(warehouse: ResultStore, version: str, scenario: str, instance_id: str) -> dict[str, Any]:
    row = Instances(warehouse).typed_rows(version=version, scenario=scenario, instance_id=instance_id)[0]
    return {
        "instance_id": row.instance_id,
        "split": row.split,
        "subset": row.subset,
        "input": row.input,
        "references": references_of(row.references),
        "perturbation": row.perturbation or "",
        "original_instance_id": row.original_instance_id or "",
        "metadata": metadata_of(row.metadata),
        "source_uri": row.source_uri,
        "record": row.record,
    }
