"""Shadow evaluation on production traffic: the logged calls, the candidates' answers and verdicts."""

from __future__ import annotations

from holistic_dagster.warehouse.tables.base import Column, Table, glossed
from holistic_dagster.warehouse.tables.judging import JUDGED_IN_BOTH_ORDERS

TRAFFIC = Table(
    "traffic",
    "Shadow evaluation on production traffic (resources/shadow.yaml). One partition per traffic log file (log). "
    "traffic: each logged request with production's answer, PII removed before it was stored.",
    key=("log", "record_id"),
    columns=(
        *glossed("VARCHAR", "log", "record_id"),
        Column("line", "INTEGER"),
        Column("slice", "VARCHAR"),
        Column("messages", "JSON"),
        *glossed("VARCHAR", "prompt", "production", "production_text"),
        Column("production_tokens", "INTEGER"),
        Column("production_latency_s", "DOUBLE", null=True),
        *glossed("VARCHAR", "logged_at", "source_uri"),
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
        *glossed("VARCHAR", "log", "record_id", "model", "request_id", "prompt", "text"),
        Column("num_completion_tokens", "INTEGER"),
        Column("latency_s", "DOUBLE"),
        *glossed("VARCHAR", "error", "provenance_id"),
    ),
)

SHADOW_VERDICTS = Table(
    "shadow_verdicts",
    "the judge's comparison of a candidate's answer with production's, in both position orders (winner: candidate | "
    "production | tie, or '' when a judgement gave no verdict: then error says why)",
    key=("log", "record_id", "candidate", "judge"),
    columns=(
        *glossed("VARCHAR", "log", "record_id", "candidate", "judge", "slice"),
        Column("candidate_first", "BOOLEAN"),
        *glossed("VARCHAR", "verdict_first", "verdict_second", "winner"),
        *JUDGED_IN_BOTH_ORDERS,
    ),
)

SHADOW_WIN_RATES = Table(
    "shadow_win_rates",
    "the candidate's win rate against production (ties half) per traffic slice ('' = all traffic), with a 95% "
    "bootstrap CI over records",
    key=("log", "candidate", "judge", "slice"),
    columns=(
        *glossed("VARCHAR", "log", "candidate", "judge", "slice"),
        *glossed("INTEGER", "n", "wins", "ties", "losses"),
        *glossed("DOUBLE", "win_rate", "ci_low", "ci_high"),
    ),
)
