"""Row records of the tables in warehouse/tables/judging.py. Generated from the declarations in warehouse/tables/ by
`python -m holistic_dagster.cli.reference`: do not edit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, kw_only=True)
class JudgeQualificationsRow:
    """A row of `judge_qualifications`: A judge model's qualification (judging/qualification.py): battles with a known
    answer judged in both orders with the template and max_tokens it is used with; per qualification set and over all of
    them (source 'all', which decides). judge_identity: the weights that answered (the completion cache's key). A judge
    that is not qualified gives no ratings or win rates; its verdicts are kept."""

    judge: str
    template: str
    max_tokens: int
    source: str
    judge_identity: str
    battles: int
    judgements: int
    agreeing: int
    agreement: float
    agreement_ci_low: float
    agreement_ci_high: float
    consistent: int
    position_consistency: float
    no_verdict: int
    min_agreement: float
    min_consistency: float
    qualified: bool
    reason: str
    provenance_id: str
    measured_at: datetime


@dataclass(frozen=True, kw_only=True)
class QualificationVerdictsRow:
    """A row of `qualification_verdicts`: each qualification battle: what the judge was shown (answer_better is the
    known-better one) and said"""

    judge: str
    template: str
    max_tokens: int
    battle_id: str
    source: str
    instance_id: str
    question: str
    reference: str
    answer_better: str
    answer_worse: str
    better_first: bool
    verdict_first: str
    verdict_second: str
    consistent: bool
    error: str
    judge_request_first: str
    judge_request_second: str
    reason_first: str
    reason_second: str
    provenance_id: str


@dataclass(frozen=True, kw_only=True)
class SafetyRatingsRow:
    """A row of `safety_ratings`: HELM Safety's judgements (judging/safety.py): each judgement of a safety scenario's
    answer by each judge that qualified (column judge: XSTest's string match, or a judge model) with the judge's request
    and raw output; a failed judgement has no score and says why."""

    model: str
    version: str
    scenario: str
    instance_id: str
    judge: str
    judge_identity: str
    score: float | None
    label: str
    judge_request_id: str
    raw_output: str
    error: str


@dataclass(frozen=True, kw_only=True)
class SafetyAgreementRow:
    """A row of `safety_agreement`: each safety judge against people on human-labelled answers of the scenario's own
    kind (XSTest's labels for xstest), before it judged: agreement per human label (all: every answer) with its 95%
    Wilson interval, and Cohen's kappa over the labels, on each answering model's answers (answers_of) and over all of
    them ('all'); a judge without these rows for the scenario's kind, or below min_kappa on any model's answers of it,
    scores nothing"""

    model: str
    version: str
    scenario: str
    judge: str
    judge_identity: str
    human_label: str
    n: int
    agreeing: int
    agreement: float | None
    kappa: float | None
    scores: bool
    measured_at: datetime
    answers_of: str
    measured_on: str
    agreement_low: float | None
    agreement_high: float | None
