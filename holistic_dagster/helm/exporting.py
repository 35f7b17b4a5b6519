"""A suite version's results as HELM's run folders (`benchmark_output/runs/<suite>/<run>/`), which HELM's own
`helm-summarize` and `helm-server` read: our models on HELM's leaderboard pages.

One run per (model, scenario, subset), as HELM splits its runs (MMLU per subject). Each holds:
- run_spec.json: the run's name, scenario, adapter (method, decoding, model) and groups. A run imported from
  HELM gets its own run spec back; ours get one built from the prompts and completions, named by HELM's group
  for the scenario (so `helm-summarize` files it in HELM's own table where HELM has the scenario);
- scenario_state.json: every request with its instance and our model's result;
- per_instance_stats.json: every per-instance score under HELM's metric names;
- stats.json: per metric and split, HELM's aggregate of a run of one trial (a Stat of the mean over the split's
  instances), the number of instances per split, run-level metrics (ECE, bias) from the scenario metrics on the
  test split, and the worst case over perturbations (robustness, fairness) where there is one;
- scenario.json: the scenario's name and description.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.helm.names import SUBSET_ARGUMENT, group_for_scenario, helm_metric
from holistic_dagster.results.partition import partition_record, scored_partitions
from holistic_dagster.warehouse.rows import json_list, json_object, metadata_of, references_of

MANIFEST = ".holistic-export.json"  # what an export wrote into runs/<suite>/ (helm-summarize reads folders only)


def export_runs(
    warehouse, version: str, out: Path, suite: str | None = None, models: list[str] | None = None,
    replace: bool = False,
) -> Path:  # fmt: skip
    """Writes the version's runs under out/runs/<suite>/ (default suite: the version) and returns that folder.
    The folder is written beside and renamed into place: an export that fails leaves no half-written suite.
    An existing non-empty folder is refused unless `replace`, and then only what an earlier export wrote there
    (its manifest's run folders) is replaced: a user's notes, a HELM run of their own, are never deleted."""
    suite = suite or version
    if not suite or suite in (".", "..") or any(c in suite for c in "/\\\0"):
        raise HolisticError(f"suite name {suite!r}: a folder name under runs/ (no path separators, not . or ..)")
    scored = scored_partitions(warehouse, version)
    if models:
        unknown = sorted(set(models) - set(scored["model"]))
        if unknown:
            raise HolisticError(f"no scores for {', '.join(unknown)} in suite version {version!r}")
        scored = scored[scored["model"].isin(models)]
    if scored.empty:
        raise HolisticError(f"no scores for suite version {version!r} in {warehouse.path}: evaluate it first")
    target = Path(out) / "runs" / suite
    ours = _replaceable(target, replace)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{suite}.", dir=target.parent))
    try:
        written: dict[str, list[str]] = {}
        for model, scenario in scored.itertuples(index=False):
            for name, files in _runs(warehouse, version, model, scenario):
                folder = staging / name
                folder.mkdir()
                for file, content in files.items():
                    (folder / file).write_text(json.dumps(content, indent=2, ensure_ascii=False), encoding="utf-8")
                written[name] = sorted(files)
        (staging / MANIFEST).write_text(json.dumps({"version": version, "runs": written}, indent=2), encoding="utf-8")
        if ours is None:
            if target.exists():
                target.rmdir()  # empty (_replaceable said so)
            os.replace(staging, target)
        else:
            _swap_in(staging, target, ours, written)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _replaceable(target: Path, replace: bool) -> dict[str, list[str]] | None:
    """None when `target` is absent or empty; else the run folders an earlier export wrote there (its manifest),
    which `replace` may replace. Raises, before anything is written, where replacing could lose a user's file."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise HolisticError(f"{target} is not a folder the export can write runs into")
    if not target.exists() or not any(target.iterdir()):
        return None
    if not replace:
        raise HolisticError(
            f"{target} exists and is not empty: nothing was written. Export under another --suite or --out, or "
            "give --replace to replace the runs an earlier export wrote there (nothing else is touched)"
        )
    try:
        manifest = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
        ours = {str(run): [str(f) for f in files] for run, files in manifest["runs"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise HolisticError(
            f"{target} was not written by `holistic export` (no readable {MANIFEST}): nothing was written or "
            "deleted. Export under another --suite or --out"
        ) from None
    strays = sorted(run for run in ours if not _a_folder_name(run))
    if strays:
        raise HolisticError(
            f"{target / MANIFEST} names runs that are no folder of {target} ({', '.join(map(repr, strays))}): "
            "nothing was written or deleted"
        )
    for run, files in ours.items():
        folder = target / run
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise HolisticError(f"{folder} is not a run folder the export wrote: nothing was written or deleted")
        foreign = sorted(p.name for p in folder.iterdir() if p.name not in files) if folder.exists() else []
        if foreign:
            raise HolisticError(
                f"{folder} holds files the export did not write ({', '.join(foreign)}): nothing was written or "
                "deleted. Move them away, or export under another --suite or --out"
            )
    return ours


def _a_folder_name(name: str) -> bool:
    """A run's folder name: one path component, not . or .., so target / name stays inside target."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def _swap_in(staging: Path, target: Path, ours: dict[str, list[str]], written: dict[str, list[str]]) -> None:
    """Moves the new runs into `target` in place of the earlier export's, leaving everything else there alone."""
    taken = sorted(n for n in written if n not in ours and (target / n).exists())
    if taken:
        raise HolisticError(
            f"{target} holds folders of the same name the export did not write ({', '.join(taken)}): nothing was "
            "written or deleted. Export under another --suite or --out"
        )
    aside = staging / ".replaced"
    aside.mkdir()
    moved_aside, moved_in = [], []
    try:
        for run in ours:
            if (target / run).exists():
                os.replace(target / run, aside / run)
                moved_aside.append(run)
        for run in written:
            os.replace(staging / run, target / run)
            moved_in.append(run)
        os.replace(staging / MANIFEST, target / MANIFEST)
    except BaseException:  # put the earlier export back as it was
        for run in moved_in:
            os.replace(target / run, staging / run)
        for run in moved_aside:
            os.replace(aside / run, target / run)
        raise


def _runs(warehouse, version: str, model: str, scenario: str):
    """(run folder name, {file: content}) per subset of one model partition."""
    run = partition_record(warehouse, version, scenario, model)
    instances, prompts, completions, scores = run.instances, run.prompts, run.completions, run.scores
    worst, run_metrics, imported, provenance = run.worst, run.scenario_metrics, run.imported, run.provenance
    specs = {r.subset: json_object(r.run_spec) for r in imported.itertuples()}
    about = imported["description"].iat[0] if len(imported) else ""
    if not about:
        about = _our_description(scenario)
    per_instance_names = set(scores["metric"])
    for subset, part in instances.groupby("subset", sort=True):
        ids = set(part["instance_id"])
        asked = prompts[prompts["instance_id"].isin(ids)]
        spec = specs.get(subset) or _run_spec(scenario, subset, model, asked, provenance)
        helm_ids = {r.instance_id: metadata_of(r.metadata).get("helm_instance_id", r.instance_id)
                    for r in part.itertuples()}  # fmt: skip
        states = _request_states(part, asked, completions, spec, helm_ids)
        part_scores = _with_run_shape(scores[scores["instance_id"].isin(ids)], part, asked)
        splits = dict(zip(part["instance_id"], part["split"]))
        per_instance = [
            {"instance_id": helm_ids[iid], "train_trial_index": 0,
             "stats": [_stat(helm_metric(r.metric), splits[iid], [r.value]) for r in rows.itertuples()]}
            for iid, rows in part_scores.groupby("instance_id", sort=False)
        ]  # fmt: skip
        # per metric and split, HELM's aggregate of one trial: a Stat of the mean over the split's instances
        stats = []
        for (name, split), rows in part_scores.assign(split=part_scores["instance_id"].map(splits)).groupby(
            ["metric", "split"]
        ):
            stats.append(_stat(helm_metric(name), split, [rows["value"].mean()]))
        stats += [_stat("num_instances", split, [n]) for split, n in part.groupby("split").size().items()]
        for r in run_metrics.itertuples():  # computed over the whole run only (ECE, bias): HELM's test split
            if r.metric not in per_instance_names:
                stats.append(_stat(helm_metric(r.metric), "test", [r.value]))
        stats += _worst_cases(stats, worst[worst["instance_id"].isin(ids)], imported=subset in specs)
        files = {
            "run_spec.json": spec,
            "scenario_state.json": {"adapter_spec": spec["adapter_spec"], "request_states": states},
            "per_instance_stats.json": per_instance,
            "stats.json": stats,
            "scenario.json": {
                "name": spec["groups"][0] if spec.get("groups") else scenario,
                "description": about,
                "tags": [],
            },  # fmt: skip
        }
        yield spec["name"].replace("/", "_"), files


def _with_run_shape(scores: pd.DataFrame, instances: pd.DataFrame, prompts: pd.DataFrame) -> pd.DataFrame:
    """The per-instance facts HELM shows as its "general information" (in-context examples, truncation, trials,
    references), from the prompts, where the scores do not have them already (a run imported from HELM does)."""
    if scores.empty or "num_train_instances" in set(scores["metric"]):
        return scores
    asked = prompts[prompts["instance_id"].isin(set(instances["instance_id"]))].groupby("instance_id")
    facts = pd.DataFrame(
        {
            "num_train_instances": asked["num_train_instances"].max(),
            "prompt_truncated": asked["truncated"].max().astype(float),
            "num_train_trials": 1.0,
            "num_references": instances.set_index("instance_id")["references"].map(lambda r: len(references_of(r))),
        }
    ).dropna()
    rows = facts.reset_index(names="instance_id").melt("instance_id", var_name="metric", value_name="value")
    return pd.concat([scores, rows.assign(family="efficiency")], ignore_index=True)


def _our_description(scenario: str) -> str:
    from holistic_dagster.config.catalog import Catalog

    try:
        return Catalog().scenario(scenario).description
    except HolisticError:
        return ""


# HELM's names for the worst case over an instance's perturbations (its robustness and fairness columns)
WORST_CASE = {
    "robustness": {"name": "robustness", "robustness": True, "fairness": False, "computed_on": "worst"},
    "fairness": {"name": "fairness", "robustness": False, "fairness": True, "computed_on": "worst"},
}


def _worst_cases(stats: list[dict], worst: pd.DataFrame, imported: bool) -> list[dict]:
    """HELM's robustness and fairness aggregates: ours, the mean of each metric's worst case over an instance's
    perturbations (the same definition); for a run imported from HELM without perturbations, what HELM itself
    writes then: the worst case over the original alone, i.e. each test-split aggregate again."""
    out = []
    for family, perturbation in WORST_CASE.items():
        rows = worst[worst["family"] == family]
        for name, values in rows.groupby("metric"):
            stat = _stat(helm_metric(name), "test", [values["value"].mean()])
            out.append({**stat, "name": {**stat["name"], "perturbation": perturbation}})
        if rows.empty and imported:
            for stat in stats:
                if stat["name"]["name"] != "num_instances":
                    out.append({**stat, "name": {**stat["name"], "perturbation": perturbation}})
    return out


def _stat(name: str, split: str, values: list[float]) -> dict[str, Any]:
    """HELM's Stat over `values`: count, sum, sum_squared, min, max, mean, variance (population), stddev."""
    count = len(values)
    total = float(sum(values))
    squares = float(sum(v * v for v in values))
    mean = total / count
    variance = max(squares / count - mean * mean, 0.0)
    return {"name": {"name": name, "split": split}, "count": count, "sum": total, "sum_squared": squares,
            "min": float(min(values)), "max": float(max(values)), "mean": mean, "variance": variance,
            "stddev": math.sqrt(variance)}  # fmt: skip


def _run_spec(scenario: str, subset: str, model: str, prompts: pd.DataFrame, provenance: pd.DataFrame) -> dict:
    """A run spec for one of our runs: HELM's group for the scenario, the subset as HELM's argument, the adapter
    as the prompts were asked (method, decoding, in-context examples)."""
    group = group_for_scenario(scenario)
    args = {SUBSET_ARGUMENT.get(group, "subset"): subset} if subset else {}
    method = prompts["adapter_method"].iat[0] if len(prompts) else "generation"
    generation = prompts[prompts["kind"] == "generate"]
    first = (generation if len(generation) else prompts).iloc[0] if len(prompts) else None
    decoding = json_object(provenance["decoding"].iat[0]) if len(provenance) else {}
    name = ",".join([*(f"{k}={v}" for k, v in args.items()), f"model={model}"])
    adapter = {
        "method": method,  # our adapter methods carry HELM's names
        "global_prefix": "", "global_suffix": "", "instructions": "", "input_prefix": "", "input_suffix": "",
        "reference_prefix": "", "reference_suffix": "", "output_prefix": "", "output_suffix": "",
        "instance_prefix": "", "substitutions": [],
        "max_train_instances": int(prompts["num_train_instances"].max()) if len(prompts) else 0,
        "max_eval_instances": None, "num_outputs": 1, "num_train_trials": 1, "num_trials": 1, "sample_train": True,
        "model_deployment": model, "model": model,
        "temperature": float(first.temperature) if first is not None else 0.0,
        "max_tokens": int(first.max_tokens) if first is not None else 0,
        "stop_sequences": json_list(first.stop) if first is not None else [],
        "multi_label": False,
    }  # fmt: skip
    return {
        "name": f"{group}:{name}",
        "scenario_spec": {"class_name": f"holistic_dagster.scenarios.{scenario}", "args": args},
        "adapter_spec": adapter,
        "metric_specs": [],
        "data_augmenter_spec": {
            "perturbation_specs": [],
            "should_augment_train_instances": False,
            "should_include_original_train": False,
            "should_skip_unchanged_train": False,
            "should_augment_eval_instances": False,
            "should_include_original_eval": False,
            "should_skip_unchanged_eval": False,
            "seeds_per_instance": 1,
            "decoding": decoding,
        },  # fmt: skip
        "groups": [group],
    }


def _request_states(instances: pd.DataFrame, prompts: pd.DataFrame, completions: pd.DataFrame, spec: dict,
                    helm_ids: dict[str, str]) -> list[dict]:  # fmt: skip
    by_id = {r.instance_id: r for r in instances.itertuples()}
    model = spec["adapter_spec"]["model"]
    states = []
    for p in prompts.itertuples():
        inst = by_id[p.instance_id]
        refs = references_of(inst.references)
        c = completions.loc[p.request_id] if p.request_id in completions.index else None
        tokens = list(zip(json_list(c.tokens), json_list(c.logprobs))) if c is not None else []
        is_score = p.kind == "score"
        state: dict[str, Any] = {
            "instance": {
                "input": {"text": inst.input},
                "references": [
                    {"output": {"text": r["output"]}, "tags": ["correct"] if r["correct"] else []} for r in refs
                ],  # fmt: skip
                "split": inst.split,
                "id": helm_ids[p.instance_id],
            },
            "train_trial_index": 0,
            "request": {
                "model_deployment": model,
                "model": model,
                "embedding": False,
                "prompt": p.prompt + p.continuation,
                "temperature": float(p.temperature),
                "num_completions": 1,
                "top_k_per_token": 1,
                "max_tokens": int(p.max_tokens),
                "stop_sequences": json_list(p.stop),
                "echo_prompt": is_score,
                "top_p": 1,
                "presence_penalty": 0,
                "frequency_penalty": 0,
            },  # fmt: skip
            "result": {
                "success": c is not None and not c.error,
                "embedding": [],
                "completions": []
                if c is None
                else [
                    {
                        "text": c.text,
                        "logprob": float(c.logprob),
                        "tokens": [{"text": t, "logprob": float(lp)} for t, lp in tokens],
                        **({"finish_reason": {"reason": c.finish_reason}} if c.finish_reason else {}),
                    }
                ],  # fmt: skip
                "cached": False,
                "request_time": float(c.latency_s) if c is not None else 0.0,
                **({"error": c.error} if c is not None and c.error else {}),
            },
            "num_train_instances": int(p.num_train_instances),
            "prompt_truncated": bool(p.truncated),
        }
        if spec["adapter_spec"]["method"] == "multiple_choice_joint" and refs:
            state["output_mapping"] = {chr(ord("A") + i): r["output"] for i, r in enumerate(refs)}
        if is_score and not pd.isna(p.choice_index):
            state["reference_index"] = int(p.choice_index)
            state["request_mode"] = "calibration" if p.is_null_context else "original"
        states.append(state)
    return states
