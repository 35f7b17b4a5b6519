"""The core tables: datasets, prompts, completions and their cache, scores, and how each was produced."""

from __future__ import annotations

from holistic_dagster.warehouse.tables.base import Column, Table, glossed

SCHEMA_INFO = Table(
    "schema_info",
    "The warehouse's own settings: its schema version (schema_version), which readers check.",
    key=("key",),
    columns=(
        Column("key", "VARCHAR"),
        Column("value", "VARCHAR", "the setting's value (the schema version: a number as text)", null=True),
    ),
)

SOURCE_FILES = Table(
    "source_files",
    "Upstream files (or generators) that instances were read from, with their checksum.",
    key=("version", "scenario", "uri"),
    columns=(
        *glossed("VARCHAR", "version", "scenario"),
        Column("uri", "VARCHAR", "local path, or generator://name?params"),
        Column("sha256", "VARCHAR"),
        Column("revision", "VARCHAR"),
        Column("num_bytes", "BIGINT", null=True),
    ),
)

INSTANCES = Table(
    "instances",
    "The suite version's sample: evaluated (split = 'test') and few-shot pool (split = 'train') instances.",
    key=("version", "scenario", "instance_id"),
    columns=(
        *glossed("VARCHAR", "version", "scenario", "instance_id", "split", "subset", "input"),
        Column("references", "JSON", '[{"output": str, "correct": bool}, ...]'),
        Column("num_correct_references", "INTEGER"),
        Column("is_multiple_choice", "BOOLEAN"),
        Column("source_uri", "VARCHAR", "file and record (line/row) it came from"),
        Column("record", "VARCHAR", "file and record (line/row) it came from"),
        Column("perturbation", "VARCHAR", default="''", added=True),
        Column("original_instance_id", "VARCHAR", default="''", added=True),
        Column("metadata", "JSON", default="'{}'", added=True),
    ),
)

APPLICABILITY = Table(
    "applicability",
    'Which metric families apply to each scenario of a suite version (the others are "not applicable").',
    key=("version", "scenario", "family"),
    columns=(
        *glossed("VARCHAR", "version", "scenario", "family"),
        Column("applies", "BOOLEAN", "e.g. the perturbations, or why it does not apply"),
        Column("detail", "VARCHAR", "e.g. the perturbations, or why it does not apply"),
    ),
)

PROMPTS = Table(
    "prompts",
    "Rendered requests. request_id hashes the prompt, continuation and decoding parameters.",
    key=("model", "version", "scenario", "instance_id", "request_id"),
    columns=(
        *glossed(
            "VARCHAR",
            "model",
            "version",
            "scenario",
            "instance_id",
            "request_id",
            "kind",
            "adapter_method",
            "template",
            "prompt",
            "continuation",
        ),
        Column("choice_index", "INTEGER", null=True),
        Column("is_null_context", "BOOLEAN"),
        Column("max_tokens", "INTEGER"),
        Column("temperature", "DOUBLE"),
        Column("stop", "JSON"),
        Column("num_train_instances", "INTEGER"),
        Column("truncated", "BOOLEAN"),
        Column("num_prompt_tokens", "INTEGER"),
    ),
)

PROVENANCE = Table(
    "provenance",
    "How results were produced: backend, model revision, batch size, decoding, hardware, libraries, run.",
    key=("provenance_id",),
    columns=(
        *glossed("VARCHAR", "provenance_id", "model", "backend"),
        Column("model_path", "VARCHAR", null=True),
        Column("model_revision", "VARCHAR"),
        Column("batch_size", "INTEGER", null=True),
        Column("max_context", "INTEGER", null=True),
        Column("decoding", "JSON"),
        Column("hardware", "VARCHAR", null=True),
        Column("library_versions", "JSON"),
        Column("dagster_run_id", "VARCHAR", null=True),
        Column("created_at", "TIMESTAMP"),
    ),
)

COMPLETIONS = Table(
    "completions",
    "Raw model output: one row per distinct request.",
    key=("model", "version", "scenario", "request_id"),
    columns=(
        *glossed("VARCHAR", "model", "version", "scenario", "request_id", "text"),
        *glossed("JSON", "tokens", "logprobs"),
        Column("logprob", "DOUBLE"),
        *glossed("INTEGER", "num_prompt_tokens", "num_completion_tokens"),
        Column("latency_s", "DOUBLE"),
        *glossed("VARCHAR", "finish_reason", "error", "provenance_id"),
        Column("top_logprobs", "JSON", default="'[]'", added=True),
    ),
)

COMPLETION_CACHE = Table(
    "completion_cache",
    "Completions cached by model identity (backend, path, revision) and request id, written as each batch finishes: "
    "a deterministic request is never sent twice, and a run killed part-way resumes where it stopped. Failed "
    "requests are not cached. sample_index tells apart samples of one sampled (temperature > 0) request.",
    key=("model_key", "request_id", "sample_index"),
    columns=(
        *glossed("VARCHAR", "model_key", "request_id"),
        Column("sample_index", "INTEGER"),
        Column("text", "VARCHAR"),
        *glossed("JSON", "tokens", "logprobs"),
        Column("logprob", "DOUBLE"),
        *glossed("INTEGER", "num_prompt_tokens", "num_completion_tokens"),
        Column("latency_s", "DOUBLE"),
        *glossed("VARCHAR", "finish_reason", "provenance_id"),
        Column("created_at", "TIMESTAMP"),
        Column("top_logprobs", "JSON", default="'[]'", added=True),
    ),
)

INSTANCE_SCORES = Table(
    "instance_scores",
    "One row per model x version x scenario x instance x family x metric. Robustness and fairness rows: on a "
    "perturbed instance, its value (perturbation = the perturbation's name); on an original, the worst value over "
    "it and its perturbations of that family (perturbation = 'worst').",
    key=("model", "version", "scenario", "instance_id", "family", "metric"),
    columns=(
        *glossed("VARCHAR", "model", "version", "scenario", "instance_id", "metric", "family"),
        Column("value", "DOUBLE", "the instance's value of the metric (never NULL: an undefined one has no row)"),
        Column("request_id", "VARCHAR", "the request whose completion carries the prediction"),
        *glossed("VARCHAR", "prediction", "provenance_id"),
        Column("perturbation", "VARCHAR", default="''"),
        Column("scorer", "VARCHAR", "what produced the value beyond a formula (a toxicity classifier)", default="''"),
    ),
)

SCENARIO_METRICS = Table(
    "scenario_metrics",
    "Scenario-level values (means, calibration, throughput, bias, toxicity) with the number of instances behind "
    "them. value is NULL only when the metric is undefined on these outputs; `note` then says why.",
    key=("model", "version", "scenario", "family", "metric", "perturbation"),
    columns=(
        *glossed("VARCHAR", "model", "version", "scenario", "metric", "family"),
        Column("value", "DOUBLE", null=True),
        Column("count", "INTEGER"),
        Column("provenance_id", "VARCHAR"),
        Column("perturbation", "VARCHAR", "robustness/fairness: 'worst' or one perturbation's name", default="''"),
        Column("scorer", "VARCHAR", default="''"),
        Column("note", "VARCHAR", default="''"),
        Column(
            "estimated",
            "BOOLEAN",
            "the value is estimated from the anchors the model answered, not measured (efficient evaluation); "
            "count is the instances answered",
            default="false",
            added=True,
        ),
        Column(
            "n_full",
            "INTEGER",
            "estimated: the original test instances of the full draw (NULL: measured on all of them)",
            added=True,
        ),
    ),
)
