"""Trace one score back to everything that produced it: the score, the raw completion with its
log-probabilities, the exact prompt, the instance and its references (and the original, for a perturbed
instance), the source file with its checksum, and how and by which Dagster run it was produced."""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

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
from holistic_dagster.warehouse.rows import json_list, metadata_of, references_of, tokens_of


def trace_score(
    warehouse: ResultStore, model: str, version: str, scenario: str, instance_id: str, metric: str, family: str = ""
) -> dict[str, Any]:
    score = _score(warehouse, model, version, scenario, instance_id, metric, family)
    asked = {"model": model, "version": version, "scenario": scenario, "request_id": score["request_id"]}
    completion = Completions(warehouse).where(**asked).iloc[0]
    prompt = Prompts(warehouse).where(**asked).iloc[0]
    instance = _instance(warehouse, version, scenario, instance_id)
    evaluated = (
        instance
        if prompt["instance_id"] == instance_id
        else _instance(warehouse, version, scenario, prompt["instance_id"])
    )  # a worst-case score points at the perturbed instance that gave it
    original = None
    if instance["original_instance_id"]:
        original = _instance(warehouse, version, scenario, instance["original_instance_id"])
    source = SourceFiles(warehouse).where(version=version, scenario=scenario, uri=instance["source_uri"]).iloc[0]
    provenance = Provenance(warehouse).where(provenance_id=score["provenance_id"]).iloc[0]
    return {
        "score": {k: _plain(score[k]) for k in ("family", "metric", "perturbation", "value", "prediction", "scorer")},
        "completion": {
            "request_id": completion["request_id"],
            "text": completion["text"],
            "logprob": float(completion["logprob"]),
            "tokens": [{"token": t, "logprob": lp, "top": top} for t, lp, top in tokens_of(completion)],
            "finish_reason": completion["finish_reason"],
            "latency_s": float(completion["latency_s"]),
            "error": completion["error"],
        },
        "prompt": {k: _plain(prompt[k]) for k in PROMPT_FIELDS},
        "instance": instance,
        "evaluated_instance": evaluated if evaluated is not instance else None,
        "original_instance": original,
        "source_file": {k: _plain(source[k]) for k in ("uri", "sha256", "revision", "num_bytes")},
        "provenance": {k: _plain(provenance[k]) for k in PROVENANCE_FIELDS},
        "imported_run": _imported_run(warehouse, version, scenario, model, instance["subset"]),
    }


PROMPT_FIELDS = (
    "kind", "adapter_method", "template", "prompt", "continuation", "choice_index", "num_train_instances", "truncated",
    "num_prompt_tokens", "max_tokens", "temperature", "stop",
)  # fmt: skip
PROVENANCE_FIELDS = (
    "backend", "model_path", "model_revision", "batch_size", "decoding", "hardware", "library_versions",
    "dagster_run_id", "created_at",
)  # fmt: skip


def _score(
    warehouse: ResultStore, model: str, version: str, scenario: str, instance_id: str, metric: str, family: str
) -> pd.Series:
    """The one instance_scores row traced; an error saying what the instance has, or which families to choose from."""
    accessor = InstanceScores(warehouse)
    keys = {"model": model, "version": version, "scenario": scenario, "instance_id": instance_id, "metric": metric}
    scores = accessor.where(order_by=("family",), **keys, **({"family": family} if family else {}))
    if scores.empty:
        known = accessor.metrics_of_instance(version, scenario, model, instance_id)
        hint = f"; this instance has: {', '.join(known)}" if known else " (no scores for that instance: check the id)"
        raise HolisticError(f"no score {metric!r} for {model} / {version} / {scenario} / {instance_id}{hint}")
    if len(scores) > 1:
        raise HolisticError(
            f"{metric!r} exists in families {', '.join(scores['family'])} for this instance: pass --family"
        )
    return scores.iloc[0]


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


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value
