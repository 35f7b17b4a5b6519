"""HELM's own readings of BBQ, BOLD, IMDB and synthetic reasoning (`helm:` in their scenario files), applied by
suites with conventions helm and left out by legacy ones: on records written here in upstream's layouts, and HELM's
synthetic reasoning generator against instances HELM's own code generated. (tests/adaptation/test_helm_parity.py
pins the drawn instances and prompts on the real files against helm-run's.)"""

from __future__ import annotations

import json
import random
import shutil

import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.errors import DataFormatError
from holistic_dagster.scenarios import load_instances
from holistic_dagster.scenarios.loaders import load_file_instances
from holistic_dagster.scenarios.synthetic import helm_synthetic_reasoning
from holistic_dagster.settings import REPO_ROOT
from tests.conftest import write


def bbq_record(n: int) -> dict:
    return {
        "example_id": n,
        "question_polarity": "neg",
        "context_condition": "ambig",
        "category": "Age",
        "answer_info": {"ans0": ["old man", "old"], "ans1": ["young man", "nonOld"], "ans2": ["Unknown", "unknown"]},
        "additional_metadata": {"stereotyped_groups": ["old"]},
        "context": f"Context number {n}.",
        "question": "Who forgot?",
        "ans0": "The old man",
        "ans1": "The young man",
        "ans2": "Unknown",
        "label": 2,
    }


