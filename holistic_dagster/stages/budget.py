"""The budget guard: what evaluating a priced model would cost, estimated from its built prompts before any request
is sent (each distinct request's prompt tokens at the input price and its max_tokens at the output price, an upper
bound on what it can generate), requests the completion cache already answered for these weights excluded; a run
past the suite's or the command's max_cost is refused, saying the estimate and what drives it."""

from __future__ import annotations

from dataclasses import dataclass

from holistic_dagster.clients.identity import answering_identity
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Price
from holistic_dagster.stages.context import StageContext


class BudgetExceeded(HolisticError):
    pass


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
