"""Output stability: the same prompts asked again, past the completion cache, and compared with the stored
answers. Greedy requests should come back the same; a server that batches nondeterministically, a quantized
kernel or a changed revision may not. The agreement rate is what the alerts' stability rules compare between a
model and its baseline (holistic_dagster.alerts)."""

from __future__ import annotations

from typing import Any

from holistic_dagster.judging.battles import draw
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse.access import Completions, Prompts
from holistic_dagster.warehouse.records import StabilityRow
from holistic_dagster.warehouse.tables.summaries import STABILITY

SAMPLES = 20  # instances per scenario
REPEATS = 2


def measure_stability(
    stage: StageContext, version: str, model: str, samples: int = SAMPLES, repeats: int = REPEATS, seed: int = 0
) -> dict[str, Any]:
    """Per scenario of the version, the generation requests of a seeded sample of instances (the same instances
    for every model, so models can be paired) asked `repeats` more times through the model's backend, never the
    cache; each answer is compared with the stored completion. Replaces the model's rows of `stability`."""
    rows: list[StabilityRow] = []
    texts = Completions(stage.warehouse).answered_texts(version, model)
    client = stage.client(model)
    for scenario in stage.catalog.suite(version).scenarios:
        if not any(s == scenario for s, _ in texts):  # not evaluated on this scenario
            continue
        requests = [
            r
            for r in Prompts(stage.warehouse).requests(version, scenario, model)
            if r.kind == "generate" and (scenario, r.request_id) in texts
        ]
        chosen = sorted({r.instance_id for r in requests}, key=lambda i: draw(seed, scenario, i))[:samples]
        asked = list({r.request_id: r for r in requests if r.instance_id in set(chosen)}.values())
        for repeat in range(repeats):
            for request, completion in zip(asked, client.generate(asked)):
                rows.append(
                    StabilityRow(
                        version=version, model=model, scenario=scenario, instance_id=request.instance_id,
                        request_id=request.request_id, repeat=repeat, text=completion.text,
                        agrees=completion.text == texts[(scenario, request.request_id)], error=completion.error,
                        temperature=request.temperature,
                    )
                )  # fmt: skip
    frame = STABILITY.frame(rows)
    stage.warehouse.replace({"version": version, "model": model}, {"stability": frame})
    answered = frame[frame["error"] == ""] if len(frame) else frame
    return {
        "num_requests_asked": len(frame),
        "agreement": round(float(answered["agrees"].mean()), 4) if len(answered) else None,
        "per_scenario": {s: round(float(g["agrees"].mean()), 4) for s, g in answered.groupby("scenario")}
        if len(answered)
        else {},
    }
