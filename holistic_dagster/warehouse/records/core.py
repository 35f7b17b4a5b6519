"""Row records of the tables in warehouse/tables/core.py. Generated from the declarations in warehouse/tables/ by
`python -m holistic_dagster.cli.reference`: do not edit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, kw_only=True)
class SchemaInfoRow:
    """A row of `schema_info`: The warehouse's own settings: its schema version (schema_version), which readers
    check."""

    key: str
    value: str | None


@dataclass(frozen=True, kw_only=True)
class SourceFilesRow:
    """A row of `source_files`: Upstream files (or generators) that instances were read from, with their checksum."""

    version: str
    scenario: str
    uri: str
    sha256: str
    revision: str
    num_bytes: int | None


@dataclass(frozen=True, kw_only=True)
class InstancesRow:
    """A row of `instances`: The suite version's sample: evaluated (split = 'test') and few-shot pool (split = 'train')
    instances."""

    version: str
    scenario: str
    instance_id: str
    split: str
    subset: str
    input: str
    references: str
    num_correct_references: int
    is_multiple_choice: bool
    source_uri: str
    record: str
    perturbation: str | None
    original_instance_id: str | None
    metadata: str | None


@dataclass(frozen=True, kw_only=True)
class ApplicabilityRow:
    """A row of `applicability`: Which metric families apply to each scenario of a suite version (the others are "not
    applicable")."""

    version: str
    scenario: str
    family: str
    applies: bool
    detail: str


@dataclass(frozen=True, kw_only=True)
class PromptsRow:
    """A row of `prompts`: Rendered requests. request_id hashes the prompt, continuation and decoding parameters."""

    model: str
    version: str
    scenario: str
    instance_id: str
    request_id: str
    kind: str
    adapter_method: str
    template: str
    prompt: str
    continuation: str
    choice_index: int | None
    is_null_context: bool
    max_tokens: int
    temperature: float
    stop: str
    num_train_instances: int
    truncated: bool
    num_prompt_tokens: int


@dataclass(frozen=True, kw_only=True)
class ProvenanceRow:
    """A row of `provenance`: How results were produced: backend, model revision, batch size, decoding, hardware,
    libraries, run."""

    provenance_id: str
    model: str
    backend: str
    model_path: str | None
    model_revision: str
    batch_size: int | None
    max_context: int | None
    decoding: str
    hardware: str | None
    library_versions: str
    dagster_run_id: str | None
    created_at: datetime


@dataclass(frozen=True, kw_only=True)
class CompletionsRow:
    """A row of `completions`: Raw model output: one row per distinct request."""

    model: str
    version: str
    scenario: str
    request_id: str
    text: str
    tokens: str
    logprobs: str
    logprob: float
    num_prompt_tokens: int
    num_completion_tokens: int
    latency_s: float
    finish_reason: str
    error: str
    provenance_id: str
    top_logprobs: str | None


@dataclass(frozen=True, kw_only=True)
class CompletionCacheRow:
    """A row of `completion_cache`: Completions cached by model identity (backend, path, revision) and request id,
    written as each batch finishes: a deterministic request is never sent twice, and a run killed part-way resumes where
    it stopped. Failed requests are not cached. sample_index tells apart samples of one sampled (temperature > 0)
    request."""

    model_key: str
    request_id: str
    sample_index: int
    text: str
    tokens: str
    logprobs: str
    logprob: float
    num_prompt_tokens: int
    num_completion_tokens: int
    latency_s: float
    finish_reason: str
    provenance_id: str
    created_at: datetime
    top_logprobs: str | None


@dataclass(frozen=True, kw_only=True)
class InstanceScoresRow:
    """A row of `instance_scores`: One row per model x version x scenario x instance x family x metric. Robustness and
    fairness rows: on a perturbed instance, its value (perturbation = the perturbation's name); on an original, the
    worst value over it and its perturbations of that family (perturbation = 'worst')."""

    model: str
    version: str
    scenario: str
    instance_id: str
    metric: str
    family: str
    value: float
    request_id: str
    prediction: str
    provenance_id: str
    perturbation: str
    scorer: str


@dataclass(frozen=True, kw_only=True)
class ScenarioMetricsRow:
    """A row of `scenario_metrics`: Scenario-level values (means, calibration, throughput, bias, toxicity) with the
    number of instances behind them. value is NULL only when the metric is undefined on these outputs; `note` then says
    why."""

    model: str
    version: str
    scenario: str
    metric: str
    family: str
    value: float | None
    count: int
    provenance_id: str
    perturbation: str
    scorer: str
    note: str
    estimated: bool | None
    n_full: int | None
