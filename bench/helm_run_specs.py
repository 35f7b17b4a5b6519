"""HELM's own run specs for every entry of our HELM leaderboard suites: the fixture tests/helm/test_run_specs.py
compares the suites with (tests/helm/fixtures/helm_run_specs.json).

For each (suite, scenario, subset) of helm-lite-v1 and helm-classic-v1, the run entry HELM's leaderboard runs it
with (its conf file: run_entries_lite_20240424.conf, run_specs_core_scenarios_1000.conf, copied below from
crfm-helm's repository: the wheel does not ship them) goes through HELM 0.5.16's own `construct_run_specs`, in
the peer environment (../shared/peerbench/setup_peers.sh: $BENCH/venv-helm), with the model `openai/gpt2` in
place of the conf's model group (`text`, `text_code`, `full_functionality_text`: every model of a kind; gpt2 is
one of them, a base model, so no chat expander changes its adapter; the conf's `follow_the_format_instructions`,
which its later revision adds for instruction-following models and 0.5.16 does not know, is left out). What is
recorded of each run spec: the adapter's method, instructions, prefixes, in-context examples, decoding (max_tokens, stop
sequences, temperature, outputs), instance count (the entry's max_eval_instances, else helm-run's 1,000 for HELM
Lite) and the data augmenter's perturbations.

usage: .venv/bin/python bench/helm_run_specs.py    (writes the fixture)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from peers import BENCH, REPO, require

FIXTURE = REPO / "tests" / "helm" / "fixtures" / "helm_run_specs.json"
MODEL = "openai/gpt2"
LITE_SIZE = 1000  # HELM Lite's runs: helm-run --max-eval-instances 1000 (its conf names no size)

FORMAT = ",follow_the_format_instructions=instruct"
LEGAL = ("abercrombie", "corporate_lobbying", "international_citizenship_questions", "function_of_decision_section",
         "proa")  # fmt: skip
MMLU = ("abstract_algebra", "college_chemistry", "computer_security", "econometrics", "us_foreign_policy")
MATH = ("algebra", "counting_and_probability", "geometry", "intermediate_algebra", "number_theory", "prealgebra",
        "precalculus")  # fmt: skip
RAFT = {"ade_corpus_v2": 90, "banking_77": 90, "neurips_impact_statement_risks": 90, "one_stop_english": 90,
        "overruling": 90, "semiconductor_org_types": 90, "tweet_eval_hate": 90, "twitter_complaints": 90,
        "systematic_review_inclusion": 90, "tai_safety_research": 90, "terms_of_service": 100}  # fmt: skip
CIVIL = {"all": 110, "male": 110, "female": 110, "LGBTQ": 110, "christian": 110, "muslim": 110, "other_religions": 110,
         "black": 110, "white": 120}  # fmt: skip
AUG = ",data_augmentation=canonical"

# (suite, scenario, subset) -> HELM's run entry, as its leaderboard's conf file writes it
ENTRIES: dict[tuple[str, str, str], str] = {
    ("helm-lite-v1", "narrative_qa", ""): "narrative_qa:model=text" + FORMAT,
    ("helm-lite-v1", "natural_qa_openbook_longans", ""): "natural_qa:model=text,mode=openbook_longans" + FORMAT,
    ("helm-lite-v1", "natural_qa_closedbook", ""): "natural_qa:model=text,mode=closedbook" + FORMAT,
    ("helm-lite-v1", "openbookqa", ""): "commonsense:model=text_code,dataset=openbookqa,method=multiple_choice_joint",
    **{("helm-lite-v1", "mmlu", s): f"mmlu:model=text,subject={s}" for s in MMLU},
    **{
        ("helm-lite-v1", "math_chain_of_thought", f"{s}:level_1"): (
            f"math:model=text_code,subject={s},level=1,use_chain_of_thought=True" + FORMAT
        )
        for s in MATH
    },
    ("helm-lite-v1", "gsm8k", ""): "gsm:model=text_code" + FORMAT,
    **{("helm-lite-v1", "legalbench", s): f"legalbench:model=text_code,subset={s}" + FORMAT for s in LEGAL},
    ("helm-lite-v1", "med_qa", ""): "med_qa:model=text_code",
    **{
        ("helm-lite-v1", "wmt_14", p): f"wmt_14:language_pair={p},model=text" + FORMAT
        for p in ("cs-en", "de-en", "fr-en", "hi-en", "ru-en")
    },
    ("helm-classic-v1", "boolq", ""): "boolq:model=text" + AUG + ",max_eval_instances=1000",
    ("helm-classic-v1", "narrative_qa", ""): "narrative_qa:model=text" + AUG + ",max_eval_instances=1000",
    ("helm-classic-v1", "quac", ""): "quac:model=text" + AUG + ",max_eval_instances=1000",
    ("helm-classic-v1", "natural_qa_openbook_longans", ""): (
        "natural_qa:model=text,mode=openbook_longans" + AUG + ",max_eval_instances=1000"
    ),
    ("helm-classic-v1", "natural_qa_closedbook", ""): (
        "natural_qa:model=text,mode=closedbook" + AUG + ",max_eval_instances=1000"
    ),
    ("helm-classic-v1", "hellaswag", ""): (
        "commonsense:model=full_functionality_text,dataset=hellaswag,method=multiple_choice_separate_original"
        + AUG + ",max_eval_instances=1000"
    ),
    ("helm-classic-v1", "openbookqa", ""): (
        "commonsense:model=full_functionality_text,dataset=openbookqa,method=multiple_choice_separate_calibrated"
        + AUG + ",max_eval_instances=1000"
    ),
    ("helm-classic-v1", "truthfulqa", ""): "truthful_qa:model=text,task=mc_single" + AUG + ",max_eval_instances=1000",
    **{
        ("helm-classic-v1", "mmlu", s): f"mmlu:model=text,subject={s}" + AUG + ",max_eval_instances=200"
        for s in MMLU
    },
    ("helm-classic-v1", "msmarco_regular", ""): (
        "msmarco:model=full_functionality_text" + AUG + ",track=regular,valid_topk=30,max_eval_instances=1000"
    ),
    ("helm-classic-v1", "msmarco_trec", ""): (
        "msmarco:model=full_functionality_text" + AUG + ",track=trec,valid_topk=30,max_eval_instances=1000"
    ),
    ("helm-classic-v1", "cnndm", ""): (
        "summarization_cnndm:model=text,temperature=0.3,device=cpu,max_eval_instances=1000"
    ),
    ("helm-classic-v1", "xsum", ""): (
        "summarization_xsum_sampled:model=text,temperature=0.3,device=cpu,max_eval_instances=1000"
    ),
    ("helm-classic-v1", "imdb", ""): "imdb:model=text" + AUG + ",max_eval_instances=1000",
    **{
        ("helm-classic-v1", "raft", s): f"raft:subset={s},model=text" + AUG + f",max_eval_instances={n}"
        for s, n in RAFT.items()
    },
    **{
        ("helm-classic-v1", "civil_comments", d): f"civil_comments:model=text,demographic={d}" + AUG
        + f",max_eval_instances={n}"
        for d, n in CIVIL.items()
    },
}  # fmt: skip

# (override, scenario, method) -> HELM's run entry for a method a suite may pin on a scenario whose own method is
# another: the layout that pin must give (tests/helm/test_run_specs.py)
OVERRIDES: dict[tuple[str, str, str], str] = {
    ("override", "hellaswag", "multiple_choice_joint"): (
        "commonsense:model=full_functionality_text,dataset=hellaswag,method=multiple_choice_joint"
    ),
}

# what runs inside HELM's environment: each entry's run spec, as plain JSON
HELM_SIDE = r"""
import json, re, sys
from helm.common.object_spec import parse_object_spec
from helm.benchmark.config_registry import register_builtin_configs_from_helm_package
from helm.benchmark.run_spec_factory import construct_run_specs

