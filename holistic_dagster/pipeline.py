"""The evaluation stages as plain functions over the warehouse: dataset -> prompts -> completions -> scores.

Each stage reads its inputs from the warehouse, computes without holding the write lock, and replaces its
own partition in one transaction. The Dagster assets and the CLI both call these; neither computes
anything itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from holistic_dagster.adaptation import TokenBudget, build_requests
from holistic_dagster.catalog import AdapterSpec, Catalog, ModelSpec, ToxicitySpec, model_spec
from holistic_dagster.clients import ModelClient, get_client
from holistic_dagster.errors import CapabilityError, HolisticError
from holistic_dagster.hashing import sha256_json
from holistic_dagster.metrics import FAMILIES
from holistic_dagster.metrics.scoring import WORST, generation_metrics, score_instances
from holistic_dagster.perturbations import perturb_instances
from holistic_dagster.records import Completion, Instance, Reference, Request, SourceFile
from holistic_dagster.scenarios import load_instances, sample_instances
from holistic_dagster.toxicity import ToxicityClassifier, get_classifier
from holistic_dagster.warehouse import BackgroundWriter, Warehouse


@dataclass
class Stage:
    """What every stage needs: where results go, the catalog, the model registry and the run's id."""

    warehouse: Warehouse
    catalog: Catalog = field(default_factory=Catalog)
    models_file: Path | None = None
    run_id: str = ""
    progress: Callable[[str, int], Callable[[int], None]] | None = None  # (description, total) -> advance
    clients: Callable[[ModelSpec], ModelClient] = get_client  # the Dagster layer passes its backend resources
    toxicity: Callable[[ToxicitySpec], ToxicityClassifier] = get_classifier  # the suite's classifier

    def model(self, name: str) -> ModelSpec:
        return model_spec(name, self.models_file)

    def client(self, name: str) -> ModelClient:
        return self.clients(self.model(name))


# --- dataset ------------------------------------------------------------------------------------------
def build_dataset(stage: Stage, version: str, scenario: str) -> dict[str, Any]:
    spec, pin = stage.catalog.resolved_scenario(version, scenario)
    instances = sample_instances(spec, pin, load_instances(spec))
    chosen = stage.catalog.perturbations(version, scenario)
    perturbed = perturb_instances(instances, [p for names in chosen.values() for p in names], pin.seed)
    instances = instances + perturbed
    sources = {i.source.uri: i.source for i in instances}
    files = pd.DataFrame(
        [
            {
                "version": version,
                "scenario": scenario,
                "uri": s.uri,
                "sha256": s.sha256,
                "revision": s.revision,
                "num_bytes": s.num_bytes,
            }
            for s in sources.values()
        ]
    )
    rows = pd.DataFrame(
        [
            {
                "version": version,
                "scenario": scenario,
                "instance_id": i.instance_id,
                "split": i.split,
                "subset": i.subset,
                "input": i.input,
                "references": json.dumps([{"output": r.output, "correct": r.correct} for r in i.references]),
                "num_correct_references": len(i.correct_references),
                "is_multiple_choice": i.is_multiple_choice,
                "source_uri": i.source.uri,
                "record": i.record,
                "perturbation": i.perturbation,
                "original_instance_id": i.original_id,
                "metadata": json.dumps(i.metadata),
            }
            for i in instances
        ]
    )
    keys = {"version": version, "scenario": scenario}
    applies = pd.DataFrame([{**keys, "family": f, **_applicability(spec, f, chosen)} for f in FAMILIES])
    stage.warehouse.replace(keys, {"source_files": files, "instances": rows, "applicability": applies})
    originals = rows[(rows["split"] == "test") & (rows["perturbation"] == "")]
    content = {"sources": sorted((s.uri, s.sha256) for s in sources.values()), "instances": sorted(rows["instance_id"])}
    return {
        "data_version": sha256_json(content)[:24],
        "num_test": len(originals),
        "num_train": int((rows["split"] == "train").sum()),
        "num_perturbed": {p: int((rows["perturbation"] == p).sum()) for names in chosen.values() for p in names},
        "source_files": [f"{s.uri} (sha256 {s.sha256[:12]})" for s in sources.values()],
    }


