"""MATH (HELM's math scenario): the answer check against hand-checked answers (the MATH paper's normalization, as
HELM runs it), the reference answer taken from the solution's last \\boxed{}, HELM's row order (the whole split
sorted by problem, shuffled with seed 42, then filtered by subject and level) and its prompt layout, on records
written here in the Hugging Face row schema."""

from __future__ import annotations

import json

import numpy as np
import pytest

from holistic_dagster.adaptation.adapter import TokenBudget, build_requests
from holistic_dagster.adaptation.boxed import boxed_answer
from holistic_dagster.errors import DataFormatError
from holistic_dagster.metrics import get_reference_metric
from holistic_dagster.metrics.math_equiv import math_equiv, math_equiv_chain_of_thought, normalize_answer
from holistic_dagster.scenarios import sample_instances
from holistic_dagster.scenarios.loaders import load_file_instances
from holistic_dagster.scenarios.spec import SuiteScenario
from tests.conftest import write


@pytest.mark.parametrize(
    "gold, pred, equal",
    [
        ("\\frac{1}{2}", "1/2", 1.0),  # a/b of integers is a fraction
        ("\\frac{1}{2}", "0.5", 1.0),  # and 0.5 is one half (the paper's one decimal rule)
        ("\\frac{1}{2}", ".5", 1.0),  # a leading "." gains its 0
        ("\\frac{1}{32}", "\\dfrac{1}{32}", 1.0),  # dfrac and tfrac are frac
        ("\\frac{1}{2}", "\\frac12", 1.0),  # unbraced digits are braced
        ("\\sqrt{59}", "\\sqrt59", 0.0),  # only one character joins the root: \sqrt{5}9
        ("\\sqrt{5}", "\\sqrt5", 1.0),
        ("10", "10\\text{ inches}", 1.0),  # "\text{ " starts units, which are dropped
        ("10", "10 \\text{inches}", 0.0),  # without the space it is not a unit
        ("90", "90^\\circ", 1.0),  # degrees
        ("90", "90^{\\circ}", 1.0),
        ("50", "50\\%", 1.0),  # percent
        ("5", "\\$5", 1.0),  # dollars
        ("5", "x = 5", 1.0),  # a short left side of "=" is dropped
        ("5", "abc=5", 0.0),  # a long one is kept
        ("(3,4)", "\\left( 3, 4 \\right)", 1.0),  # \left, \right and spaces
        ("\\frac{2}{3}", "\\frac{3}{2}", 0.0),
        ("3", "3.0", 0.0),  # no numeric comparison: the paper's check is textual
        ("a\\text{ b}\\text{ c}", "a\\text{ b}\\text{ c}", 1.0),  # two units: unreadable, compared as written
        ("a\\text{ b}\\text{ c}", "a", 0.0),
    ],
)
def test_math_equiv_on_hand_checked_answers(gold, pred, equal):
    assert math_equiv(gold, pred) == equal


def test_normalization_steps():
    assert normalize_answer("\\left(\\frac{7}{8}\\right)^3") == "(\\frac{7}{8})^3"
    assert normalize_answer("k = \\frac 1 2") == "\\frac{1}{2}"  # spaces go before fractions are braced
    assert normalize_answer("") == ""


def test_boxed_answers_nest_and_the_last_one_counts():
    solution = "First $\\boxed{1}$, then finally $\\boxed{\\frac{2}{\\sqrt{3}}}$."
    assert boxed_answer(solution) == "\\frac{2}{\\sqrt{3}}"
    assert boxed_answer("no box here") is None
    assert boxed_answer("\\fbox{4}") is None  # found, but the paper unwraps only \boxed{
    assert boxed_answer("\\boxed{unclosed") is None


def test_chain_of_thought_compares_the_last_boxed_answers():
    reference = "Adding, $2+3=\\boxed{5}$."
    assert math_equiv_chain_of_thought(reference, "So the sum is $\\boxed{5}$.\n###") == 1.0
    assert math_equiv_chain_of_thought(reference, "First \\boxed{5}, no: \\boxed{6}") == 0.0
    assert math_equiv_chain_of_thought(reference, "The answer is 5.") == 0.0  # no box: nothing to compare
    assert math_equiv_chain_of_thought(reference, "$\\boxed{\\dfrac{10}{2}}$") == 0.0  # 10/2 is not 5 as text
    assert get_reference_metric("math_equiv").fn is math_equiv


SUBJECTS = {"algebra": "Algebra", "geometry": "Geometry"}


