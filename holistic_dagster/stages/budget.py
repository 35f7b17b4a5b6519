"""The budget guard: what evaluating a priced model would cost, estimated from its built prompts before any request
is sent (each distinct request's prompt tokens at the input price and its max_tokens at the output price, an upper
bound on what it can generate), requests the completion cache already answered for these weights excluded; a run
past the suite's or the command's max_cost is refused, saying the estimate and what drives it.

An estimate counts tokens with the entry's `tokenizer:` where it has one, else ~4 characters a token, which a
server's own tokenizer can exceed. So spending is also metered as the answers arrive (`Spend`: the usage each
response reports, at the entry's price, with what the model's earlier steps of the same run spent): when the
budget is reached no more requests are sent (those in flight finish: the overshoot is bounded by them), and the
step fails as stopped for budget (BudgetReached), saying what was spent and what was left undone. The answers it
got are in the completion cache: a run with a larger budget does not pay for them again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from holistic_dagster.clients.identity import answering_identity
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Completion, Price
from holistic_dagster.stages.context import StageContext


class BudgetExceeded(HolisticError):
    """Refused before any request: the estimate is past the budget."""


class BudgetReached(HolisticError):
    """Stopped while sending: what the answers cost reached the budget. summary: one line for a run's tag."""

    def __init__(self, message: str, summary: str):
        super().__init__(message)
        self.summary = summary


@dataclass
class Spend:
    """What one model's answers cost in this run, metered as they arrive: each response's reported usage (prompt
    and completion tokens; a failed request reports none) at the entry's price."""

    price: Price
    budget: float
    source: str  # where the budget was set
    earlier: float = 0.0  # spent by this model's earlier steps of the same run
    spent: float = 0.0  # in this step
    answered: int = 0

    def add(self, finished: Sequence[Completion]) -> bool:
        """Counts finished answers; True once the budget is reached (send no more)."""
        self.spent += sum(self.price.cost(c.num_prompt_tokens, c.num_completion_tokens) for c in finished)
        self.answered += len(finished)
        return self.reached

    @property
    def reached(self) -> bool:
        return self.earlier + self.spent >= self.budget

    def stopped(self, label: str, not_sent: int) -> BudgetReached:
        total = self.earlier + self.spent
        return BudgetReached(
            f"stopped for budget: {label} reached the budget of ${self.budget:g} ({self.source}): ${total:.4f} spent "
            f"in this run (${self.spent:.4f} on this step's {self.answered} answer(s), by the usage the server "
            f"reported; ${self.earlier:.4f} before), {not_sent} request(s) not sent. The answers got are in the "
            "completion cache: run again with a larger budget to finish without paying for them again",
            f"spent ${total:.4f} of ${self.budget:g} ({self.source}); {label}: {not_sent} request(s) not sent",
        )


def spent_in_run(stage: StageContext, model: str) -> float:
    """What the model's answers cost in this Dagster run so far (its earlier steps' stored completions)."""
    if not stage.run_id or not stage.warehouse.path.exists():
        return 0.0
    spent = stage.warehouse.df(
        "SELECT coalesce(sum(cost_usd), 0) AS usd FROM request_costs WHERE dagster_run_id = ? AND model = ?",
        [stage.run_id, model],
    )["usd"].iat[0]
    return float(spent)


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
    model_key = answering_identity(stage.client(model).describe())
    frame = stage.warehouse.df(
        "WITH distinct_requests AS (SELECT scenario, request_id, any_value(num_prompt_tokens) AS prompt_tokens, "
        "any_value(max_tokens) AS max_tokens FROM prompts WHERE model = ? AND version = ? "
        "AND scenario IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL) "
        "SELECT d.scenario, count(*) FILTER (WHERE c.request_id IS NULL) AS num_requests, "
        "count(c.request_id) AS num_cached, "
        "coalesce(sum(d.prompt_tokens) FILTER (WHERE c.request_id IS NULL), 0) AS prompt_tokens, "
        "coalesce(sum(d.max_tokens) FILTER (WHERE c.request_id IS NULL), 0) AS max_output_tokens "
        "FROM distinct_requests d LEFT JOIN (SELECT DISTINCT request_id FROM completion_cache WHERE model_key = ?) c "
        "USING (request_id) GROUP BY d.scenario ORDER BY d.scenario",
        [model, version, scenarios, model_key],
    )
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
        f"refused before any request: evaluating {estimate.model!r} on suite {estimate.version!r} would cost up to "
        f"${estimate.cost:.4f}, past the budget of ${max_cost:g} ({source}): {estimate.explain()}"
    )
