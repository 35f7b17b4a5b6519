"""Efficiency (HELM's efficiency family, as observed from the client): per evaluated instance the wall time of
its requests and their token counts; for the scenario, throughput over the originals' requests."""

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
declare("requests_per_second", "efficiency", "requests answered per second", bounds=UNBOUNDED, ci="none", no_ci=RATE)
declare("tokens_per_second", "efficiency", "prompt and generated tokens per second", bounds=UNBOUNDED, ci="none",
        no_ci=RATE)  # fmt: skip


@scorer(
    "efficiency",
    "efficiency",
    ("runtime_s", "num_prompt_tokens", "num_output_tokens", "requests_per_second", "tokens_per_second"),
)
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
    return rows, out
