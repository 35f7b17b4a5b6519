"""The budget guard. A budget (the suite's max_cost, or the command's) is the evaluation's: one model on one suite
version, counted across runs. What it has been billed so far is its answers in the completion cache, each at the
price recorded with it (`spent_on`); a re-run spends only what is left, and says so.

Before any request: what evaluating a priced model would cost is estimated from its built prompts (each distinct
request's prompt tokens at the input price and its max_tokens at the output price, an upper bound on what it can
generate), requests the completion cache already answered excluded; a run whose estimate is past what is left of
the budget is refused, saying the estimate and what drives it.

An estimate counts tokens with the entry's `tokenizer:` where it has one, else ~4 characters a token, which a
server's own tokenizer can exceed. So spending is also metered as the answers arrive (`Spend`): before a request is
sent its estimated cost is reserved against the budget, and no request is sent once what was spent and what is
reserved reach it (so the overshoot is one request's cost, whatever max_concurrency is); each answer settles its
reservation with the usage the server reported. When the budget is reached the step fails as stopped for budget
(BudgetReached), saying what was spent and what was left undone. The answers it got are in the completion cache:
a run with a larger budget does not pay for them again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from holistic_dagster.clients.identity import answering_identity
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Completion, Price, Request
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse.access import CompletionCache, Prompts
from holistic_dagster.warehouse.journal import replay


class BudgetExceeded(HolisticError):
    """Refused before any request: the estimate is past the budget."""


class BudgetReached(HolisticError):
    """Stopped while sending: what the answers cost reached the budget. summary: one line for a run's tag."""

    def __init__(self, message: str, summary: str):
        super().__init__(message)
        self.summary = summary


@dataclass
class Spend:
    """What one model's answers cost, metered as they arrive: each request's estimated cost reserved before it is
    sent (`reserve`), then each response's reported usage (prompt and completion tokens; a failed request reports
    none) at the entry's price in its place (`add`)."""

    price: Price
    budget: float
    source: str  # where the budget was set
    earlier: float = 0.0  # billed to this evaluation before this step (earlier runs, earlier steps)
    spent: float = 0.0  # in this step
    answered: int = 0
    reserved: dict[str, float] = field(default_factory=dict)  # request id -> reserved cost, while in flight
    estimated: dict[str, float] = field(default_factory=dict)  # request id -> its estimate, while in flight
    ratio: float = 1.0  # the largest billed / estimated cost of an answer so far (a server counting more tokens)

    def estimate(self, request: Request) -> float:
        return self.price.cost(request.num_prompt_tokens, request.max_tokens)

    def reserve(self, request: Request) -> bool | None:
        """Whether the request may be sent: True (its cost, the estimate scaled by what answers so far were
        billed against theirs, is reserved until its answer arrives), False (what was spent and what is in
        flight reach the budget: send no more), None (wait for an answer: the first request goes alone, so
        that how the server bills is known before several are in flight)."""
        if self.earlier + self.spent + sum(self.reserved.values()) >= self.budget:
            return False
        if self.answered == 0 and self.reserved:
            return None
        estimate = self.estimate(request)
        self.estimated[request.request_id] = estimate
        self.reserved[request.request_id] = estimate * self.ratio
        return True

    def add(self, finished: Sequence[Completion]) -> bool:
        """Counts finished answers in place of their reservations; True once the budget is reached (send no
        more)."""
        for c in finished:
            billed = self.price.cost(c.num_prompt_tokens, c.num_completion_tokens)
            self.reserved.pop(c.request_id, None)
            estimate = self.estimated.pop(c.request_id, 0.0)
            if estimate > 0:
                self.ratio = max(self.ratio, billed / estimate)
            self.spent += billed
        self.answered += len(finished)
        return self.reached

    @property
    def reached(self) -> bool:
        return self.earlier + self.spent >= self.budget

    def stopped(self, label: str, not_sent: int) -> BudgetReached:
        total = self.earlier + self.spent
        return BudgetReached(
            f"stopped for budget: {label} reached the budget of ${self.budget:g} ({self.source}): ${total:.4f} spent "
            f"on this evaluation (${self.spent:.4f} on this step's {self.answered} answer(s), by the usage the "
            f"server reported; ${self.earlier:.4f} before), {not_sent} request(s) not sent. The answers got are in "
            "the completion cache: run again with a larger budget to finish without paying for them again",
            f"spent ${total:.4f} of ${self.budget:g} ({self.source}); {label}: {not_sent} request(s) not sent",
        )


def _model_key(stage: StageContext, model: str) -> str:
    return answering_identity(stage.client(model).describe())


def _answered(stage: StageContext, model_key: str, request_ids: list[str]) -> pd.DataFrame:
    """request_id, usd: the completion cache's answers of `model_key` (these weights) to the requests, each request
    once, with what its answers cost at the price recorded with them (0 where none was recorded)."""
    replay(stage.warehouse, "completion_cache")  # answers a killed run was billed for but had not committed
    return CompletionCache(stage.warehouse).billed(model_key, request_ids)


