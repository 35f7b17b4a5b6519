"""Row records of the tables in warehouse/tables/arena.py. Generated from the declarations in warehouse/tables/ by
`python -m holistic_dagster.cli.reference`: do not edit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, kw_only=True)
class BattlesRow:
    """A row of `battles`: Arena: pairwise battles between two models' stored answers to one instance, judged in both
    position orders. judge: a registered model's name (LLM as judge), or 'human' (votes cast on `holistic vote`'s page).
    winner: a | b | tie, or '' when a judgement gave no verdict (error says why: such a row is never a vote). request_a
    / request_b: the judged completions (lineage to prompts and instances); judge_request_*: the judge's own requests,
    keys of the completion cache."""

    version: str
    judge: str
    battle_id: str
    scenario: str
    instance_id: str
    model_a: str
    model_b: str
    request_a: str
    request_b: str
    tokens_a: int
    tokens_b: int
    a_first: bool
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
class VotesRow:
    """A row of `votes`: People's votes on `holistic vote`'s page: a battle of the suite's schedule, shown with its two
    answers in an order drawn per voter (shown_first: the model whose answer was "Answer 1"); model names shown only
    after the vote. The ratings count them as the judge 'human'."""

    version: str
    battle_id: str
    voter: str
    scenario: str
    instance_id: str
    model_a: str
    model_b: str
    request_a: str
    request_b: str
    tokens_a: int
    tokens_b: int
    shown_first: str
    winner: str
    voted_at: datetime


@dataclass(frozen=True, kw_only=True)
class ArenaRatingsRow:
    """A row of `arena_ratings`: Ratings per judge: Bradley-Terry (maximum likelihood, ties half) on the Elo scale with
    the suite's baseline at 1000 and a bootstrap 95% CI over prompts; the same with style control (answer length);
    online Elo."""

    version: str
    judge: str
    method: str
    model: str
    rating: float
    ci_low: float | None
    ci_high: float | None
    num_battles: int
    wins: float
    mean_answer_tokens: float
    baseline: str
    bootstrap_seed: int
    bootstrap_samples: int
    note: str


@dataclass(frozen=True, kw_only=True)
class ArenaJudgesRow:
    """A row of `arena_judges`: The suite's judge models as its ratings used them: each one's qualification
    (judge_qualifications, over all sets, for the arena's template and max_tokens); an unqualified judge has battles but
    no ratings."""

    version: str
    judge: str
    qualified: bool
    agreement: float | None
    position_consistency: float | None
    reason: str


@dataclass(frozen=True, kw_only=True)
class ArenaWinRatesRow:
    """A row of `arena_win_rates`: Row model's share of wins against the column model (ties half) over their battles."""

    version: str
    judge: str
    model: str
    opponent: str
    win_rate: float
    num_battles: int
