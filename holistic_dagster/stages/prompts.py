"""The prompts stage: every request a model is asked for a scenario, rendered from the scenario's template
with its few-shot examples and fitted to the model's context window."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holistic_dagster.adaptation.adapter import TokenBudget, adapter_as_asked, build_requests
from holistic_dagster.adaptation.methods import adapter_method
from holistic_dagster.adaptation.spec import AdapterSpec
from holistic_dagster.errors import CapabilityError, CatalogError
from holistic_dagster.stages.context import StageContext
from holistic_dagster.stages.efficient import anchors_for
from holistic_dagster.warehouse.access import Instances
from holistic_dagster.warehouse.rows import prompt_row
from holistic_dagster.warehouse.tables.core import PROMPTS

if TYPE_CHECKING:
    from holistic_dagster.clients.protocol import ModelClient


def build_prompts(stage: StageContext, version: str, scenario: str, model: str) -> dict[str, Any]:
    spec, pin = stage.catalog.resolved_scenario(version, scenario)
    client = stage.client(model)
    method = adapter_for(client, scenario, spec.adapter, pin.fallback_method).method
    adapter = adapter_as_asked(spec.adapter, method, pin.conventions)
    max_tokens = adapter_method(adapter.method).max_tokens(adapter)
    if max_tokens >= client.max_context:  # before anything is replaced
        raise CatalogError(
            f"scenario {scenario!r}: max_tokens {max_tokens} leaves no room for a prompt in {model!r}'s "
            f"context window of {client.max_context} tokens: lower `max_tokens` in its adapter"
        )
    budget = TokenBudget(
        client.max_context,
        client.count_tokens,
        client.truncate_left,
        getattr(client, "chat_prompt", None),
        getattr(client, "count_tokens_many", None),
    )
    # an efficient evaluation asks only the anchors (and their perturbed copies); partial says so
    instances = Instances(stage.warehouse).records(version, scenario)
    instances, partial = anchors_for(stage, version, scenario, model, instances)
    requests = build_requests(instances, adapter, stage.catalog.templates_dir, budget, pin.seed, pin.conventions)
    keys = {"model": model, "version": version, "scenario": scenario}
    frame = PROMPTS.frame(prompt_row(r, adapter.method, adapter.template_file, **keys) for r in requests)
    frame["choice_index"] = frame["choice_index"].astype("Int64")
    stage.warehouse.replace(keys, {"prompts": frame, "partial_evaluations": partial})
    efficient = (
        {"efficient": f"{partial['n_evaluated'].iat[0]} anchors of {partial['n_full'].iat[0]} instances"}
        if len(partial)
        else {}
    )
    return {
        **efficient,
        "num_requests": len(frame),
        "num_distinct_requests": int(frame["request_id"].nunique()),
        "num_truncated": int(frame["truncated"].sum()),
        "num_fewer_shots": int((frame["num_train_instances"] < adapter.max_train_instances).sum()),
        "max_prompt_tokens": int(frame["num_prompt_tokens"].max()),
    }


def adapter_for(client: ModelClient, scenario: str, adapter: AdapterSpec, fallback_method: str | None) -> AdapterSpec:
    """The adapter this model can serve: the scenario's, or the suite's fallback method when the model cannot
    give the prompt log-probabilities the scenario needs (recorded in prompts.adapter_method). Without a
    fallback it fails before the first request, saying what to change. language_modeling has no fallback: the
    log-probability of the text is what it measures."""
    method = adapter_method(adapter.method)
    if not method.scores_continuations or client.supports_prompt_logprobs:
        return adapter
    if not method.fallback_allowed:
        raise CapabilityError(
            f"model {client.spec.name!r} ({client.spec.backend}) cannot return prompt log-probabilities, which "
            f"scenario {scenario!r} needs for {method.name} (the log-likelihood of given text; no other method "
            f"measures it). Use a backend that can (transformers, tgi; an OpenAI-compatible server with echo + "
            f"logprobs, marked `prompt_logprobs: true` in resources/models.yaml); a suite's fallback_method does "
            f"not apply to it."
        )
    if fallback_method:
        return adapter.model_copy(update={"method": fallback_method})
    raise CapabilityError(
        f"model {client.spec.name!r} ({client.spec.backend}) cannot return prompt log-probabilities, which "
        f"scenario {scenario!r} needs for {adapter.method}. Use a backend that can (transformers, tgi; an "
        f"OpenAI-compatible server with echo + logprobs, marked `prompt_logprobs: true` in resources/models.yaml), "
        f"or give {scenario!r} a `fallback_method: multiple_choice_joint` (or `method:`) in the suite file."
    )
