"""What the report's predictions pages show: for a scenario, a seeded sample of its evaluated instances (the same
sample for every model), each with its perturbed copies, and per model the exact prompt, the completion, the
per-instance scores, the requests behind the prediction and the top alternative tokens where the backend gave
them. Read straight from the warehouse rows, so the page shows what `lineage` and `holistic trace` show."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pandas as pd

from holistic_dagster.metrics import WORST
from holistic_dagster.warehouse import Warehouse

# C0 control characters (but tab and newline) and DEL as their Unicode control pictures: model output may hold
# them (an untrained model's tokens), and an HTML page would drop or mangle them
CONTROL_PICTURES = {c: 0x2400 + c for c in range(32) if c not in (9, 10)} | {127: 0x2421}
MAX_TOKENS_SHOWN = 16  # generated tokens whose log-probabilities (and alternatives) a prediction lists
MAX_ALTERNATIVES = 5


@dataclass
class Request:
    continuation: str
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


def visible(text: str) -> str:
    """Text as a page shows it: control characters made visible (everything else as it is)."""
    return text.translate(CONTROL_PICTURES)


def sample_order(instance_id: str, seed: int) -> str:
    """A model-independent order: the same sample for every model, and a stable one as instances are added."""
    return hashlib.sha256(f"{seed}/{instance_id}".encode()).hexdigest()


def sample_instances(warehouse: Warehouse, version: str, scenario: str, limit: int, seed: int = 0) -> list[str]:
    """Up to `limit` original evaluated instances of a scenario that some model was scored on."""
    ids = warehouse.df(
        "SELECT DISTINCT i.instance_id FROM instances i JOIN instance_scores s USING (version, scenario, instance_id) "
        "WHERE i.version = ? AND i.scenario = ? AND i.split = 'test' AND i.perturbation = ''",
        [version, scenario],
    )["instance_id"].tolist()
    return sorted(ids, key=lambda i: sample_order(i, seed))[:limit]


def load_items(
    warehouse: Warehouse, version: str, scenario: str, instance_ids: list[str], main_metric: str
) -> list[Item]:
    """The sampled instances with their perturbed copies, and what every model did on each."""
    keys = [version, scenario, instance_ids]
    instances = warehouse.df(
        'SELECT instance_id, perturbation, original_instance_id, input, "references" FROM instances '
        "WHERE version = ? AND scenario = ? AND (instance_id IN (SELECT unnest(?::VARCHAR[])) "
        "OR original_instance_id IN (SELECT unnest(?::VARCHAR[])))",
        keys + [instance_ids],
    )
    variant_ids = instances["instance_id"].tolist()
    where = "p.version = ? AND p.scenario = ? AND p.instance_id IN (SELECT unnest(?::VARCHAR[]))"
    requests = warehouse.df(
        "SELECT DISTINCT p.model, p.instance_id, p.request_id, p.prompt, p.continuation, p.choice_index, "
        "c.text, c.logprob, c.tokens, c.logprobs, c.top_logprobs, c.finish_reason, c.error, c.latency_s "
        f"FROM prompts p JOIN completions c USING (model, version, scenario, request_id) WHERE {where} "
        "ORDER BY p.model, p.instance_id, p.choice_index NULLS FIRST, p.request_id",
        [version, scenario, variant_ids],
    )
    scores = warehouse.df(
        "SELECT model, instance_id, family, metric, perturbation, value, request_id, prediction FROM instance_scores "
        "WHERE version = ? AND scenario = ? AND instance_id IN (SELECT unnest(?::VARCHAR[])) "
        "ORDER BY model, instance_id, family, metric, perturbation",
        [version, scenario, variant_ids],
    )
    requests_of = {k: g for k, g in requests.groupby(["model", "instance_id"])}
    scores_of = {k: g for k, g in scores.groupby(["model", "instance_id"])}
    models = sorted(scores["model"].unique())

    def variant(row) -> Variant:
        found = Variant(
            row.instance_id,
            row.perturbation or "",
            row.input,
            [(r["output"], bool(r["correct"])) for r in json.loads(row.references)],
            [],
        )
        for model in models:
            mine = scores_of.get((model, row.instance_id))
            if mine is not None:
                found.models[model] = _prediction(model, mine, requests_of.get((model, row.instance_id)), main_metric)
        prompts: dict[str, list[str]] = {}
        for model, p in found.models.items():
            prompts.setdefault(p.prompt, []).append(model)
        found.prompts = [Prompt(text, names) for text, names in prompts.items()]
        return found

    by_original: dict[str, list] = {i: [] for i in instance_ids}
    for row in instances.itertuples(index=False):
        by_original.setdefault(row.original_instance_id or row.instance_id, []).append(row)
    items = []
    for instance_id in instance_ids:
        rows = sorted(by_original[instance_id], key=lambda r: (bool(r.perturbation), r.perturbation or ""))
        items.append(Item(instance_id, [variant(r) for r in rows]))
    return items


def _prediction(model: str, scores: pd.DataFrame, requests: pd.DataFrame | None, main_metric: str) -> ModelPrediction:
    own = scores[scores["perturbation"] != WORST]  # a worst-case row points at a perturbed copy's request
    carrier = (own if len(own) else scores).iloc[0]
    main = own[own["metric"] == main_metric]["value"]
    requests = requests if requests is not None else pd.DataFrame(columns=["request_id"])
    chosen = requests[requests["request_id"] == carrier["request_id"]]
    completion = chosen.iloc[0] if len(chosen) else None
    tokens: list[Token] = []
    if completion is not None:
        top = json.loads(completion["top_logprobs"] or "[]")
        for i, (token, lp) in enumerate(zip(json.loads(completion["tokens"]), json.loads(completion["logprobs"]))):
            if i == MAX_TOKENS_SHOWN:
                break
            alternatives = sorted((top[i] if i < len(top) else {}).items(), key=lambda kv: -kv[1])
            tokens.append(Token(token, float(lp), alternatives[:MAX_ALTERNATIVES]))
    return ModelPrediction(
        model=model,
        prediction=str(carrier["prediction"]),
        completion="" if completion is None else completion["text"],
        prompt="" if completion is None else completion["prompt"],
        main_value=float(main.iloc[0]) if len(main) else None,
        scores=[(r.family, r.metric, r.perturbation, float(r.value)) for r in scores.itertuples(index=False)],
        requests=[
            Request(r.continuation, float(r.logprob), r.text, r.request_id == carrier["request_id"])
            for r in requests.itertuples(index=False)
        ]
        if len(requests) > 1
        else [],
        tokens=tokens,
        num_tokens=0 if completion is None else len(json.loads(completion["tokens"])),
        finish_reason="" if completion is None else completion["finish_reason"],
        error="" if completion is None else completion["error"],
        latency_s=0.0 if completion is None else float(completion["latency_s"]),
    )