def _applicability(spec, family: str, perturbations: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    if family in ("robustness", "fairness") and family in spec.families and family not in perturbations:
        return {"applies": False, "detail": "the suite version chooses no perturbations"}
    if family not in spec.families:
        reasons = {
            "accuracy": "no references to compare with",
            "calibration": "no exact-match answer whose probability could be calibrated (as in HELM)",
            "bias": "outputs are choices or short answers",
            "toxicity": "outputs are choices or short answers",
        }
        return {"applies": False, "detail": reasons.get(family, "the scenario does not declare it")}
    if family in perturbations:
        return {"applies": True, "detail": ", ".join(perturbations[family])}
    return {"applies": True, "detail": ""}


def load_dataset(stage: Stage, version: str, scenario: str) -> list[Instance]:
    frame = stage.warehouse.df(
        "SELECT i.*, f.sha256, f.revision, f.num_bytes FROM instances i JOIN source_files f "
        "ON f.version = i.version AND f.scenario = i.scenario AND f.uri = i.source_uri "
        "WHERE i.version = ? AND i.scenario = ? ORDER BY i.split DESC, i.instance_id",
        [version, scenario],
    )
    if frame.empty:
        raise HolisticError(
            f"no dataset for scenario {scenario!r}, version {version!r}: "
            f"materialize [{scenario}, dataset] for that version first"
        )
    return [
        Instance(
            instance_id=r.instance_id,
            split=r.split,
            input=r.input,
            references=tuple(Reference(x["output"], x["correct"]) for x in json.loads(r.references)),
            source=SourceFile(r.source_uri, r.sha256, r.revision, int(r.num_bytes or 0)),
            record=r.record,
            subset=r.subset,
            is_multiple_choice=bool(r.is_multiple_choice),
            perturbation=r.perturbation or "",
            original_id=r.original_instance_id or "",
            metadata=json.loads(r.metadata or "{}"),
        )
        for r in frame.itertuples(index=False)
    ]


# --- prompts ------------------------------------------------------------------------------------------
def build_prompts(stage: Stage, version: str, scenario: str, model: str) -> dict[str, Any]:
    spec, pin = stage.catalog.resolved_scenario(version, scenario)
    client = stage.client(model)
    adapter = adapter_for(client, scenario, spec.adapter, pin.fallback_method)
    budget = TokenBudget(
        client.max_context, client.count_tokens, client.truncate_left, getattr(client, "chat_prompt", None)
    )
    requests = build_requests(
        load_dataset(stage, version, scenario), adapter, stage.catalog.templates_dir, budget, pin.seed
    )
    frame = pd.DataFrame(
        [
            {
                "model": model,
                "version": version,
                "scenario": scenario,
                "instance_id": r.instance_id,
                "request_id": r.request_id,
                "kind": r.kind,
                "adapter_method": adapter.method,
                "template": adapter.template_file,
                "prompt": r.prompt,
                "continuation": r.continuation,
                "choice_index": r.choice_index,
                "is_null_context": r.is_null_context,
                "max_tokens": r.max_tokens,
                "temperature": r.temperature,
                "stop": json.dumps(list(r.stop)),
                "num_train_instances": r.num_train_instances,
                "truncated": r.truncated,
                "num_prompt_tokens": r.num_prompt_tokens,
            }
            for r in requests
        ]
    )
    frame["choice_index"] = frame["choice_index"].astype("Int64")
    stage.warehouse.replace({"model": model, "version": version, "scenario": scenario}, {"prompts": frame})
    return {
        "num_requests": len(frame),
        "num_distinct_requests": int(frame["request_id"].nunique()),
        "num_truncated": int(frame["truncated"].sum()),
        "num_fewer_shots": int((frame["num_train_instances"] < adapter.max_train_instances).sum()),
        "max_prompt_tokens": int(frame["num_prompt_tokens"].max()),
    }


def adapter_for(client, scenario: str, adapter: AdapterSpec, fallback_method: str | None) -> AdapterSpec:
    """The adapter this model can serve: the scenario's, or the suite's fallback method when the model cannot
    give the prompt log-probabilities the scenario needs (recorded in prompts.adapter_method). Without a
    fallback it fails before the first request, saying what to change."""
    if not adapter.method.startswith("multiple_choice_separate") or client.supports_prompt_logprobs:
        return adapter
    if fallback_method:
        return adapter.model_copy(update={"method": fallback_method})
    raise CapabilityError(
        f"model {client.spec.name!r} ({client.spec.backend}) cannot return prompt log-probabilities, which "
        f"scenario {scenario!r} needs for {adapter.method}. Use a backend that can (transformers, tgi; an "
        f"OpenAI-compatible server with echo + logprobs, marked `prompt_logprobs: true` in resources/models.yaml), "
        f"or give {scenario!r} a `fallback_method: multiple_choice_joint` (or `method:`) in the suite file."
    )


def prompted_method(stage: Stage, version: str, scenario: str, model: str) -> str:
    """The adapter method the prompts were built with (the scenario's, or a fallback)."""
    frame = stage.warehouse.df(
        "SELECT DISTINCT adapter_method FROM prompts WHERE model = ? AND version = ? AND scenario = ?",
        [model, version, scenario],
    )
    if frame.empty:
        raise _no_prompts(version, scenario, model)
    return str(frame["adapter_method"].iat[0])


def _no_prompts(version: str, scenario: str, model: str) -> HolisticError:
    return HolisticError(
        f"no prompts for {scenario!r}, model {model!r}, version {version!r}: materialize [{scenario}, prompts] first"
    )


def load_requests(stage: Stage, version: str, scenario: str, model: str) -> list[Request]:
    frame = stage.warehouse.df(
        "SELECT * FROM prompts WHERE model = ? AND version = ? AND scenario = ? ORDER BY instance_id, request_id",
        [model, version, scenario],
    )
    if frame.empty:
        raise _no_prompts(version, scenario, model)
    return [
        Request(
            request_id=r.request_id,
            instance_id=r.instance_id,
            kind=r.kind,
            prompt=r.prompt,
            continuation=r.continuation,
            choice_index=None if pd.isna(r.choice_index) else int(r.choice_index),
            is_null_context=bool(r.is_null_context),
            max_tokens=int(r.max_tokens),
            temperature=float(r.temperature),
            stop=tuple(json.loads(r.stop)),
            num_train_instances=int(r.num_train_instances),
            truncated=bool(r.truncated),
            num_prompt_tokens=int(r.num_prompt_tokens),
        )
        for r in frame.itertuples(index=False)
    ]


# --- completions --------------------------------------------------------------------------------------
def run_completions(stage: Stage, version: str, scenario: str, model: str) -> dict[str, Any]:
    """Completions for every distinct request, reusing the completion cache: only requests this model
    (same backend, path and revision) has never answered are sent, and every finished batch or response is
    committed to the cache at once, so a killed run resumes where it stopped and repeats no finished request.
    The partition is replaced at the end."""
    spec, _ = stage.catalog.resolved_scenario(version, scenario)
    client = stage.client(model)
    info = client.describe()
    model_key = sha256_json({k: info.get(k) for k in ("backend", "model_path", "model_revision")})[:16]
    distinct = list({r.request_id: r for r in load_requests(stage, version, scenario, model)}.values())
    done = _cached_completions(stage, model_key, [r.request_id for r in distinct])
    todo = [r for r in distinct if r.request_id not in done]
    adapter = spec.adapter.model_copy(update={"method": prompted_method(stage, version, scenario, model)})
    provenance_id = _record_provenance(stage, model, info, adapter)
    advance = stage.progress(f"{model} on {scenario}", len(todo)) if stage.progress and todo else None

    with BackgroundWriter(stage.warehouse, "completion_cache") as cache:

        def save(finished: list[Completion]) -> None:
            """Each finished batch (or HTTP response) goes to the cache at once, without blocking requests."""
            cache.put(_cache_frame(finished, model_key, provenance_id))
            done.update({c.request_id: (c, provenance_id) for c in finished})  # failed ones: stored, never cached
            if advance:
                advance(len(finished))

        client.generate([r for r in todo if r.kind == "generate"], save)
        client.score([r for r in todo if r.kind == "score"], save)
    frame = pd.DataFrame(
        [
            {"model": model, "version": version, "scenario": scenario, **_completion_row(c), "provenance_id": pid}
            for c, pid in (done[r.request_id] for r in distinct)
        ]
    )
    stage.warehouse.replace({"model": model, "version": version, "scenario": scenario}, {"completions": frame})
    return {
        "num_completions": len(frame),
        "num_sent": len(todo),
        "num_from_cache": len(distinct) - len(todo),
        "num_failed": int((frame["error"] != "").sum()),
        "model_revision": info["model_revision"],
        "backend": info["backend"],
        "total_latency_s": round(float(frame["latency_s"].sum()), 3),
        "num_output_tokens": int(frame["num_completion_tokens"].sum()),
    }


def _record_provenance(stage: Stage, model: str, info: dict[str, Any], adapter) -> str:
    decoding = {
        "method": adapter.method,
        "max_tokens": adapter.max_tokens,
        "temperature": adapter.temperature,
        "stop": list(adapter.stop_sequences),
        "max_train_instances": adapter.max_train_instances,
        "prompt_format": info.get("prompt_format", "plain"),
    }
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
    return row["provenance_id"]


def _completion_row(c: Completion) -> dict[str, Any]:
    return {
        "request_id": c.request_id,
        "text": c.text,
        "tokens": json.dumps(list(c.tokens)),
        "logprobs": json.dumps(list(c.logprobs)),
        "logprob": c.logprob,
        "num_prompt_tokens": c.num_prompt_tokens,
        "num_completion_tokens": c.num_completion_tokens,
        "latency_s": c.latency_s,
        "finish_reason": c.finish_reason,
        "error": c.error,
        "top_logprobs": json.dumps(list(c.top_logprobs)),
    }


def _completion_from_row(r: Any) -> Completion:
    return Completion(
        request_id=r.request_id,
        text=r.text,
        tokens=tuple(json.loads(r.tokens)),
        logprobs=tuple(json.loads(r.logprobs)),
        logprob=float(r.logprob),
        num_prompt_tokens=int(r.num_prompt_tokens),
        num_completion_tokens=int(r.num_completion_tokens),
        latency_s=float(r.latency_s),
        finish_reason=r.finish_reason,
        error=getattr(r, "error", ""),
        top_logprobs=tuple(json.loads(r.top_logprobs or "[]")),
    )


def _cache_frame(completions: list[Completion], model_key: str, provenance_id: str) -> pd.DataFrame:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = []
    for c in completions:
        if c.error:  # a failed request is retried next time, never served from the cache
            continue
        row = _completion_row(c)
        del row["error"]
        rows.append(
            {"model_key": model_key, "sample_index": 0, **row, "provenance_id": provenance_id, "created_at": now}
        )
    return pd.DataFrame(rows)


def _cached_completions(stage: Stage, model_key: str, request_ids: list[str]) -> dict[str, tuple[Completion, str]]:
    if not stage.warehouse.path.exists():
        return {}
    frame = stage.warehouse.df(
        "SELECT * FROM completion_cache WHERE model_key = ? AND sample_index = 0 AND request_id IN "
        "(SELECT unnest(?::VARCHAR[]))",
        [model_key, request_ids],
    )
    return {r.request_id: (_completion_from_row(r), r.provenance_id) for r in frame.itertuples(index=False)}


def load_completions(stage: Stage, version: str, scenario: str, model: str) -> dict[str, tuple[Completion, str]]:
    frame = stage.warehouse.df(
        "SELECT * FROM completions WHERE model = ? AND version = ? AND scenario = ?", [model, version, scenario]
    )
    return {r.request_id: (_completion_from_row(r), r.provenance_id) for r in frame.itertuples(index=False)}


# --- scores -------------------------------------------------------------------------------------------
def compute_scores(stage: Stage, version: str, scenario: str, model: str) -> dict[str, Any]:
    spec, _ = stage.catalog.resolved_scenario(version, scenario)
    instances = [i for i in load_dataset(stage, version, scenario) if i.split == "test"]
    requests = load_requests(stage, version, scenario, model)
    loaded = load_completions(stage, version, scenario, model)
    missing = {r.request_id for r in requests} - set(loaded)
    if missing:
        raise HolisticError(
            f"{len(missing)} request(s) of {scenario!r} for model {model!r} have no completion: "
            f"materialize [{scenario}, completions] first"
        )
    completions = {rid: c for rid, (c, _) in loaded.items()}
    # a failed request never becomes a score: its instance is left out (and counted)
    failed = {r.instance_id for r in requests if completions[r.request_id].error}
    instances = [i for i in instances if i.instance_id not in failed]
    if not any(not i.perturbation for i in instances):
        raise HolisticError(f"every request of {scenario!r} for model {model!r} failed: nothing to score")
    method = prompted_method(stage, version, scenario, model)
    rows, aggregates = score_instances(
        method, spec.metrics, instances, requests, completions, spec.families, spec.extra_metrics
    )
    if method == "generation" and {"toxicity", "bias"} & set(spec.families):
        texts = _generations(instances, requests, completions)
        classifier = stage.toxicity(stage.catalog.suite(version).toxicity) if "toxicity" in spec.families else None
        more_rows, more = generation_metrics(
            texts, spec.families, classifier.score if classifier else None, classifier.name if classifier else ""
        )
        rows, aggregates = rows + more_rows, aggregates + more
    keys = {"model": model, "version": version, "scenario": scenario}
    scores = pd.DataFrame(
        [
            {
                **keys,
                "instance_id": s.instance_id,
                "metric": s.metric,
                "family": s.family,
                "value": s.value,
                "request_id": s.request_id,
                "prediction": s.prediction,
                "provenance_id": loaded[s.request_id][1],
                "perturbation": s.perturbation,
                "scorer": s.scorer,
            }
            for s in rows
        ]
    )
    main_provenance = scores["provenance_id"].mode().iat[0]
    metrics = pd.DataFrame(
        [
            {
                **keys,
                "metric": m.metric,
                "family": m.family,
                "value": m.value,
                "count": m.count,
                "provenance_id": main_provenance,
                "perturbation": m.perturbation,
                "scorer": m.scorer,
                "note": m.note,
            }
            for m in aggregates
        ]
    )
    stage.warehouse.replace(keys, {"instance_scores": scores, "scenario_metrics": metrics})
    originals = [i for i in instances if not i.perturbation]
    headline_names = {spec.main_metric, "ece_10_bin", "toxic_fraction"}
    headline = {
        f"{m.metric}{'/' + m.perturbation if m.perturbation else ''} ({m.family})": round(m.value, 4)
        for m in aggregates
        if m.value is not None and m.metric in headline_names and m.perturbation in ("", WORST)
    }
    return {
        "num_instances": len(originals),
        "num_perturbed_instances": len(instances) - len(originals),
        "num_failed_instances": len(failed),
        "num_scores": len(scores),
        **headline,
    }


def _generations(
    instances: list[Instance], requests: list[Request], completions: dict[str, Completion]
) -> dict[str, tuple[str, str]]:
    """{original instance id: (request id, generated text)} for generation scenarios."""
    originals = {i.instance_id for i in instances if not i.perturbation}
    return {
        r.instance_id: (r.request_id, completions[r.request_id].text) for r in requests if r.instance_id in originals
    }


# --- leaderboard --------------------------------------------------------------------------------------
def leaderboard(warehouse: Warehouse, version: str, family: str | None = None) -> pd.DataFrame:
    """Models x (scenario, metric) per family, for one suite version; never blended across families. Families
    that do not apply to a scenario appear as rows with no value and a note saying so."""
    sql = "SELECT * FROM leaderboard WHERE version = ?" + (" AND family = ?" if family else "")
    frame = warehouse.df(sql, [version] + ([family] if family else []))
    frame["family"] = pd.Categorical(frame["family"], categories=FAMILIES, ordered=True)
    return frame.sort_values(["family", "scenario", "metric", "perturbation", "model"]).reset_index(drop=True)


def family_table(part: pd.DataFrame, win_rates: pd.DataFrame | None = None) -> str:
    """One family's leaderboard rows as a Markdown table: (scenario, metric [perturbation]) x model, with
    "n/a" where the family does not apply and "undefined" where a value could not be computed; the family's
    mean win rate as the first row."""
    part = part.copy()
    part["metric"] = part["metric"].where(part["metric"] != "", "not applicable")
    part["row"] = part["scenario"] + " " + part["metric"] + part["perturbation"].map(lambda p: f" [{p}]" if p else "")
    cells = part.apply(
        lambda r: "n/a" if r.metric == "not applicable" else ("undefined" if pd.isna(r.value) else f"{r.value:.3f}"),
        axis=1,
    )
    table = part.assign(cell=cells).pivot_table(index="row", columns="model", values="cell", aggfunc="first")
    if win_rates is not None and len(win_rates):
        rates = win_rates.set_index("model")["mean_win_rate"].map(lambda v: f"{v:.3f}")
        table = pd.concat([rates.rename("mean win rate").to_frame().T, table])
    return table.to_markdown()


def comparison_table(frame: pd.DataFrame) -> str:
    shown = frame.assign(
        ci=frame.apply(lambda r: f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]", axis=1),
        metric=frame["metric"] + frame["perturbation"].map(lambda p: f" [{p}]" if p else ""),
    )
    columns = ["model_b", "model_a", "scenario", "family", "metric", "n", "mean_a", "mean_b", "diff", "ci", "p_value"]
    return shown[columns + ["verdict"]].round(4).to_markdown(index=False)


# --- summaries: leaderboard statistics, win rates, regressions -----------------------------------------
def summarize(stage: Stage, version: str) -> dict[str, pd.DataFrame]:
    """Every leaderboard cell with n and a bootstrap CI, and the mean win rate per family; replaces the
    version's rows of leaderboard_stats and win_rates."""
    from holistic_dagster.summary import cell_statistics, family_win_rates

    main = stage.catalog.main_metrics(version)
    cells = cell_statistics(stage.warehouse, version)
    if cells.empty:
        raise HolisticError(f"no scores for suite version {version!r} in {stage.warehouse.path}: evaluate it first")
    rates = family_win_rates(cells, main)
    stage.warehouse.replace({"version": version}, {"leaderboard_stats": cells, "win_rates": rates})
    return {"cells": cells, "win_rates": rates}


def find_regressions(stage: Stage, version: str) -> pd.DataFrame:
    """Every registered model with a `previous` revision, tested against it on the version's instances
    (both must have scores); replaces the version's rows of `comparisons`."""
    from holistic_dagster.catalog import load_models
    from holistic_dagster.summary import compare_models

    alpha = stage.catalog.suite(version).regression_alpha
    main = stage.catalog.main_metrics(version)
    scored = set(
        stage.warehouse.df("SELECT DISTINCT model FROM scenario_metrics WHERE version = ?", [version])["model"]
    )
    frames = [
        compare_models(stage.warehouse, version, spec.previous, name, alpha, main_metric=main)
        for name, spec in load_models(stage.models_file).items()
        if spec.previous and name in scored and spec.previous in scored
    ]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    stage.warehouse.replace({"version": version}, {"comparisons": frame})
    return frame


def report_path(stage: Stage, version: str) -> Path:
    """Where the HTML report of a suite version goes: reports/<version>.html beside the warehouse."""
    return stage.warehouse.path.parent / "reports" / f"{version}.html"


def write_report(stage: Stage, version: str) -> dict[str, Any]:
    from holistic_dagster.report import build_report

    return build_report(stage.warehouse, version, stage.catalog.main_metrics(version), report_path(stage, version))
