"""Our suite entries in the terms of HELM's run specs, to compare with what HELM's own run-spec functions give for
the same entries (tests/helm/fixtures/helm_run_specs.json, made by bench/helm_run_specs.py): the method, the
instructions and prefixes as asked, the in-context examples, the decoding, the instance count and the
perturbations. Where ours differs from HELM's on purpose, the difference is listed in DEVIATIONS with why and the
one setting that gives HELM's; a difference not listed is a bug the test names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from holistic_dagster.adaptation.adapter import adapter_as_asked
from holistic_dagster.adaptation.templating import evaluate_expression, render, string_template
from holistic_dagster.config.catalog import Catalog

# HELM's perturbation classes (data_augmentation=canonical) and ours
PERTURBATION_NAMES = {
    "MildMixPerturbation": "mild_mix",
    "DialectPerturbation": "dialect",
    "GenderPerturbation": "gender",
    "PersonNamePerturbation": "person_name",
    "LowerCasePerturbation": "lowercase",
    "TyposPerturbation": "typos",
    "SynonymPerturbation": "synonym",
    "ContractionPerturbation": "contraction",
    "ExpansionPerturbation": "expansion",
    "MisspellingPerturbation": "misspelling",
    "SpacePerturbation": "space",
}
# what is compared; decoding only where the method generates (a separate multiple-choice request generates nothing)
FIELDS = ("method", "instructions", "input_prefix", "output_prefix", "max_train_instances", "max_tokens",
          "stop_sequences", "temperature", "num_outputs", "max_eval_instances", "perturbations")  # fmt: skip
DECODING = ("max_tokens", "stop_sequences", "temperature", "num_outputs")
GENERATING = ("generation", "multiple_choice_joint", "ranking_binary")


@dataclass(frozen=True)
class Deviation:
    why: str
    helm_setting: str  # the one setting that gives HELM's value


ANY = "*"  # every scenario (or subset) of the suite
SIZES = Deviation(
    "sample sizes a 2-core CPU finishes in minutes (the suite's description says so)",
    "the suite at HELM's size: helm-lite-v1-helm-size, helm-classic-v1-helm-size (HELM's max_eval_instances: 1,000 "
    "per entry; Classic's MMLU 200, CivilComments 110-120, RAFT 90-100)",
)
PERTURBATIONS = Deviation(
    "this project's robustness and fairness perturbations (mild_mix and lowercase, dialect and gender), which compare "
    "with HELM's canonical set in kind, not in value; HELM's person-name substitution is not implemented",
    "the suite's perturbations: {robustness: [mild_mix], fairness: [dialect, gender]} (person_name: none here)",
)
JOINT_OUTPUTS = Deviation(
    "HELM's joint multiple-choice spec asks 5 completions at temperature 0, which are one answer five times; we ask "
    "once",
    "num_outputs: 5 in the suite entry",
)
# (suite, scenario, field) -> why ours differs, and how to get HELM's
DEVIATIONS: dict[tuple[str, str, str], Deviation] = {
    ("helm-lite-v1", ANY, "max_eval_instances"): SIZES,
    ("helm-classic-v1", ANY, "max_eval_instances"): SIZES,
    ("helm-classic-v1", ANY, "perturbations"): PERTURBATIONS,
    **{(s, sc, "num_outputs"): JOINT_OUTPUTS for s, sc in (("helm-lite-v1", "mmlu"), ("helm-lite-v1", "med_qa"),
       ("helm-lite-v1", "openbookqa"), ("helm-classic-v1", "mmlu"), ("helm-classic-v1", "truthfulqa"))},
    **{("helm-classic-v1", sc, field): Deviation(
        "one in-context article, which a CPU and a small model's window hold (HELM: 5), and greedy decoding, so that "
        "a rerun gives the same summary (HELM samples at 0.3)",
        "max_train_instances: 5 and temperature: 0.3 in the suite entry") for sc in ("cnndm", "xsum")
       for field in ("max_train_instances", "temperature")},
    ("helm-lite-v1", "math_chain_of_thought", "entry"): Deviation(
        "precalculus is kept back: its problems are the held-out set HELM's prompts were compared on (545 of 546 "
        "equal, bench/results/helm_parity.md)", "subsets: add precalculus:level_1 in the suite entry"),
    ("helm-classic-v1", "raft", "entry"): Deviation(
        "9 of RAFT's 11 tasks have data here (twitter_complaints and tai_safety_research do not)",
        "subsets: add them in the suite entry, with their data in the data folder"),
}  # fmt: skip
# the same suites at HELM's own sample sizes (assets/suites/<base>-helm-size.yaml: `extends` the base): every
# deviation of the base but the sizes, and the one size per scenario where HELM's differs by subset
AT_HELMS_SIZE = {"helm-lite-v1-helm-size": "helm-lite-v1", "helm-classic-v1-helm-size": "helm-classic-v1"}
DEVIATIONS |= {
    (sized, scenario, field): why
    for sized, base in AT_HELMS_SIZE.items()
    for (version, scenario, field), why in list(DEVIATIONS.items())
    if version == base and why is not SIZES
}
DEVIATIONS[("helm-classic-v1-helm-size", "civil_comments", "max_eval_instances")] = Deviation(
    "one sample size per scenario: HELM's 110 per demographic, and 120 for `white`",
    "a suite of its own pinning civil_comments to `subsets: [white]` at max_eval_instances: 120",
)
# HELM's run-spec functions that read a downloaded file to build the spec (LegalBench's prompt settings, RAFT's
# instructions): offline, the fixture cannot hold them, and the test says which these are
NOT_BUILT_OFFLINE = {("helm-lite-v1", "legalbench"), ("helm-classic-v1", "raft")}


def as_run_spec(catalog: Catalog, version: str, scenario: str, subset: str) -> dict[str, Any]:
    """One suite entry as asked, in HELM's run-spec fields (instructions and prefixes rendered for the subset)."""
    spec, pin = catalog.resolved_scenario(version, scenario)
    adapter = adapter_as_asked(spec.adapter, spec.adapter.method, pin.conventions)
    named = {"subset": subset.replace("_", " "), "metadata": _subset_metadata(spec, subset)}

    def rendered(text: str) -> str:
        return render(string_template(text), named) if "{{" in text else text

    perturbations = sorted({p for names in catalog.perturbations(version, scenario).values() for p in names})
    return {
        "method": adapter.method,
        "instructions": rendered(adapter.instructions),
        "input_prefix": rendered(adapter.input_prefix),
        "output_prefix": rendered(adapter.output_prefix),
        "max_train_instances": adapter.max_train_instances,
        "max_tokens": adapter.max_tokens,
        "stop_sequences": list(adapter.stop_sequences),
        "temperature": adapter.temperature,
        "num_outputs": adapter.num_outputs,
        "max_eval_instances": pin.max_eval_instances,
        "perturbations": [p for p in perturbations if p != "contrast_set"],
    }


