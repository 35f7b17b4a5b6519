"""Record <-> row mapping: how each record type of holistic_dagster.records is stored in the core tables (source
files, instances, prompts, completions and the completion cache, instance and scenario scores) as the tables' typed
rows (warehouse/records/, generated from the declarations, so mypy names a mapper that sets a column its table no
longer has), and read back."""

from __future__ import annotations

import json
from datetime import datetime
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
from holistic_dagster.warehouse.records import (
    CompletionCacheRow,
    CompletionsRow,
    InstanceScoresRow,
    InstancesRow,
    PromptsRow,
    ScenarioMetricsRow,
    SourceFilesRow,
)


def source_file_row(source: SourceFile, *, version: str, scenario: str) -> SourceFilesRow:
    return SourceFilesRow(version=version, scenario=scenario, uri=source.uri, sha256=source.sha256,
                          revision=source.revision, num_bytes=source.num_bytes)  # fmt: skip


def instance_row(i: Instance, *, version: str, scenario: str) -> InstancesRow:
    return InstancesRow(
        version=version, scenario=scenario, instance_id=i.instance_id, split=i.split, subset=i.subset, input=i.input,
        references=json.dumps([{"output": r.output, "correct": r.correct} for r in i.references]),
        num_correct_references=len(i.correct_references), is_multiple_choice=i.is_multiple_choice,
        source_uri=i.source.uri, record=i.record, perturbation=i.perturbation, original_instance_id=i.original_id,
        metadata=json.dumps(i.metadata),
    )  # fmt: skip


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


def prompt_row(
    r: Request, adapter_method: str, template: str, *, model: str, version: str, scenario: str
) -> PromptsRow:
    return PromptsRow(
        model=model, version=version, scenario=scenario, instance_id=r.instance_id, request_id=r.request_id,
        kind=r.kind, adapter_method=adapter_method, template=template, prompt=r.prompt, continuation=r.continuation,
        choice_index=r.choice_index, is_null_context=r.is_null_context, max_tokens=r.max_tokens,
        temperature=r.temperature, stop=json.dumps(list(r.stop)), num_train_instances=r.num_train_instances,
        truncated=r.truncated, num_prompt_tokens=r.num_prompt_tokens,
    )  # fmt: skip


def request_from_row(r: PromptsRow) -> Request:
    """From a `prompts` row: its record, or a frame's itertuples row (the same attributes, so mypy checks the names
    read here against the declaration)."""
    return Request(
        request_id=r.request_id,
        instance_id=r.instance_id,
        kind=r.kind,
        prompt=r.prompt,
        continuation=r.continuation,
        choice_index=None if r.choice_index is None or pd.isna(r.choice_index) else int(r.choice_index),
        is_null_context=bool(r.is_null_context),
        max_tokens=int(r.max_tokens),
        temperature=float(r.temperature),
        stop=tuple(json.loads(r.stop)),
        num_train_instances=int(r.num_train_instances),
        truncated=bool(r.truncated),
        num_prompt_tokens=int(r.num_prompt_tokens),
    )


def completion_row(c: Completion, provenance_id: str, *, model: str, version: str, scenario: str) -> CompletionsRow:
    return CompletionsRow(
        model=model, version=version, scenario=scenario, request_id=c.request_id, text=c.text,
        tokens=json.dumps(list(c.tokens)), logprobs=json.dumps(list(c.logprobs)), logprob=c.logprob,
        num_prompt_tokens=c.num_prompt_tokens, num_completion_tokens=c.num_completion_tokens, latency_s=c.latency_s,
        finish_reason=c.finish_reason, error=c.error, provenance_id=provenance_id,
        top_logprobs=json.dumps(list(c.top_logprobs)),
    )  # fmt: skip


def cache_row(c: Completion, model_key: str, provenance_id: str, created_at: datetime) -> CompletionCacheRow:
    """A finished completion as the completion cache keeps it (no error column: failed ones are not cached)."""
    return CompletionCacheRow(
        model_key=model_key, request_id=c.request_id, sample_index=0, text=c.text, tokens=json.dumps(list(c.tokens)),
        logprobs=json.dumps(list(c.logprobs)), logprob=c.logprob, num_prompt_tokens=c.num_prompt_tokens,
        num_completion_tokens=c.num_completion_tokens, latency_s=c.latency_s, finish_reason=c.finish_reason,
        provenance_id=provenance_id, created_at=created_at, top_logprobs=json.dumps(list(c.top_logprobs)),
    )  # fmt: skip


def completion_from_row(r: CompletionsRow | CompletionCacheRow) -> Completion:
    """From a `completions` or `completion_cache` row, a record or an itertuples row (the cache has no error column:
    cached ones succeeded)."""
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


def instance_score_row(
    s: InstanceScore, provenance_id: str, *, model: str, version: str, scenario: str
) -> InstanceScoresRow:
    return InstanceScoresRow(
        model=model, version=version, scenario=scenario, instance_id=s.instance_id, metric=s.metric, family=s.family,
        value=s.value, request_id=s.request_id, prediction=s.prediction, provenance_id=provenance_id,
        perturbation=s.perturbation, scorer=s.scorer,
    )  # fmt: skip


def scenario_metric_row(
    m: ScenarioMetric, provenance_id: str, *, model: str, version: str, scenario: str, n_full: int | None
) -> ScenarioMetricsRow:
    """n_full: the full draw's instances where the values are estimated from part of it (None: measured on it)."""
    return ScenarioMetricsRow(
        model=model, version=version, scenario=scenario, metric=m.metric, family=m.family, value=m.value,
        count=m.count, provenance_id=provenance_id, perturbation=m.perturbation, scorer=m.scorer, note=m.note,
        estimated=n_full is not None, n_full=n_full,
    )  # fmt: skip


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


def tokens_of(tokens: str, logprobs: str, top_logprobs: str | None) -> list[tuple[str, float, dict[str, float]]]:
    """A completion's generated tokens from its JSON columns: (token, its log-probability, its top alternatives where
    given)."""
    top = json_list(top_logprobs)
    return [
        (t, float(lp), top[i] if i < len(top) else {})
        for i, (t, lp) in enumerate(zip(json_list(tokens), json_list(logprobs)))
    ]


def completion_tokens(row: CompletionsRow) -> list[tuple[str, float, dict[str, float]]]:
    """tokens_of a completions row."""
    return tokens_of(row.tokens, row.logprobs, row.top_logprobs)