register_builtin_configs_from_helm_package()
out = {}
for key, entry in json.load(sys.stdin).items():
    description = re.sub(r"model=[a-z_]+", "model=" + sys.argv[1], entry)
    # the conf's later revision asks instruction-following models for an answer format: 0.5.16 has no such argument
    description = description.replace(",follow_the_format_instructions=instruct", "")
    try:
        (spec,) = construct_run_specs(parse_object_spec(description))
    except OSError as e:  # a run spec that reads a file HELM downloads (LegalBench's prompt settings): offline
        out[key] = {"not_built": f"{type(e).__name__}: {e}"[:300]}
        continue
    a = spec.adapter_spec
    augmenter = spec.data_augmenter_spec
    out[key] = {
        "run_spec": spec.name,
        "method": a.method,
        "instructions": a.instructions,
        "input_prefix": a.input_prefix,
        "input_suffix": a.input_suffix,
        "output_prefix": a.output_prefix,
        "output_suffix": a.output_suffix,
        "reference_prefix": a.reference_prefix,
        "max_train_instances": a.max_train_instances,
        "max_tokens": a.max_tokens,
        "stop_sequences": list(a.stop_sequences),
        "temperature": a.temperature,
        "num_outputs": a.num_outputs,
        "max_eval_instances": a.max_eval_instances,
        "perturbations": sorted(
            {p.class_name.rsplit(".", 1)[-1] for p in (augmenter.perturbation_specs if augmenter else [])}
        ),
    }
with open(sys.argv[2], "w") as f:  # (HELM logs to stdout)
    json.dump(out, f, indent=1, sort_keys=True)
"""


def main() -> None:
    python = BENCH / "venv-helm" / "bin" / "python"
    require(python, "HELM's Python")
    entries = {"|".join(key): entry for key, entry in {**ENTRIES, **OVERRIDES}.items()}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as scratch:  # HELM writes benchmark_output/ where it runs
        found = Path(scratch) / "specs.json"
        done = subprocess.run(
            [str(python), "-c", HELM_SIDE, MODEL, str(found)], input=json.dumps(entries), capture_output=True,
            text=True, env=env, cwd=scratch, check=False,
        )  # fmt: skip
        if done.returncode:
            sys.exit(done.stderr[-4000:])
        specs = json.loads(found.read_text())
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('crfm-helm'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    for key, spec in specs.items():
        spec["entry"] = entries[key]
        if spec.get("max_eval_instances", 0) is None:
            spec["max_eval_instances"] = LITE_SIZE
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    made = (
        f"bench/helm_run_specs.py: crfm-helm {version}'s construct_run_specs on each entry of its leaderboards' conf "
        f"files, the model group replaced by {MODEL}"
    )
    FIXTURE.write_text(json.dumps({"made_by": made, "specs": specs}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}: {len(specs)} run specs (crfm-helm {version})")


if __name__ == "__main__":
    main()
