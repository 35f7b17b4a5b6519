"""Row records of the tables in warehouse/tables/shadow.py. Generated from the declarations in warehouse/tables/ by
`python -m holistic_dagster.cli.reference`: do not edit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class TrafficRow:
    """A row of `traffic`: Shadow evaluation on production traffic (resources/shadow.yaml). One partition per traffic
    log file (log). traffic: each logged request with production's answer, PII removed before it was stored."""

    log: str
    record_id: str
    line: int
    slice: str
    messages: str
    prompt: str
    production: str
    production_text: str
    production_tokens: int
    production_latency_s: float | None
    logged_at: str
    source_uri: str
    source_sha256: str


@dataclass(frozen=True, kw_only=True)
class TrafficQuarantineRow:
    """A row of `traffic_quarantine`: a malformed record of a traffic log, kept out of the evaluation: its line and what
    is wrong, none of its text"""

    log: str
    line: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class ShadowCompletionsRow:
    """A row of `shadow_completions`: a candidate model's answer to the same prompt (request_id keys the completion
    cache)"""

    log: str
    record_id: str
    model: str
    request_id: str
    prompt: str
    text: str
    num_completion_tokens: int
    latency_s: float
    error: str
    provenance_id: str


@dataclass(frozen=True, kw_only=True)
class ShadowVerdictsRow:
    """A row of `shadow_verdicts`: the judge's comparison of a candidate's answer with production's, in both position
    orders (winner: candidate | production | tie, or '' when a judgement gave no verdict: then error says why)"""

    log: str
    record_id: str
    candidate: str
    judge: str
    slice: str
    candidate_first: bool
    verdict_first: str
    verdict_second: str
    winner: str
    consistent: bool
    error: str
    judge_request_first: str
    judge_request_second: str
    reason_first: str
    reason_second: str
    provenance_id: str


@dataclass(frozen=True, kw_only=True)
class ShadowWinRatesRow:
    """A row of `shadow_win_rates`: the candidate's win rate against production (ties half) per traffic slice ('' = all
    traffic), with a 95% bootstrap CI over records"""

    log: str
    candidate: str
    judge: str
    slice: str
    n: int
    wins: int
    ties: int
    losses: int
    win_rate: float
    ci_low: float
    ci_high: float
