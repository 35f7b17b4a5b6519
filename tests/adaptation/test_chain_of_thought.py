"""HELM's multiple_choice_joint_chain_of_thought (MMLU-Pro and GPQA in HELM Capabilities): the prompt bytes as
HELM's adapter builds them, the answer letter extracted with HELM's patterns, GPQA's choices shuffled as HELM
shuffles them, and the encrypted archive read in memory."""

from __future__ import annotations

import csv
import io
import random
import shutil
import zipfile

import pytest

from holistic_dagster.adaptation.adapter import TokenBudget, adapter_as_asked, build_requests
from holistic_dagster.adaptation.methods import adapter_method
from holistic_dagster.adaptation.methods.multiple_choice_joint_chain_of_thought import extract_answer
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.errors import DataFormatError
from holistic_dagster.metrics.accuracy import exact_match
from holistic_dagster.records import Completion, Instance, Reference, SourceFile
from holistic_dagster.scenarios import load_instances
from holistic_dagster.settings import REPO_ROOT
from tests.conftest import write

UNBOUNDED = TokenBudget(max_context=10**6, count_tokens=lambda t: len(t) // 4 + 1, truncate_left=lambda t, n: t)
SUFFIX = ("Let’s think step by step. Based on your reasoning, what is the single, most likely answer choice? Format "
          'your response as follows: "The correct answer is (insert answer here)".')  # fmt: skip
PASSWORD = b"deserted-untie-orchid"


@pytest.mark.parametrize(
    "text, letter",
    [
        ("Reasoning... The correct answer is (C).", "C"),
        ("so the answer is B", "B"),
        ("The correct answer is **D**", "D"),  # HELM's third pattern: non-letters between "is" and the letter
        ("[aA]nswer: (E)", "E"),  # HELM's second pattern matches this literal text (its escaped brackets)
        ("Answer: (E)", None),  # ... and not this
        ("I think it is probably (A) but the answer is (J)", "J"),  # the first pattern wins over position
        ("No letter here.", None),
    ],
)
def test_the_letter_is_extracted_as_helm_extracts_it(text, letter):
    assert extract_answer(text) == letter


def _catalog(tmp_path) -> Catalog:
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    return Catalog(tmp_path / "assets")


def test_an_mmlu_pro_prompt_is_helms_bytes(tmp_path, shared_data):
    catalog = _catalog(tmp_path)
    spec = catalog.scenario("mmlu_pro")
    (inst, *_) = load_instances(spec.model_copy(update={"subsets": ("physics",)}), [shared_data])
    request, = build_requests([inst], adapter_as_asked(spec.adapter, spec.adapter.method, "helm"),
                              catalog.templates_dir, UNBOUNDED, 0, "helm")  # fmt: skip
    # HELM: input_prefix + question + input_suffix, "A. <choice>\n" per choice, output_prefix "" , global_suffix
    letters = "ABCDEFGHIJ"
    choices = "".join(f"{letters[n]}. {r.output}\n" for n, r in enumerate(inst.references))
    expected = f"What is the correct answer to this question: {inst.input}\nChoices:\n{choices}{SUFFIX}"
    assert request.prompt == expected and request.max_tokens == 4096 and request.stop == ()


def _gpqa_rows(shared_data) -> list[dict]:
    text = zipfile.ZipFile(shared_data / "gpqa" / "gpqa_diamond.zip").read("gpqa_diamond.csv", pwd=PASSWORD)
    return list(csv.DictReader(io.StringIO(text.decode("utf-8"))))


def test_gpqa_choices_are_shuffled_and_split_as_helm_does(tmp_path, shared_data):
    catalog = _catalog(tmp_path)
    instances = load_instances(catalog.scenario("gpqa"), [shared_data])
    rows = _gpqa_rows(shared_data)
    random.seed(42)  # HELM's GPQAScenario: one seed, then random.shuffle per row in dataset order
    helm = []
    for row in rows:
        refs = [(row["Correct Answer"].strip(), True)] + [
            (row[f"Incorrect Answer {k}"].strip(), False) for k in (1, 2, 3)
        ]
        random.shuffle(refs)
        helm.append(refs)
    by_id = {i.instance_id: i for i in instances}
    assert len(instances) == len(rows) == 198
    for n, row in enumerate(rows):
        inst = by_id[row["Record ID"]]
        assert [(r.output, r.correct) for r in inst.references] == helm[n]
        assert inst.split == ("train" if n in (124, 39) else "test")  # HELM's TRAIN_EXAMPLE_INDICES for Diamond
    train = [i for i in instances if i.split == "train"]
    assert all(i.metadata["chain_of_thought"] for i in train)  # the worked explanation of a training example
    # a GPQA prompt labels its choices "(A) ".."(D) "
    spec = catalog.scenario("gpqa")
    test = next(i for i in instances if i.split == "test")
    request, = build_requests([test], adapter_as_asked(spec.adapter, spec.adapter.method, "helm"),
                              catalog.templates_dir, UNBOUNDED, 0, "helm")  # fmt: skip
    choices = "".join(f"({'ABCD'[n]}) {r.output}\n" for n, r in enumerate(test.references))
    assert request.prompt == f"What is the correct answer to this question: {test.input}\nChoices:\n{choices}{SUFFIX}"


def test_a_wrong_password_fails_naming_the_archive_and_writes_nothing(tmp_path, shared_data):
    catalog = _catalog(tmp_path)
    yaml = catalog.root / "scenarios" / "gpqa.yaml"
    yaml.write_text(yaml.read_text().replace("zip_password: deserted-untie-orchid", "zip_password: guess"))
    data = tmp_path / "data" / "gpqa"
    data.mkdir(parents=True)
    shutil.copy(shared_data / "gpqa" / "gpqa_diamond.zip", data)
    with pytest.raises(DataFormatError, match=r"gpqa_diamond\.zip, record gpqa_diamond\.csv: wrong password"):
        load_instances(catalog.scenario("gpqa"), [tmp_path / "data"])
    assert sorted(p.name for p in data.iterdir()) == ["gpqa_diamond.zip"]  # never unpacked


def test_an_answer_without_a_letter_predicts_nothing_and_is_wrong():
    method = adapter_method("multiple_choice_joint_chain_of_thought")
    inst = Instance("q", "test", "Q?", (Reference("x", False), Reference("y", True)), SourceFile("t://", "0", "t"), "1")
    request = build_requests([inst], adapter_as_asked(Catalog().scenario("gpqa").adapter, method.name, "helm"),
                             Catalog().templates_dir, UNBOUNDED, 0, "helm")[0]  # fmt: skip
    for text, prediction in (("The correct answer is (B)", "y"), ("I do not know", ""), ("The answer is (D)", "")):
        done = {request.request_id: Completion(request.request_id, text)}
        assert method.predict(inst, [request], done)[0] == prediction
        assert exact_match("y", prediction) == (prediction == "y")


def test_a_one_choice_question_is_read_as_helm_reads_it(tmp_path):
    catalog = _catalog(tmp_path)
    write(tmp_path / "data" / "mmlu_pro" / "test.jsonl", '{"question_id": 1, "question": "Q?", "options": ["only"], '
          '"answer": "A", "answer_index": 0, "cot_content": "", "category": "math", "src": "x"}\n')  # fmt: skip
    (inst,) = load_instances(catalog.scenario("mmlu_pro"), [tmp_path / "data"])
    assert inst.instance_id == "id1" and [r.output for r in inst.references] == ["only"]