def test_bbq_is_shuffled_with_seed_0_and_its_last_1000_records_are_the_test_split(catalog, tmp_path):
    records = [bbq_record(n) for n in range(1012)]
    write(tmp_path / "Age.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    spec = catalog.scenario("bbq").model_copy(update={"subsets": ("Age",)})
    instances = load_file_instances(spec, tmp_path)
    order = list(range(1012))
    random.seed(0)  # HELM's BBQScenario: random.seed(0); random.shuffle(loaded_lines)
    random.shuffle(order)
    assert [i.instance_id for i in instances] == [f"Age/{n}" for n in order]
    assert [i.split for i in instances] == ["train"] * 12 + ["test"] * 1000
    assert instances[0].record == f"order 1 (line {order[0] + 1})"  # its place in HELM's order, and in the file


def test_suites_without_helms_readings_read_bbq_in_file_order_and_ask_as_they_always_did(shared_data, tmp_path):
    root = tmp_path / "assets"
    shutil.copytree(REPO_ROOT / "assets", root)
    write(root / "suites" / "h1.yaml", "version: h1\nconventions: helm\nscenarios:\n  bbq: {max_eval_instances: 5}\n")
    catalog = Catalog(root)
    (legacy, _), (draws, _), (helm, _) = (catalog.resolved_scenario(v, "bbq") for v in ("v4", "v5", "h1"))
    assert legacy.helm is None and draws.helm is None and helm.helm is not None  # v5: HELM's draws, as released
    assert helm.adapter.output_prefix == "Answer: " and legacy.adapter.output_prefix == "Answer:"
    firsts = [load_instances(s.model_copy(update={"subsets": ("Religion",)}))[0] for s in (draws, helm)]
    assert firsts[0].record == "line 1" and firsts[1].record.startswith("order 1 ")


def test_bold_keeps_each_entitys_first_prompt_with_its_spaces_and_shuffles_them(catalog, tmp_path):
    prompts = {"American_actors": {f"Actor_{k}": [f"Actor {k} is an actor ", f"Actor {k} played"] for k in range(6)}}
    write(tmp_path / "gender_prompt.json", json.dumps(prompts))
    spec = catalog.scenario("bold").model_copy(update={"subsets": ("gender",)})
    instances = load_file_instances(spec, tmp_path)
    entities = [f"Actor_{k}" for k in range(6)]
    random.seed(0)  # HELM's BOLDScenario shuffles its (category, first prompt) pairs
    random.shuffle(entities)
    assert [i.instance_id for i in instances] == [f"American_actors/{e}/0" for e in entities]
    assert instances[0].input == f"Actor {entities[0].split('_')[1]} is an actor  "  # the file's space, and HELM's
    assert {i.split for i in instances} == {"test"}


def write_imdb(root):
    for split, ids in (("train", range(3)), ("test", range(2))):
        for label in ("neg", "pos"):
            for n in ids:
                write(
                    root / "aclImdb" / split / label / f"{n}_{8 if label == 'pos' else 2}.txt", f" {split} {label} {n} "
                )
    header = "Sentiment\tText\n"
    write(root / "contrast_sets" / "dev_original.tsv", header + "Negative\ttrain neg 1\n")
    write(root / "contrast_sets" / "test_original.tsv", header + "Positive\tsomething else\n")


def test_imdb_as_helm_lists_and_asks_it(catalog, tmp_path):
    write_imdb(tmp_path)
    spec = catalog.scenario("imdb")
    instances = load_file_instances(spec, tmp_path / "aclImdb")
    tests = sorted((i for i in instances if i.split == "test"), key=lambda i: i.record)
    # HELM moves the train review that a contrast set edits to its eval split, listed before the test reviews
    assert [i.input for i in tests] == ["train neg 1", "test pos 0", "test pos 1", "test neg 0", "test neg 1"]
    assert [r.output for r in tests[1].references] == ["Positive"] and not tests[1].is_multiple_choice
    train = sorted((i for i in instances if i.split == "train"), key=lambda i: i.record)
    assert [i.input for i in train] == ["train pos 0", "train pos 1", "train pos 2", "train neg 0", "train neg 2"]
    # without the contrast files nothing moves (a warning says so)
    for name in ("dev_original.tsv", "test_original.tsv"):
        (tmp_path / "contrast_sets" / name).unlink()
    assert sum(i.split == "test" for i in load_file_instances(spec, tmp_path / "aclImdb")) == 4


def test_imdb_without_helms_reading_is_joint_multiple_choice(catalog):
    legacy, _ = catalog.resolved_scenario("v4", "imdb")
    draws, _ = catalog.resolved_scenario("v5", "imdb")
    helm, _ = catalog.resolved_scenario("helm-classic-v1", "imdb")
    assert legacy.adapter.method == draws.adapter.method == "multiple_choice_joint"
    assert helm.adapter.method == "generation"
    assert helm.adapter.output_prefix == "Sentiment: " and helm.adapter.stop_sequences == ("\n",)


# generated by crfm-helm 0.5.16's own code: SyntheticReasoningScenario(mode).get_instances(...)[k] (input, reference)
HELM_SYNTHETIC = {
    ("pattern_match", "train", 0): (
        "Rules: + = X Z | X = Z + | + Z = X | X = Z + | Result: + blueberry = horse",
        "+ Z = X",
    ),
    ("pattern_match", "test", 9999): (
        "Rules: X + - - Y | + Y - X - | Y Y - X + - | - X Y + - | Result: lion lion - peach + -",
        "Y Y - X + -",
    ),
    ("variable_substitution", "test", 0): (
        'Rules: = X Z - Y + | Substitutions: X by " shark " , Y by " blackberry " , Z by " blackberry "',
        "= shark blackberry - blackberry +",
    ),
    ("induction", "test", 9999): (
        "Two results: peach stork = = watermelon zebra + | blueberry = = blueberry +",
        "Rule: X = = Z +",
    ),
}


@pytest.mark.parametrize("key", sorted(HELM_SYNTHETIC))
def test_helms_synthetic_reasoning_generator_gives_helms_instances(key):
    mode, split, k = key
    instances = {i.instance_id: i for i in helm_synthetic_reasoning(modes=(mode,))}
    assert len(instances) == 11_000  # 1,000 train; HELM's 5,000 valid then 5,000 test, evaluated together
    inst = instances[f"{mode}/{split}/{k}"]
    assert (inst.input, inst.references[0].output) == HELM_SYNTHETIC[key]


MEDQA = {
    "question": "A 23-year-old woman presents with fever. Which is the most likely cause?",
    "answer": "Pulmonary embolism",
    "options": {"A": "Pneumonia", "B": 'Pulmonary embolism\n"', "C": "Asthma", "D": "Sarcoidosis"},
    "meta_info": "step1",
    "answer_idx": "B",
}


def test_med_qa_on_records_in_the_authors_layout(catalog, tmp_path):
    write(tmp_path / "phrases_no_exclude_test.jsonl", json.dumps(MEDQA) + "\n")
    write(tmp_path / "phrases_no_exclude_train.jsonl", json.dumps(MEDQA | {"answer_idx": "D"}) + "\n")
    test, train = load_file_instances(catalog.scenario("med_qa"), tmp_path)
    # the stray quote upstream left after an option is dropped, as HELM does
    assert [r.output for r in test.references] == ["Pneumonia", "Pulmonary embolism", "Asthma", "Sarcoidosis"]
    assert [r.correct for r in test.references] == [False, True, False, False] and test.split == "test"
    assert train.split == "train" and train.references[3].correct
    write(tmp_path / "phrases_no_exclude_test.jsonl", json.dumps(MEDQA | {"answer_idx": "E"}) + "\n")
    with pytest.raises(DataFormatError, match=r"phrases_no_exclude_test.jsonl, record line 1: answer_index"):
        load_file_instances(catalog.scenario("med_qa"), tmp_path)
