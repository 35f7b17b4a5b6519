"""The dataset stage: a suite version's sample of a scenario's instances, their perturbed copies, the source
files they came from (with checksums), and which metric families apply."""

from __future__ import annotations

from typing import Any

import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.metrics import FAMILIES, PERTURBATION_FAMILIES
from holistic_dagster.perturbations import perturb_instances
from holistic_dagster.records import sha256_json
from holistic_dagster.scenarios import load_instances, sample_instances
from holistic_dagster.scenarios.loaders import companion_sources
from holistic_dagster.scenarios.spec import ScenarioSpec
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse.rows import instance_row, source_file_row
from holistic_dagster.warehouse.tables.core import INSTANCES, SOURCE_FILES


def build_dataset(stage: StageContext, version: str, scenario: str) -> dict[str, Any]:
    spec, pin = stage.catalog.resolved_scenario(version, scenario)
    instances = sample_instances(spec, pin, load_instances(spec, stage.deployment.data_dirs))
    if not any(i.split == "test" for i in instances):  # checked before anything is replaced
        raise HolisticError(f"scenario {scenario!r}: no test instances in its source: nothing to evaluate")
    chosen = stage.catalog.perturbations(version, scenario)
    perturbed = perturb_instances(instances, [p for names in chosen.values() for p in names], pin.seed)
    instances = instances + perturbed
    sources = {i.source.uri: i.source for i in instances}
    sources |= {s.uri: s for s in companion_sources(spec, list(sources.values()))}  # (no instance names them)
    keys = {"version": version, "scenario": scenario}
    files = SOURCE_FILES.frame(source_file_row(s, **keys) for s in sources.values())
    rows = INSTANCES.frame(instance_row(i, **keys) for i in instances)
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


def _applicability(spec: ScenarioSpec, family: str, perturbations: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    if family in PERTURBATION_FAMILIES and family in spec.families and family not in perturbations:
        return {"applies": False, "detail": "the suite version chooses no perturbations"}
    if family not in spec.families:
        reasons = {
            "accuracy": "no references to compare with",
            "calibration": "no exact-match answer whose probability could be calibrated (as in HELM)",
            "bias": "outputs are choices or short answers",
            "toxicity": "outputs are choices or short answers",
            "safety": "its requests are not harmful ones to refuse (HELM Safety's scenarios: harm_bench, "
            "simple_safety_tests, xstest)",
        }
        return {"applies": False, "detail": reasons.get(family, "the scenario does not declare it")}
    if family in perturbations:
        return {"applies": True, "detail": ", ".join(perturbations[family])}
    return {"applies": True, "detail": ""}
