"""Efficiency (HELM's efficiency family, as observed from the client): per evaluated instance the wall time of
its requests, their token counts and, for a priced model, their cost; for the scenario, throughput over the
originals' requests and the cost of every request (perturbed copies included)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from holistic_dagster.metrics.registry import declare, scorer
from holistic_dagster.records import InstanceScore, ScenarioMetric

if TYPE_CHECKING:
    from holistic_dagster.metrics.scoring import ScoringInput

UNBOUNDED = (0.0, math.inf)
RATE = "no bootstrap: a rate over the whole run"

declare("runtime_s", "efficiency", "seconds spent on the instance's requests", lower_is_better=True,
        bounds=UNBOUNDED, headline=True, per_instance=True, mean_of_instances=True)  # fmt: skip
declare("num_prompt_tokens", "efficiency", "prompt tokens of the instance's requests", lower_is_better=True,
        bounds=UNBOUNDED, per_instance=True, mean_of_instances=True)  # fmt: skip
declare("num_output_tokens", "efficiency", "generated tokens of the instance's requests", lower_is_better=True,
        bounds=UNBOUNDED, per_instance=True, mean_of_instances=True)  # fmt: skip
declare("cost_usd", "efficiency", "US dollars the instance's requests cost at the model's price", lower_is_better=True,
        bounds=UNBOUNDED, per_instance=True, mean_of_instances=True, priced_only=True)  # fmt: skip
declare("total_cost_usd", "efficiency", "US dollars every request of the scenario cost at the model's price",
        lower_is_better=True, bounds=UNBOUNDED, ci="none", no_ci="no bootstrap: a total over the run")  # fmt: skip
declare("requests_per_second", "efficiency", "requests answered per second", bounds=UNBOUNDED, ci="none", no_ci=RATE)
declare("tokens_per_second", "efficiency", "prompt and generated tokens per second", bounds=UNBOUNDED, ci="none",
        no_ci=RATE)  # fmt: skip


@scorer(
    "efficiency",
    "efficiency",
    ("runtime_s", "num_prompt_tokens", "num_output_tokens", "cost_usd", "requests_per_second", "tokens_per_second",
     "total_cost_usd"),
)  # fmt: skip
def efficiency(given: ScoringInput) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    rows: list[InstanceScore] = []
    runtime = prompt_tokens = output_tokens = 0.0
    num_requests = 0
    for p in given.predictions:
        done = [given.completions[r.request_id] for r in p.requests]
        per_instance = {
            "runtime_s": sum(c.latency_s for c in done),
            "num_prompt_tokens": float(sum(c.num_prompt_tokens for c in done)),
            "num_output_tokens": float(sum(c.num_completion_tokens for c in done)),
        }
        if given.price is not None:  # a local model reports its compute time instead
            per_instance["cost_usd"] = given.price.cost(
                per_instance["num_prompt_tokens"], per_instance["num_output_tokens"]
            )
        runtime += per_instance["runtime_s"]
        prompt_tokens += per_instance["num_prompt_tokens"]
        output_tokens += per_instance["num_output_tokens"]
        num_requests += len(p.requests)
        for name, value in per_instance.items():
            rows.append(InstanceScore(p.instance.instance_id, name, "efficiency", value, p.carrier.request_id, p.text))
    out = []
    if runtime > 0:
        out.append(ScenarioMetric("requests_per_second", "efficiency", num_requests / runtime, num_requests))
        out.append(ScenarioMetric("tokens_per_second", "efficiency", (prompt_tokens + output_tokens) / runtime,
                                  num_requests))  # fmt: skip
    if given.price is not None:
        every = given.completions.values()
        spent = given.price.cost(sum(c.num_prompt_tokens for c in every), sum(c.num_completion_tokens for c in every))
        out.append(ScenarioMetric("total_cost_usd", "efficiency", spent, len(given.completions)))
    return rows, out
