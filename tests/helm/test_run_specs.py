"""Every entry of the HELM leaderboard suites we ship (helm-lite-v1, helm-classic-v1) against what HELM 0.5.16's own
run-spec functions give for the leaderboard's run entry (tests/helm/fixtures/helm_run_specs.json, made by
bench/helm_run_specs.py in the peer environment): the method, instructions, prefixes, in-context examples,
decoding, instance count and perturbations are equal, or the difference is a listed deviation with why and the
setting that gives HELM's (holistic_dagster/helm/run_specs.py). Nothing unlisted, nothing listed that no longer
differs, no entry on either side without the other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.helm.run_specs import (
    AT_HELMS_SIZE,
    DEVIATIONS,
    NOT_BUILT_OFFLINE,
    SIZES,
    as_run_spec,
    deviation_key,
    differences,
)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "helm_run_specs.json").read_text())
SPECS = {k: v for k, v in FIXTURE["specs"].items() if not k.startswith("override|")}
# a method a suite may pin on a scenario whose own method is another: HELM's run spec for that method
OVERRIDES = {k: v for k, v in FIXTURE["specs"].items() if k.startswith("override|")}
SUITES = ("helm-lite-v1", "helm-classic-v1")


def ours() -> set[tuple[str, str, str]]:
    catalog = Catalog()
    entries = set()
    for version in SUITES:
        for scenario in catalog.suite(version).scenarios:
            spec, _ = catalog.resolved_scenario(version, scenario)
            entries |= {(version, scenario, subset) for subset in (spec.subsets or ("",))}
    return entries


def keyed(key: str) -> tuple[str, str, str]:
    version, scenario, subset = key.split("|")
    return version, scenario, subset


def test_the_fixture_says_how_it_was_made_and_holds_every_entry_of_both_suites():
    assert "crfm-helm 0.5.16" in FIXTURE["made_by"] and "construct_run_specs" in FIXTURE["made_by"]
    helm = {keyed(k) for k in SPECS}
    missing = ours() - helm
    assert not missing, f"suite entries without HELM's run spec (run bench/helm_run_specs.py): {sorted(missing)}"
    unlisted = {(v, s) for v, s, _ in helm - ours() if (v, s, "entry") not in DEVIATIONS}
    assert not unlisted, f"HELM runs entries our suites leave out, without a listed reason: {sorted(unlisted)}"
    not_built = {(v, s) for (v, s, _), spec in ((keyed(k), x) for k, x in SPECS.items()) if "not_built" in spec}
    assert not_built == NOT_BUILT_OFFLINE


def test_every_difference_from_helms_run_spec_is_a_listed_deviation():
    # the suites at HELM's size are compared with their base's run specs: the same entries, HELM's sample sizes
    catalog = Catalog()
    unlisted, used = [], set()
    for version, base in [*((v, v) for v in SUITES), *AT_HELMS_SIZE.items()]:
        for key, helm in sorted(SPECS.items()):
            _, scenario, subset = keyed(key)
            if keyed(key)[0] != base or "not_built" in helm or (base, scenario, subset) not in ours():
                continue
            for field, (mine, theirs) in differences(as_run_spec(catalog, version, scenario, subset), helm).items():
                found = deviation_key(version, scenario, field)
                if found is None:
                    unlisted.append(f"{version}|{scenario}|{subset} {field}: ours {mine!r}, HELM's {theirs!r}")
                else:
                    used.add(found)
    assert not unlisted, "differences from HELM's run specs that no deviation lists:\n" + "\n".join(unlisted)
    stale = {k for k in DEVIATIONS if k[2] != "entry"} - used
    assert not stale, f"listed deviations that no longer differ (remove them): {sorted(stale)}"


@pytest.mark.parametrize("sized", sorted(AT_HELMS_SIZE))
def test_a_suite_at_helms_size_is_its_base_at_helms_sample_sizes(sized):
    catalog, base = Catalog(), AT_HELMS_SIZE[sized]
    assert catalog.suite(sized).scenarios.keys() == catalog.suite(base).scenarios.keys()
    assert not catalog.suite(sized).automatic and sized not in catalog.automatic_versions()
    assert base in catalog.automatic_versions()
    assert not any(k[0] == sized and why is SIZES for k, why in DEVIATIONS.items())
    sizes = {}
    for key, helm in SPECS.items():
        _, scenario, subset = keyed(key)
        if keyed(key)[0] == base and "not_built" not in helm:
            mine = as_run_spec(catalog, sized, scenario, subset)
            assert {f: v for f, v in mine.items() if f != "max_eval_instances"} == {
                f: v for f, v in as_run_spec(catalog, base, scenario, subset).items() if f != "max_eval_instances"
            }
            sizes[(scenario, subset)] = (mine["max_eval_instances"], helm["max_eval_instances"])
    differ = {entry for entry, (mine, theirs) in sizes.items() if mine != theirs}
    assert differ <= {("civil_comments", "white")}, differ  # the listed one: HELM's 120 for one demographic
    assert {mine for mine, _ in sizes.values()} <= {1000, 200, 110}


@pytest.mark.parametrize("key", ["helm-lite-v1|math_chain_of_thought|algebra:level_1", "helm-lite-v1|narrative_qa|"])
def test_the_decoding_the_issue_found_cut_for_a_cpu_is_helms(key):
    version, scenario, subset = keyed(key)
    mine = as_run_spec(Catalog(), version, scenario, subset)
    assert mine["max_tokens"] == SPECS[key]["max_tokens"] and mine["max_tokens"] in (400, 100)


@pytest.mark.parametrize("key", sorted(OVERRIDES))
def test_a_method_pinned_by_a_suite_gets_helms_whole_layout_for_it(key, tmp_path):
    # HellaSwag's own method is separate; a suite asking it jointly (5-shot) gets HELM's commonsense joint layout,
    # instructions and Question/Answer cues included, not the bare question the separate layout sends
    _, scenario, method = key.split("|")
    catalog = _catalog_with(
        tmp_path, f"  {scenario}: {{max_eval_instances: 10, seed: 0, method: {method}, max_train_instances: 5}}"
    )
    found = differences(as_run_spec(catalog, "pinned", scenario, ""), OVERRIDES[key])
    assert set(found) <= {"max_eval_instances", "num_outputs"}, found  # the sizes, and joint's 5 identical outputs
    assert as_run_spec(catalog, "pinned", scenario, "")["method"] == method


def test_a_joint_method_pinned_on_a_scenario_without_its_layout_is_refused(tmp_path):
    from holistic_dagster.errors import CatalogError

    catalog = _catalog_with(tmp_path, "  hellaswag: {max_eval_instances: 10, method: multiple_choice_joint}")
    scenario = tmp_path / "assets" / "scenarios" / "hellaswag.yaml"
    text = scenario.read_text()
    for cue, bare in (
        ('input_prefix: "Question: "', 'input_prefix: ""'),
        ('output_prefix: "Answer: "', 'output_prefix: " "'),
    ):
        assert cue in text
        text = text.replace(cue, bare)  # the layout HellaSwag had before: the separate one's
    scenario.write_text(text)
    with pytest.raises(CatalogError, match=r"scenarios/hellaswag.yaml declares no layout for it"):
        catalog.resolved_scenario("pinned", "hellaswag")


def _catalog_with(tmp_path, entry: str) -> Catalog:
    import shutil

    from holistic_dagster.settings import REPO_ROOT

    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    suite = "version: pinned\nconventions: helm\nscenarios:\n" + entry + "\n"
    (tmp_path / "assets" / "suites" / "pinned.yaml").write_text(suite)
    return Catalog(tmp_path / "assets")


SHIPPED_PARITY = Path(__file__).parents[2] / "bench" / "results" / "helm_parity_shipped.json"


def test_the_parity_table_of_the_shipped_suites_covers_every_entry_and_lists_every_difference():
    """bench/helm_parity_shipped.py compares each entry as shipped with HELM's own requests for its run entry: every
    entry of both suites is a row or is listed with why it cannot be compared here, and a row whose prompts differ
    from HELM's names its labelled deviation. A suite changed since the table was made fails here: run it again."""
    table = json.loads(SHIPPED_PARITY.read_text(encoding="utf-8"))
    rows = {(r["suite"], r["case"].split(" ", 1)[1], r["subset"]): r for r in table["rows"]}
    left = {(suite, scenario) for suite, why in table["left"].items() for scenario in why}
    for suite, scenario, subset in ours():
        assert (suite, scenario, subset) in rows or (suite, scenario) in left, (suite, scenario, subset)
    assert {(s, sc) for s, sc, _ in rows} | left == {(s, sc) for s, sc, _ in ours()}
    for key, row in rows.items():
        equal = row["instances_equal"] and row["prompts_equal"].split("/")[0] == row["prompts_equal"].split("/")[1]
        assert equal or row["note"].startswith("labelled deviation"), key
        assert not row["decoding_differences"], key
    assert all(why for reasons in table["left"].values() for why in reasons.values())
