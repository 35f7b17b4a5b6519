"""Parity with HELM 0.5.16's own code, pinned: fixtures/helm_parity.json was written by bench/helm_parity.py from
`helm-run --dry-run` on the files in ../shared/data (HELM's choice of evaluated instances, and the sha256 of the
exact prompts it sends for a few of them per scenario, subset and adapter method; no data text is committed). Our
sampling and adapter, with suite conventions `helm`, must choose the same instances and build the same bytes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from holistic_dagster.adaptation.adapter import TokenBudget, adapter_as_asked, build_requests
from holistic_dagster.adaptation.examples import helm_examples, source_order
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.records import Instance, Reference, SourceFile
from holistic_dagster.scenarios import load_instances, sample_instances
from holistic_dagster.scenarios.sampling import helm_eval_indices
from holistic_dagster.settings import REPO_ROOT

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "helm_parity.json").read_text())
# the pinned prompts fit the peer model's 1,024 tokens whole: no budget ever truncates them or drops an example
UNBOUNDED = TokenBudget(max_context=10**6, count_tokens=lambda t: len(t) // 4 + 1, truncate_left=lambda t, n: t)


@pytest.fixture(scope="module")
def parity_catalog(tmp_path_factory) -> tuple[Catalog, dict[str, str]]:
    """A catalog with one suite version per fixture case (conventions helm, HELM's seed 0), and case -> version."""
    root = tmp_path_factory.mktemp("parity") / "assets"
    shutil.copytree(REPO_ROOT / "assets", root)
    versions = {}
    for n, (case, pinned) in enumerate(sorted(FIXTURE["cases"].items())):
        pin = {"max_eval_instances": FIXTURE["n"]}
        pin.update(
            {k: v for k, v in (("method", pinned["method"]), ("max_train_instances", pinned["shots"])) if v is not None}
        )
        if pinned["subset"]:
            pin["subsets"] = [pinned["subset"]]
        versions[case] = version = f"p{n}"
        suite = {"version": version, "conventions": "helm", "scenarios": {pinned["scenario"]: pin}}
        (root / "suites" / f"{version}.yaml").write_text(yaml.safe_dump(suite))
    return Catalog(root), versions


def _fast_first(keys):
    """Each case's first subset in the fast tier, its other subsets in the slow one (the full suite runs all)."""
    seen: set[str] = set()
    for key in keys:
        name = key.split("|")[0]
        yield pytest.param(key, marks=[pytest.mark.slow] if name in seen else [])
        seen.add(name)


@pytest.mark.parametrize("case", list(_fast_first(sorted(FIXTURE["cases"]))))
def test_instances_and_prompts_equal_helms(parity_catalog, case):
    catalog, versions = parity_catalog
    expected = FIXTURE["cases"][case]
    spec, pin = catalog.resolved_scenario(versions[case], expected["scenario"])
    instances = sample_instances(spec, pin, load_instances(spec))
    assert sorted(i.instance_id for i in instances if i.split == "test") == expected["instances"]
    adapter = adapter_as_asked(spec.adapter, spec.adapter.method, pin.conventions)
    requests = build_requests(instances, adapter, catalog.templates_dir, UNBOUNDED, pin.seed, "helm")
    for want in expected["prompts"]:
        mine = [r for r in requests if r.instance_id == want["instance_id"]]
        if want["mode"] == "generate":
            (request,) = mine
            text = request.prompt
        else:
            null = want["mode"] == "calibration"
            (request,) = [r for r in mine if r.choice_index == want["reference_index"] and r.is_null_context == null]
            text = request.prompt + request.continuation
        assert hashlib.sha256(text.encode()).hexdigest() == want["sha256"], (case, want, text)


SRC = SourceFile("test://pool.csv", "0", "test")


def row(n: int, label: str | None) -> Instance:
    refs = (Reference(label, True),) if label is not None else (Reference("x", False),)
    return Instance(f"t/{n}", "train", f"q{n}", refs, SRC, f"row {n}")


def test_helm_examples_follow_helms_documented_example_and_order():
    # HELM's sample_examples docstring: from [no, yes, yes] choose 2 -> a "yes" first (the more frequent label)
    pool = [row(1, "no"), row(2, "yes"), row(3, "yes")]
    assert [e.references[0].output for e in helm_examples(pool, 2, 0)] == ["yes", "no"]
    # the pool is read in file order whatever order it arrives in: row 10 after row 9, not after row 1
    shuffled = [row(n, "a" if n % 2 else "b") for n in (10, 3, 1, 9, 2)]
    assert helm_examples(shuffled, 4, 0) == helm_examples(sorted(shuffled, key=source_order), 4, 0)
    assert [i.record for i in sorted(shuffled, key=source_order)] == ["row 1", "row 2", "row 3", "row 9", "row 10"]


def test_helm_examples_end_when_the_labelled_pool_runs_out():
    # HELM loops forever here (its label cycle never ends); ours takes what there is, then the unlabelled ones
    labelled = [row(1, "a"), row(2, "b")]
    unlabelled = [Instance(f"u/{n}", "train", f"u{n}", (), SRC, f"row {n + 10}") for n in range(3)]
    chosen = helm_examples(labelled + unlabelled, 4, 0)
    assert len(chosen) == 4 and set(chosen[:2]) == set(labelled) and set(chosen[2:]) < set(unlabelled)
    assert helm_examples(labelled, 5, 0) in ([row(1, "a"), row(2, "b")], [row(2, "b"), row(1, "a")])


def test_helm_eval_indices_are_numpys_seeded_choice_without_replacement():
    drawn = helm_eval_indices(100, 5, 0)
    assert len(set(drawn)) == 5 and all(0 <= i < 100 for i in drawn)
    assert drawn == helm_eval_indices(100, 5, 0) != helm_eval_indices(100, 5, 1)
    assert helm_eval_indices(4, 5, 0) == [0, 1, 2, 3]  # fewer than asked: all, in order
