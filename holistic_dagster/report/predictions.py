"""What the report's predictions pages show: for a scenario, a seeded sample of its evaluated instances (the same
sample for every model), each with its perturbed copies, and per model the exact prompt, the completion, the
per-instance scores, the requests behind the prediction and the top alternative tokens where the backend gave
them. The rows come from results/predictions.py, so the page shows what `lineage` and `holistic trace` show."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from holistic_dagster.metrics import WORST
from holistic_dagster.results.predictions import prediction_rows, scored_originals
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.records import CompletionsRow, InstanceScoresRow, InstancesRow, PromptsRow
from holistic_dagster.warehouse.rows import completion_tokens, references_of

MAX_TOKENS_SHOWN = 16  # generated tokens whose log-probabilities (and alternatives) a prediction lists
MAX_ALTERNATIVES = 5


@dataclass
class Request:
    label: str  # its continuation (separate scoring, windows), or which reference it asks about (ranking)
    logprob: float
    text: str
    predicted: bool  # the request whose completion carries the prediction


@dataclass
class Token:
    token: str
    logprob: float
    alternatives: list[tuple[str, float]]


@dataclass
class ModelPrediction:
    model: str
    prediction: str
    completion: str
    prompt: str
    main_value: float | None  # the scenario's main metric on this instance ("" perturbation or this one's)
    scores: list[tuple[str, str, str, float]]  # family, metric, perturbation, value
    requests: list[Request]  # every request of the instance (several for separate scoring, ranking, windows)
    tokens: list[Token]
    num_tokens: int
    finish_reason: str
    error: str
    latency_s: float


@dataclass
class Prompt:
    text: str
    models: list[str]  # the models that were sent exactly this prompt


@dataclass
class Variant:
    instance_id: str
    perturbation: str  # "" for the original
    input: str
    references: list[tuple[str, bool]]
    prompts: list[Prompt]
    models: dict[str, ModelPrediction] = field(default_factory=dict)


@dataclass
class Item:
    instance_id: str
    variants: list[Variant]  # the original first, then its perturbed copies by perturbation name


def sample_order(instance_id: str, seed: int) -> str:
    """A model-independent order: the same sample for every model, and a stable one as instances are added."""
    return hashlib.sha256(f"{seed}/{instance_id}".encode()).hexdigest()


def samples(warehouse: ResultStore, version: str, limit: int, seed: int = 0) -> dict[str, list[str]]:
    """Per scenario, up to `limit` of its original evaluated instances that some model was scored on (a seeded
    sample, the same for every model); and the number of evaluated originals per scenario."""
    ids = scored_originals(warehouse, version)
    return {
        scenario: sorted(part["instance_id"], key=lambda i: sample_order(i, seed))[:limit]
        for scenario, part in ids.groupby("scenario")
    }


def load_items(
    warehouse: ResultStore, version: str, sample: dict[str, list[str]], main_metric: dict[str, str]
) -> dict[str, list[Item]]:
    """Per scenario, the sampled instances with their perturbed copies, and what every model did on each (three
    queries for the whole version)."""
    rows = prediction_rows(warehouse, version, sample)
    requests_of: dict[tuple, list[tuple[PromptsRow, CompletionsRow]]] = {}
    for prompt, completion in rows.requests:
        requests_of.setdefault((prompt.scenario, prompt.model, prompt.instance_id), []).append((prompt, completion))
    scores_of: dict[tuple, list[InstanceScoresRow]] = {}
    for score in rows.scores:
        scores_of.setdefault((score.scenario, score.model, score.instance_id), []).append(score)
    models = sorted({r.model for r in rows.scores})
    by_original: dict[tuple[str, str], list[InstancesRow]] = {}
    for r in rows.instances:
        by_original.setdefault((r.scenario, r.original_instance_id or r.instance_id), []).append(r)

    def variant(row: InstancesRow) -> Variant:
        key = (row.scenario, row.instance_id)
        found = Variant(
            row.instance_id,
            row.perturbation or "",
            row.input,
            [(r["output"], bool(r["correct"])) for r in references_of(row.references)],
            [],
        )
        for model in models:
            mine = scores_of.get((key[0], model, key[1]))
            if mine:
                found.models[model] = _prediction(
                    model, mine, requests_of.get((key[0], model, key[1]), []), main_metric.get(key[0], "")
                )
        prompts: dict[str, list[str]] = {}
        for model, p in found.models.items():
            prompts.setdefault(p.prompt, []).append(model)
        found.prompts = [Prompt(text, names) for text, names in prompts.items()]
        return found

    return {
        scenario: [
            Item(
                i,
                [
                    variant(r)
                    for r in sorted(
                        by_original.get((scenario, i), []),
                        key=lambda r: (bool(r.perturbation), r.perturbation or ""),
                    )
                ],
            )
            for i in ids
        ]
        for scenario, ids in sample.items()
    }


def _prediction(
    model: str, scores: list[InstanceScoresRow], requests: list[tuple[PromptsRow, CompletionsRow]], main_metric: str
) -> ModelPrediction:
    own = [r for r in scores if r.perturbation != WORST] or scores  # a worst-case row: a perturbed copy's request
    carrier = own[0]
    main = [r.value for r in own if r.metric == main_metric and r.perturbation != WORST]
    answered = next(((p, c) for p, c in requests if p.request_id == carrier.request_id), None)
    tokens: list[Token] = []
    generated: list[str] = []
    if answered is not None:
        decoded = completion_tokens(answered[1])
        generated = [token for token, _, _ in decoded]
        for token, lp, top in decoded[:MAX_TOKENS_SHOWN]:
            alternatives = sorted(top.items(), key=lambda kv: -kv[1])
            tokens.append(Token(token, lp, alternatives[:MAX_ALTERNATIVES]))
    prompt, completion = answered if answered is not None else (None, None)
    return ModelPrediction(
        model=model,
        prediction=carrier.prediction,
        completion="" if completion is None else completion.text,
        prompt="" if prompt is None else prompt.prompt,
        main_value=main[0] if main else None,
        scores=[(r.family, r.metric, r.perturbation, r.value) for r in scores],
        requests=[
            Request(
                p.continuation or ("" if p.choice_index is None else f"reference {p.choice_index + 1}"),
                c.logprob,
                c.text,
                p.request_id == carrier.request_id,
            )
            for p, c in requests
        ]
        if len(requests) > 1
        else [],
        tokens=tokens,
        num_tokens=len(generated),
        finish_reason="" if completion is None else completion.finish_reason,
        error="" if completion is None else completion.error,
        latency_s=0.0 if completion is None else completion.latency_s,
    )
