"""Shadow evaluation on production traffic: the logged calls, the candidates' answers and verdicts."""

from __future__ import annotations

from holistic_dagster.warehouse.tables.base import Column, Table

TRAFFIC = Table(
    "traffic",
    "Shadow evaluation on production traffic (resources/shadow.yaml). One partition per traffic log file (log). "
    "traffic: each logged request with production's answer, PII removed before it was stored.",
    key=("log", "record_id"),
    columns=(
        Column("log", "VARCHAR"),
        Column("record_id", "VARCHAR"),
        Column("line", "INTEGER"),
        Column("slice", "VARCHAR"),
        Column("messages", "JSON"),
        Column("prompt", "VARCHAR"),
        Column("production", "VARCHAR"),
        Column("production_text", "VARCHAR"),
        Column("production_tokens", "INTEGER"),
        Column("production_latency_s", "DOUBLE", null=True),
        Column("logged_at", "VARCHAR"),
        Column("source_uri", "VARCHAR"),
        Column("source_sha256", "VARCHAR"),
    ),
)

TRAFFIC_QUARANTINE = Table(
    "traffic_quarantine",
    "a malformed record of a traffic log, kept out of the evaluation: its line and what is wrong, none of its text",
    key=("log", "line"),
    columns=(
        Column("log", "VARCHAR"),
        Column("line", "INTEGER"),
        Column("reason", "VARCHAR"),
    ),
)

SHADOW_COMPLETIONS = Table(
    "shadow_completions",
    "a candidate model's answer to the same prompt (request_id keys the completion cache)",
    key=("log", "record_id", "model"),
    columns=(
        Column("log", "VARCHAR"),
        Column("record_id", "VARCHAR"),
        Column("model", "VARCHAR"),
        Column("request_id", "VARCHAR"),
        Column("prompt", "VARCHAR"),
        Column("text", "VARCHAR"),
        Column("num_completion_tokens", "INTEGER"),
        Column("latency_s", "DOUBLE"),
        Column("error", "VARCHAR"),
        Column("provenance_id", "VARCHAR"),
    ),
)

SHADOW_VERDICTS = Table(
    "shadow_verdicts",
    "the judge's comparison of a candidate's answer with production's, in both position orders (winner: candidate | "
    "production | tie, or '' when a judgement gave no verdict: then error says why)",
    key=("log", "record_id", "candidate", "judge"),
    columns=(
        Column("log", "VARCHAR"),
        Column("record_id", "VARCHAR"),
        Column("candidate", "VARCHAR"),
        Column("judge", "VARCHAR"),
        Column("slice", "VARCHAR"),
        Column("candidate_first", "BOOLEAN"),
        Column("verdict_first", "VARCHAR"),
        Column("verdict_second", "VARCHAR"),
        Column("winner", "VARCHAR"),
        Column("consistent", "BOOLEAN"),
        Column("error", "VARCHAR"),
        Column("judge_request_first", "VARCHAR"),
        Column("judge_request_second", "VARCHAR"),
        Column("reason_first", "VARCHAR"),
        Column("reason_second", "VARCHAR"),
        Column("provenance_id", "VARCHAR"),
    ),
)

SHADOW_WIN_RATES = Table(
    "shadow_win_rates",
    "the candidate's win rate against production (ties half) per traffic slice ('' = all traffic), with a 95% "
    "bootstrap CI over records",
    key=("log", "candidate", "judge", "slice"),
    columns=(
        Column("log", "VARCHAR"),
        Column("candidate", "VARCHAR"),
        Column("judge", "VARCHAR"),
        Column("slice", "VARCHAR"),
        Column("n", "INTEGER"),
        Column("wins", "INTEGER"),
        Column("ties", "INTEGER"),
        Column("losses", "INTEGER"),
        Column("win_rate", "DOUBLE"),
        Column("ci_low", "DOUBLE"),
        Column("ci_high", "DOUBLE"),
    ),
)