def _subset_metadata(spec, subset: str) -> dict[str, Any]:
    """The instance metadata that depends on the subset alone (WMT14's source language), as the loader computes it."""
    found = {}
    for name, source in (spec.instance.metadata if spec.instance else {}).items():
        try:
            found[name] = evaluate_expression(source, {"scenario": {"subset": subset, "split": "test"}})
        except Exception:  # a record's own field: not known without the data
            continue
    return found


def helm_terms(helm: dict[str, Any]) -> dict[str, Any]:
    """A fixture's run spec in the terms our adapter spec uses for the same prompt (tests/adaptation's parity tests
    check the prompts byte for byte):
    - HELM's perturbation classes under our names;
    - instructions without their final line break (HELM keeps it in the text, we in the layout);
    - joint multiple choice: no stop sequence (HELM's joint adapter sends its requests without one);
    - separate multiple choice: HELM's output_prefix " " is the space our continuation " <choice>" starts with;
    - binary ranking: HELM counts in-context queries, each two example passages (relevant, not), we count the
      passages; its reference_prefix ("Passage: ") is our input_prefix (the query's "Query: " is the template's)."""
    out = {**helm, "perturbations": sorted(PERTURBATION_NAMES.get(p, p) for p in helm["perturbations"])}
    out["instructions"] = helm["instructions"].rstrip("\n")
    if helm["method"] == "multiple_choice_joint":
        out["stop_sequences"] = []
    if helm["method"].startswith("multiple_choice_separate"):
        out["output_prefix"] = helm["output_prefix"].removeprefix(" ")
    if helm["method"] == "ranking_binary":
        out["max_train_instances"] = 2 * helm["max_train_instances"]
        out["input_prefix"] = helm["reference_prefix"]
    return out


def differences(ours: dict[str, Any], helm: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{field: (ours, HELM's)} where they differ."""
    helm = helm_terms(helm)
    fields = [f for f in FIELDS if f not in DECODING or helm["method"] in GENERATING]
    return {f: (ours[f], helm[f]) for f in fields if ours[f] != helm[f]}


def deviation_key(version: str, scenario: str, field: str) -> tuple[str, str, str] | None:
    """The DEVIATIONS entry that covers a difference: the scenario's own, else the suite-wide one."""
    return next((k for k in ((version, scenario, field), (version, ANY, field)) if k in DEVIATIONS), None)


def deviation(version: str, scenario: str, field: str) -> Deviation | None:
    key = deviation_key(version, scenario, field)
    return DEVIATIONS[key] if key else None
