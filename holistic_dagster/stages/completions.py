"""The completions stage: the model's raw output for every distinct request (text, tokens, log-probabilities,
latency), with the completion cache that makes a killed run resume without repeating a finished request."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from holistic_dagster.adaptation.adapter import adapter_as_asked
from holistic_dagster.clients.identity import NUMERICS, answering_identity
from holistic_dagster.clients.protocol import StopSending
from holistic_dagster.records import Completion, Request, sha256_json
from holistic_dagster.results.leaderboard import borrowed_pools
from holistic_dagster.stages.budget import Spend, check_budget, estimate_cost, left_of, spent_on
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse import BackgroundWriter
from holistic_dagster.warehouse.access import CompletionCache, Prompts
from holistic_dagster.warehouse.journal import replay
from holistic_dagster.warehouse.rows import cache_row, completion_row
from holistic_dagster.warehouse.tables.core import COMPLETIONS


def run_completions(stage: StageContext, version: str, scenario: str, model: str) -> dict[str, Any]:
    """Completions for every distinct request, reusing the completion cache (answer_requests). The partition
    is replaced at the end."""
    spec, pin = stage.catalog.resolved_scenario(version, scenario)
    requests = Prompts(stage.warehouse).requests(version, scenario, model)
    # a run the CLI checked as a whole gets here within budget; this also holds one the daemon launched to it
    budget, source = stage.max_cost, "the run's max_cost"
    if budget is None:
        budget, source = stage.catalog.suite(version).max_cost, f"suite {version}'s max_cost"
    spend = None
    if budget is not None and (price := stage.model(model).price) is not None:
        spend = Spend(price, budget, source, earlier=spent_on(stage, model, version))
        left, where = left_of(budget, spend.earlier, source)
        estimate = estimate_cost(stage, version, model, [scenario])
        check_budget(estimate, left, f"{where}, for {scenario} alone")
    adapter = adapter_as_asked(spec.adapter, Prompts(stage.warehouse).method(version, scenario, model), pin.conventions)
    decoding = {
        "method": adapter.method,
        "max_tokens": adapter.max_tokens,
        "temperature": adapter.temperature,
        "stop": list(adapter.stop_sequences),
        "max_train_instances": adapter.max_train_instances,
    }
    if borrowed := borrowed_pools(stage.warehouse, version).get(scenario):
        decoding["in_context_examples"] = borrowed  # a deviation every score's provenance carries (view scores)
    done, info, num_sent = answer_requests(stage, model, requests, decoding, f"{model} on {scenario}", spend)
    distinct = list(dict.fromkeys(r.request_id for r in requests))
    frame = COMPLETIONS.frame(
        completion_row(c, pid, model=model, version=version, scenario=scenario)
        for c, pid in (done[r] for r in distinct)
    )
    stage.warehouse.replace({"model": model, "version": version, "scenario": scenario}, {"completions": frame})
    return {
        "num_completions": len(frame),
        "num_sent": num_sent,
        "num_from_cache": len(distinct) - num_sent,
        "num_failed": int((frame["error"] != "").sum()),
        "model_revision": info["model_revision"],
        "backend": info["backend"],
        "total_latency_s": round(float(frame["latency_s"].sum()), 3),
        "num_output_tokens": int(frame["num_completion_tokens"].sum()),
    }


def answer_requests(
    stage: StageContext,
    model: str,
    requests: list[Request],
    decoding: dict[str, Any],
    label: str,
    spend: Spend | None = None,
) -> tuple[dict[str, tuple[Completion, str]], dict[str, Any], int]:
    """Each distinct request's completion and provenance id, the client's description and how many requests
    were sent: only requests this model (same backend, path and revision) has never answered are sent, and
    every finished batch or response is committed to the completion cache at once, so a killed run resumes
    where it stopped and repeats no finished request. decoding: recorded in the provenance (with a priced model's
    price, which request_costs reads). spend: meters what the answers cost; when it reaches its budget no more
    requests are sent and BudgetReached is raised."""
    client = stage.client(model)
    info = client.describe()
    model_key = answering_identity(info)
    distinct = list({r.request_id: r for r in requests}.values())
    replay(stage.warehouse, "completion_cache")  # answers a killed run got but had not committed
    done = CompletionCache(stage.warehouse).answers(model_key, [r.request_id for r in distinct])
    todo = [r for r in distinct if r.request_id not in done]
    if (price := stage.model(model).price) is not None:  # what the answers cost (view request_costs)
        decoding = {**decoding, "price": price.model_dump()}
    provenance_id = _record_provenance(stage, model, info, decoding)
    advance = stage.progress(label, len(todo)) if stage.progress and todo else None

    with BackgroundWriter(stage.warehouse, "completion_cache") as cache:

        def save(finished: list[Completion]) -> None:
            """Each finished batch (or HTTP response) goes to the cache at once, without blocking requests."""
            cache.put(cache_rows(finished, model_key, provenance_id))
            done.update({c.request_id: (c, provenance_id) for c in finished})  # failed ones: stored, never cached
            if advance:
                advance(len(finished))
            if spend is not None and spend.add(finished):
                raise StopSending

        if spend is not None:
            save.reserve = spend.reserve  # type: ignore[attr-defined]  # asked before each request is sent (clients/http.py send_concurrently)

        client.generate([r for r in todo if r.kind == "generate"], save)
        if not (spend and spend.reached):
            client.score([r for r in todo if r.kind == "score"], save)
    if todo and (after := client.describe()).get("batch_size") != info.get("batch_size"):
        # the device ran out of memory meanwhile: the completions sent now carry a provenance that says so
        backed_off = _record_provenance(stage, model, after, decoding)
        done.update({r.request_id: (done[r.request_id][0], backed_off) for r in todo if r.request_id in done})
    unsent = [r for r in todo if r.request_id not in done]
    if spend is not None and unsent:
        raise spend.stopped(label, len(unsent))
    return done, info, len(todo)


def _record_provenance(stage: StageContext, model: str, info: dict[str, Any], decoding: dict[str, Any]) -> str:
    # how the numbers were computed besides the weights (a local model's dtype, llama.cpp's context reuse)
    numerics = {key: info[key] for key in NUMERICS if key in info}
    decoding = {**decoding, "prompt_format": info.get("prompt_format", "plain"), **numerics}
    if "backed_off_from" in info:  # batch_size: the rows it backed off to when the device ran out of memory
        decoding["backed_off_from_rows"] = info["backed_off_from"]
    row = {
        "model": model,
        "backend": info["backend"],
        "model_path": info.get("model_path"),
        "model_revision": info["model_revision"],
        "batch_size": info.get("batch_size"),
        "max_context": info.get("max_context"),
        "decoding": json.dumps(decoding),
        "hardware": info.get("hardware"),
        "library_versions": json.dumps(info.get("library_versions", {})),
        "dagster_run_id": stage.run_id or None,
    }
    row["provenance_id"] = sha256_json(row)[:16]
    row["created_at"] = datetime.now(timezone.utc).replace(tzinfo=None)
    stage.warehouse.upsert("provenance", pd.DataFrame([row]))
    return str(row["provenance_id"])


def cache_rows(completions: list[Completion], model_key: str, provenance_id: str) -> list[dict[str, Any]]:
    """The completion_cache rows of finished completions (failed ones are not cached)."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    # a failed request is retried next time, never served from the cache
    return [vars(cache_row(c, model_key, provenance_id, now)) for c in completions if not c.error]