def spent_on(stage: StageContext, model: str, version: str) -> float:
    """What the evaluation of `model` on suite `version` has been billed so far, across runs: its requests the
    completion cache holds answers to (for these weights), each at the price recorded with its answer."""
    if stage.model(model).price is None:
        return 0.0
    requests = Prompts(stage.warehouse).request_ids_of_version(version, model)
    answered = _answered(stage, _model_key(stage, model), requests)
    return float(answered["usd"].sum())


def metered(
    stage: StageContext, model: str, requests: Sequence[Request], budget: float | None, source: str, task: str
) -> Spend | None:
    """The meter of a priced model asked `requests` outside a suite (shadow traffic, a judge's verdicts) under
    `budget`, counted across runs: what its answers to these requests were billed before counts as spent, the
    estimate of those still unanswered is checked against what is left (BudgetExceeded), and the answers are
    metered as they arrive. None where there is no budget or no price. task: what the requests are, in words."""
    price = stage.model(model).price
    if budget is None or price is None:
        return None
    ids = list(dict.fromkeys(r.request_id for r in requests))
    answered = _answered(stage, _model_key(stage, model), ids)
    earlier, cached = float(answered["usd"].sum()), set(answered["request_id"])
    todo = list({r.request_id: r for r in requests if r.request_id not in cached}.values())
    prompt, output = sum(r.num_prompt_tokens for r in todo), sum(r.max_tokens for r in todo)
    estimate = CostEstimate(
        model, "", price, (ScenarioEstimate(task, len(todo), len(cached), prompt, output, price.cost(prompt, output)),),
        task=task,
    )  # fmt: skip
    left, where = left_of(budget, earlier, source)
    check_budget(estimate, left, where)
    return Spend(price, budget, source, earlier=earlier)


def left_of(budget: float, spent: float, source: str) -> tuple[float, str]:
    """What is left of a budget once `spent` is counted (never below zero), and where it comes from, in words."""
    if spent <= 0:
        return budget, source
    return max(0.0, budget - spent), f"{source}, less ${spent:.4f} already spent on this evaluation"


@dataclass(frozen=True)
class ScenarioEstimate:
    scenario: str
    num_requests: int  # distinct requests to send
    num_cached: int  # distinct requests the completion cache answers: free
    prompt_tokens: int
    max_output_tokens: int
    cost: float


@dataclass(frozen=True)
class CostEstimate:
    model: str
    version: str
    price: Price
    scenarios: tuple[ScenarioEstimate, ...]
    task: str = ""  # what is asked, outside a suite ("'b' answering traffic log 'day1'"); else the suite's

    @property
    def what(self) -> str:
        return self.task or f"evaluating {self.model!r} on suite {self.version!r}"

    @property
    def cost(self) -> float:
        return sum(s.cost for s in self.scenarios)

    def explain(self) -> str:
        """The estimate and what drives it: tokens at each price, and the scenarios that cost most."""
        prompt = sum(s.prompt_tokens for s in self.scenarios)
        output = sum(s.max_output_tokens for s in self.scenarios)
        sent, cached = sum(s.num_requests for s in self.scenarios), sum(s.num_cached for s in self.scenarios)
        p = self.price
        costly = sorted(self.scenarios, key=lambda s: -s.cost)[:3]
        return (
            f"{sent} request(s) to send ({cached} cached, not counted): {prompt:,} prompt tokens x "
            f"${p.input_per_million:g}/M = ${p.cost(prompt, 0):.4f}, up to {output:,} output tokens (max_tokens) x "
            f"${p.output_per_million:g}/M = ${p.cost(0, output):.4f}; most: "
            + ", ".join(f"{s.scenario} ${s.cost:.4f} ({s.num_requests} requests)" for s in costly)
        )


def estimate_cost(stage: StageContext, version: str, model: str, scenarios: list[str]) -> CostEstimate | None:
    """The estimate over the scenarios' built prompts for the model (None for a model without a price)."""
    spec = stage.model(model)
    if spec.price is None:
        return None
    model_key = _model_key(stage, model)
    replay(stage.warehouse, "completion_cache")
    frame = Prompts(stage.warehouse).still_to_send(version, model, scenarios, model_key)
    rows = tuple(
        ScenarioEstimate(
            r.scenario,
            int(r.num_requests),
            int(r.num_cached),
            int(r.prompt_tokens),
            int(r.max_output_tokens),
            spec.price.cost(int(r.prompt_tokens), int(r.max_output_tokens)),
        )  # fmt: skip
        for r in frame.itertuples(index=False)
    )
    return CostEstimate(model, version, spec.price, rows)


def check_budget(estimate: CostEstimate | None, max_cost: float | None, source: str) -> None:
    """Refuses (BudgetExceeded) an estimate past `max_cost`; `source` says where the budget was set."""
    if estimate is None or max_cost is None or estimate.cost <= max_cost:
        return
    raise BudgetExceeded(
        f"refused before any request: {estimate.what} would cost up to ${estimate.cost:.4f}, past the budget of "
        f"${max_cost:g} ({source}): {estimate.explain()}"
    )
