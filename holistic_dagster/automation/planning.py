"""What automation decides, without Dagster: what identifies a model (its registry entry, and for entries
with `watch: true` the revision its server reports), which runs a registry sensor tick requests, and which
evaluated partitions are stale. holistic_dagster/defs/evaluation.py turns these decisions into Dagster requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

REASON_TAG = "holistic/reason"  # the run tag saying why automation requested a run


# --- the registry sensor's plan ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetsRun:
    """Load a suite version's datasets (before its evaluations)."""

    version: str

    @property
    def run_key(self) -> str:
        return f"datasets:{self.version}"


@dataclass(frozen=True)
class EvaluateRun:
    """Evaluate one model on one suite version: prompts, completions, scores of the suite's scenarios."""

    model: str
    version: str
    run_key: str
    reason: str

    @property
    def tags(self) -> dict[str, str]:
        return {REASON_TAG: self.reason}


@dataclass
class RegistryPlan:
    datasets: list[DatasetsRun] = field(default_factory=list)
    evaluations: list[EvaluateRun] = field(default_factory=list)
    cursor: dict = field(default_factory=dict)
    log: list[str] = field(default_factory=list)


def read_cursor(text: str | None) -> dict | None:
    """The sensor's cursor: {models: {name: identity}, versions: [...], pending: [[model, version, identity,
    reason], ...]}; None before the first tick."""
    return json.loads(text) if text else None


def write_cursor(cursor: dict) -> str:
    return json.dumps(cursor)


def plan_registry_tick(
    previous: dict | None,
    identities: Mapping[str, str],
    versions: Sequence[str],
    newest: str,
    datasets_ready: Callable[[str], bool],
) -> RegistryPlan:
    """One tick of the model registry sensor. A new model or a new revision of one is evaluated on the newest
    suite version; a new suite version is evaluated for every registered model, its datasets first: those
    evaluations wait in the cursor's `pending` until the datasets are ready. The first tick (no cursor)
    records the registry as it is and requests nothing (no run flood); a model removed from the registry is
    dropped. Run keys name model, version and identity, so a repeated request is a no-op."""
    if previous is None:
        return RegistryPlan(
            cursor={"models": dict(identities), "versions": list(versions), "pending": []},
            log=[f"first tick: {len(identities)} model(s) and {len(versions)} suite version(s) recorded"],
        )
    seen_models, seen_versions = previous.get("models", {}), previous.get("versions", [])
    pending = [tuple(p) for p in previous.get("pending", [])]
    for name, identity in identities.items():
        if seen_models.get(name) != identity:
            pending.append((name, newest, identity, "new model" if name not in seen_models else "new revision"))
    for version in versions:
        if version not in seen_versions:
            pending += [(name, version, identity, "new suite version") for name, identity in identities.items()]
    pending = [p for p in dict.fromkeys(pending) if p[0] in identities]  # removed from the registry meanwhile
    ready = {version: datasets_ready(version) for version in sorted({p[1] for p in pending})}
    plan = RegistryPlan(datasets=[DatasetsRun(v) for v, done in ready.items() if not done])
    waiting = []
    for name, version, identity, reason in pending:
        if not ready[version]:
            waiting.append([name, version, identity, reason])
            continue
        plan.evaluations.append(EvaluateRun(name, version, f"evaluate:{name}:{version}:{identity}", reason))
    plan.cursor = {"models": dict(identities), "versions": list(versions), "pending": waiting}
    return plan


# --- stale partitions -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptsBuild:
    """The latest prompts materialization of one scenario for one model x version, and what it was built
    from: the scenario's code version, and which dataset materialization of the version."""

    scenario: str
    model: str
    version: str
    code_version: str | None
    dataset_used: str | None  # the dataset materialization it read (an event id); None: not recorded
    # (event id, data version) of the version's dataset materializations, newest first
    dataset_history: Sequence[tuple[str, str | None]] = ()


def find_stale(builds: Iterable[PromptsBuild], code_versions: Mapping[str, str]) -> dict[tuple[str, str], set[str]]:
    """{(model, version): reasons} for every evaluated partition whose prompts were built by another code
    version of the scenario than the current one, or from a dataset whose data version is not the latest's
    (a dataset rebuilt with the same content does not count)."""
    stale: dict[tuple[str, str], set[str]] = {}
    for build in builds:
        reasons = set()
        if build.code_version != code_versions.get(build.scenario):
            reasons.add(f"{build.scenario} definition changed")
        if build.dataset_used and build.dataset_history:
            data_versions = dict(build.dataset_history)
            if data_versions.get(build.dataset_used) != build.dataset_history[0][1]:
                reasons.add(f"{build.scenario} dataset changed")
        if reasons:
            stale.setdefault((build.model, build.version), set()).update(reasons)
    return stale


def stale_runs(stale: Mapping[tuple[str, str], set[str]], tick: str) -> list[EvaluateRun]:
    """One re-evaluation per stale partition, keyed by the schedule tick."""
    return [
        EvaluateRun(model, version, f"stale:{model}:{version}:{tick}", "stale: " + ", ".join(sorted(why)))
        for (model, version), why in sorted(stale.items())
    ]


# --- completing efficient evaluations --------------------------------------------------------------------------


@dataclass(frozen=True)
class CompleteRun:
    """Evaluate a model in full on the scenarios whose estimate left its place undecided."""

    model: str
    version: str
    scenarios: tuple[str, ...]

    @property
    def run_key(self) -> str:
        return f"complete:{self.model}:{self.version}:{','.join(self.scenarios)}"

    @property
    def tags(self) -> dict[str, str]:
        return {REASON_TAG: f"estimate undecided on {', '.join(self.scenarios)}"}


def undecided_estimates(estimates: Iterable[Mapping], measured: Iterable[Mapping]) -> list[CompleteRun]:
    """For each model with estimated cells (rows of the `estimates` table), the scenarios whose interval holds
    another model's measured value of the same metric (rows: model, version, scenario, metric, value): there the
    estimate cannot say which of the two is better, so the scenario is evaluated in full."""
    values: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
    for m in measured:
        if m["value"] is not None and m["value"] == m["value"]:
            values.setdefault((m["version"], m["scenario"], m["metric"]), []).append((m["model"], m["value"]))
    undecided: dict[tuple[str, str], list[str]] = {}
    for e in estimates:
        others = values.get((e["version"], e["scenario"], e["metric"]), [])
        if any(model != e["model"] and e["ci_low"] <= value <= e["ci_high"] for model, value in others):
            undecided.setdefault((e["model"], e["version"]), []).append(e["scenario"])
    return [CompleteRun(model, version, tuple(sorted(s))) for (model, version), s in sorted(undecided.items())]