def math_rows(subject: str, n: int) -> list[dict]:
    """n problems of a subject in the Hugging Face row schema, levels 1-3 in turn; every fifth boxes no answer."""
    rows = []
    for k in range(n):
        boxed = f"$\\boxed{{{k}}}$" if k % 5 != 4 else f"the answer is {k}"
        rows.append(
            {
                "problem": f"{subject} problem {k:02d}: what is {k}?",
                "level": f"Level {k % 3 + 1}",
                "type": SUBJECTS[subject],
                "solution": f"Work for {k}. So {boxed}",
            }
        )
    return rows


@pytest.fixture
def math_data(tmp_path):
    root = tmp_path / "math"
    for subject in SUBJECTS:
        write(root / f"{subject}_test.jsonl", "".join(json.dumps(r) + "\n" for r in math_rows(subject, 30)))
    return root


def helm_order(root) -> list[dict]:
    """HELM's order of the test split, written out: every file's rows, sorted by problem, permuted by NumPy's
    default_rng(42) (datasets' sort("problem").shuffle(seed=42))."""
    rows = sorted(
        (json.loads(line) for f in sorted(root.glob("*_test.jsonl")) for line in f.read_text().splitlines()),
        key=lambda r: r["problem"],
    )
    return [rows[i] for i in np.random.default_rng(42).permutation(len(rows))]


def test_a_subject_and_level_in_helms_row_order_with_the_boxed_answer(catalog, math_data):
    spec = catalog.scenario("math").model_copy(update={"subsets": ("geometry:level_2",)})
    instances = load_file_instances(spec, math_data)
    tests = [i for i in instances if i.split == "test"]
    expected = [
        r
        for r in helm_order(math_data)
        if r["type"] == "Geometry" and r["level"] == "Level 2" and "boxed" in r["solution"]
    ]
    assert [i.input for i in sorted(tests, key=lambda i: int(i.record.split()[1]))] == [r["problem"] for r in expected]
    assert all(i.references[0].output == boxed_answer(r["solution"]) for i, r in zip(tests, expected))
    # MATH's 8 official examples are the pool, in HELM's order
    train = [i for i in instances if i.split == "train"]
    assert [i.references[0].output for i in train] == ["1", "15", "\\sqrt{59}", "\\frac{1}{32}", "181", "50", "2", "3"]
    assert tests[0].source.uri.endswith("geometry_test.jsonl") and tests[0].record.startswith("order ")


def test_the_prompt_is_helms_layout_with_its_instance_separator(catalog, math_data):
    spec = catalog.scenario("math").model_copy(update={"subsets": ("algebra:level_1",)})
    pin = SuiteScenario(max_eval_instances=1, seed=0, conventions="helm", max_train_instances=2)
    instances = sample_instances(spec, pin, load_file_instances(spec, math_data))
    adapter = spec.adapter.model_copy(update={"max_train_instances": 2})
    budget = TokenBudget(max_context=10**6, count_tokens=lambda t: len(t), truncate_left=lambda t, n: t)
    (request,) = build_requests(instances, adapter, catalog.templates_dir, budget, 0, "helm")
    question = next(i for i in instances if i.split == "test").input
    blocks = request.prompt.split("###\n")
    assert blocks[0] == "Given a mathematics problem, determine the answer. Simplify your answer as much as possible.\n"
    assert [b.split("\n")[1][:9] for b in blocks[1:3]] == ["Answer: $", "Answer: $"]
    assert blocks[1].endswith("$\n") and blocks[3] == f"Problem: {question}\nAnswer: $"
    assert request.stop == ("$",) and request.max_tokens == 20


def test_chain_of_thought_runs_0_shot_without_a_train_file_and_with_one_draws_from_it(catalog, math_data):
    spec = catalog.scenario("math_chain_of_thought").model_copy(update={"subsets": ("algebra:level_3",)})
    instances = load_file_instances(spec, math_data)
    assert {i.split for i in instances} == {"test"}
    assert all(i.references[0].output.startswith("Work for") for i in instances)  # the whole solution
    write(math_data / "algebra_train.jsonl", "".join(json.dumps(r) + "\n" for r in math_rows("algebra", 9)))
    instances = load_file_instances(spec, math_data)
    train = [i for i in instances if i.split == "train"]
    assert len(train) == 3 and all(i.subset == "algebra:level_3" for i in train)


def test_a_record_without_the_sorted_field_is_named(catalog, math_data):
    write(math_data / "geometry_test.jsonl", json.dumps({"level": "Level 1", "solution": "\\boxed{1}"}) + "\n")
    spec = catalog.scenario("math").model_copy(update={"subsets": ("algebra:level_1",)})
    with pytest.raises(DataFormatError, match=r"geometry_test.jsonl, record line 1: the split is sorted by 'problem'"):
        load_file_instances(spec, math_data)
