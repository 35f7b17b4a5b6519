"""Record <-> row mapping: how each record type of holistic_dagster.records is stored in the tables of the
schema (warehouse/tables/), and read back: the core tables' (instances, prompts, completions, instance and scenario
scores, provenance). Every table's row as it is stored is a typed record too (warehouse/records/, generated from the
declarations); the other stages build their frames with Table.frame."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from holistic_dagster.records import (
    Completion,
    Instance,
    InstanceScore,
    Reference,
    Request,
    ScenarioMetric,
    SourceFile,
)


def source_file_row(source: SourceFile) -> dict[str, Any]:
    return {"uri": source.uri, "sha256": source.sha256, "revision": source.revision, "num_bytes": source.num_bytes}


def instance_row(i: Instance) -> dict[str, Any]:
    return {
        "instance_id": i.instance_id,
        "split": i.split,
        "subset": i.subset,
        "input": i.input,
        "references": json.dumps([{"output": r.output, "correct": r.correct} for r in i.references]),
        "num_correct_references": len(i.correct_references),
        "is_multiple_choice": i.is_multiple_choice,
        "source_uri": i.source.uri,
        "record": i.record,
        "perturbation": i.perturbation,
        "original_instance_id": i.original_id,
        "metadata": json.dumps(i.metadata),
    }


def instance_from_row(r: Any) -> Instance:
    """From an `instances` row joined with its source file's sha256, revision and num_bytes."""
    return Instance(
        instance_id=r.instance_id,
        split=r.split,
        input=r.input,
        references=tuple(Reference(x["output"], x["correct"]) for x in json.loads(r.references)),
        source=SourceFile(r.source_uri, r.sha256, r.revision, int(r.num_bytes or 0)),
        record=r.record,
        subset=r.subset,
        is_multiple_choice=bool(r.is_multiple_choice),
        perturbation=r.perturbation or "",
        original_id=r.original_instance_id or "",
        metadata=json.loads(r.metadata or "{}"),
    )


def prompt_row(r: Request, adapter_method: str, template: str) -> dict[str, Any]:
    return {
        "instance_id": r.instance_id,
        "request_id": r.request_id,
        "kind": r.kind,
        "adapter_method": adapter_method,
        "template": template,
        "prompt": r.prompt,
        "continuation": r.continuation,
        "choice_index": r.choice_index,
        "is_null_context": r.is_null_context,
        "max_tokens": r.max_tokens,
        "temperature": r.temperature,
        "stop": json.dumps(list(r.stop)),
        "num_train_instances": r.num_train_instances,
        "truncated": r.truncated,
        "num_prompt_tokens": r.num_prompt_tokens,
    }


def request_from_row(r: Any) -> Request:
    return Request(
        request_id=r.request_id,
        instance_id=r.instance_id,
        kind=r.kind,
        prompt=r.prompt,
        continuation=r.continuation,
        choice_index=None if pd.isna(r.choice_index) else int(r.choice_index),
        is_null_context=bool(r.is_null_context),
        max_tokens=int(r.max_tokens),
        temperature=float(r.temperature),
        stop=tuple(json.loads(r.stop)),
        num_train_instances=int(r.num_train_instances),
        truncated=bool(r.truncated),
        num_prompt_tokens=int(r.num_prompt_tokens),
    )


def completion_row(c: Completion) -> dict[str, Any]:
    return {
        "request_id": c.request_id,
        "text": c.text,
        "tokens": json.dumps(list(c.tokens)),
        "logprobs": json.dumps(list(c.logprobs)),
        "logprob": c.logprob,
        "num_prompt_tokens": c.num_prompt_tokens,
        "num_completion_tokens": c.num_completion_tokens,
        "latency_s": c.latency_s,
        "finish_reason": c.finish_reason,
        "error": c.error,
        "top_logprobs": json.dumps(list(c.top_logprobs)),
    }


def completion_from_row(r: Any) -> Completion:
    """From a `completions` or `completion_cache` row (the cache has no error column: cached ones succeeded)."""
    return Completion(
        request_id=r.request_id,
        text=r.text,
        tokens=tuple(json.loads(r.tokens)),
        logprobs=tuple(json.loads(r.logprobs)),
        logprob=float(r.logprob),
        num_prompt_tokens=int(r.num_prompt_tokens),
        num_completion_tokens=int(r.num_completion_tokens),
        latency_s=float(r.latency_s),
        finish_reason=r.finish_reason,
        error=getattr(r, "error", ""),
        top_logprobs=tuple(json.loads(r.top_logprobs or "[]")),
    )


def instance_score_row(s: InstanceScore, provenance_id: str) -> dict[str, Any]:
    # the columns are the record's fields, all scalars: its __dict__ (asdict deep-copies each one)
    return {**vars(s), "provenance_id": provenance_id}


def scenario_metric_row(m: ScenarioMetric, provenance_id: str) -> dict[str, Any]:
    return {**vars(m), "provenance_id": provenance_id}


# --- the JSON columns, decoded for readers that take rows as they are (trace, the report, the arena, HELM export) --
def references_of(text: str) -> list[dict[str, Any]]:
    """instances.references: [{output, correct}] in reference order."""
    references: list[dict[str, Any]] = json.loads(text)
    return references


def metadata_of(text: str | None) -> dict[str, Any]:
    """instances.metadata: the scenario-specific fields a metric needs."""
    return json_object(text)


def json_object(text: str | None) -> dict[str, Any]:
    """A JSON object column (instances.metadata, provenance.decoding, imported_runs.run_spec)."""
    value: dict[str, Any] = json.loads(text or "{}")
    return value


def json_list(text: str | None) -> list[Any]:
    """A JSON list column (prompts.stop, completions.tokens, completions.logprobs, imported_runs.files)."""
    value: list[Any] = json.loads(text or "[]")
    return value


def tokens_of(completion: Any) -> list[tuple[str, float, dict[str, float]]]:
    """A completion row's generated tokens: (token, its log-probability, its top alternatives where given)."""
    tokens, logprobs = json_list(completion["tokens"]), json_list(completion["logprobs"])
    top = json_list(completion["top_logprobs"])
    return [(t, float(lp), top[i] if i < len(top) else {}) for i, (t, lp) in enumerate(zip(tokens, logprobs))]
