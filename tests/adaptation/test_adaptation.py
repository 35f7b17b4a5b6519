"""Prompt rendering, few-shot selection and context-window fitting, on hand-written expected strings."""

from __future__ import annotations

import pytest

from holistic_dagster.adaptation.adapter import TokenBudget, adapter_as_asked, build_requests
from holistic_dagster.adaptation.examples import select_examples
from holistic_dagster.adaptation.methods.multiple_choice_separate import NULL_PROMPT
from holistic_dagster.adaptation.spec import AdapterSpec
from holistic_dagster.errors import CatalogError
from holistic_dagster.records import Instance, Reference, SourceFile
from tests.conftest import write

SRC = SourceFile("test://", "0", "test")
WORDS = TokenBudget(
    max_context=10_000, count_tokens=lambda t: len(t.split()), truncate_left=lambda t, n: " ".join(t.split()[-n:])
)


def qa(iid: str, question: str, answer: str, split: str = "test", subset: str = "") -> Instance:
    return Instance(iid, split, question, (Reference(answer, True),), SRC, iid, subset)


def mc(iid: str, question: str, choices: list[str], correct: int, split: str = "test") -> Instance:
    refs = tuple(Reference(c, i == correct) for i, c in enumerate(choices))
    return Instance(iid, split, question, refs, SRC, iid, "", True)


def test_generation_prompt_layout(catalog):
    spec = AdapterSpec(
        method="generation",
        instructions="Answer briefly.",
        input_prefix="Q: ",
        output_prefix="A: ",
        max_train_instances=2,
        max_tokens=5,
    )
    instances = [qa("t1", "1+1?", "2", "train"), qa("t2", "2+2?", "4", "train"), qa("e1", "3+3?", "6")]
    (request,) = build_requests(instances, spec, catalog.templates_dir, WORDS, seed=0)
    shots = select_examples([i for i in instances if i.split == "train"], 2, 0)
    expected = (
        "Answer briefly.\n\n" + "".join(f"Q: {s.input}\nA: {s.references[0].output}\n\n" for s in shots) + "Q: 3+3?\nA:"
    )
    assert request.prompt == expected
    assert (request.kind, request.max_tokens, request.stop, request.num_train_instances) == ("generate", 5, ("\n",), 2)


def test_multiple_choice_joint_lists_lettered_choices_and_answers_with_the_letter(catalog):
    spec = AdapterSpec(method="multiple_choice_joint", input_prefix="Question: ", max_train_instances=1)
    instances = [mc("t1", "Sky colour?", ["red", "blue"], 1, "train"), mc("e1", "Grass colour?", ["green", "pink"], 0)]
    (request,) = build_requests(instances, spec, catalog.templates_dir, WORDS, seed=0)
    assert request.prompt == (
        "Question: Sky colour?\nA. red\nB. blue\nAnswer: B\n\nQuestion: Grass colour?\nA. green\nB. pink\nAnswer:"
    )
    assert request.max_tokens == 1


def test_separate_calibrated_scores_each_choice_after_the_prompt_and_after_the_null_prompt(catalog):
    spec = AdapterSpec(method="multiple_choice_separate_calibrated", output_prefix="Answer:")
    requests = build_requests([mc("e1", "Grass colour?", ["green", "pink"], 0)], spec, catalog.templates_dir, WORDS, 0)
    assert [(r.prompt, r.continuation, r.choice_index, r.is_null_context) for r in requests] == [
        ("Grass colour?\nAnswer:", " green", 0, False),
        ("Grass colour?\nAnswer:", " pink", 1, False),
        (NULL_PROMPT, " green", 0, True),
        (NULL_PROMPT, " pink", 1, True),
    ]
    assert all(r.kind == "score" for r in requests)
    original = build_requests(
        [mc("e1", "Grass colour?", ["green", "pink"], 0)],
        spec.model_copy(update={"method": "multiple_choice_separate_original"}),
        catalog.templates_dir,
        WORDS,
        0,
    )
    assert len(original) == 2 and not any(r.is_null_context for r in original)


def test_dataset_text_is_never_template_source(catalog):
    spec = AdapterSpec(method="generation")
    (request,) = build_requests(
        [qa("e1", "What is {{ 7 * 6 }} and {% raw %}?", "x")], spec, catalog.templates_dir, WORDS, 0
    )
    assert request.prompt == "What is {{ 7 * 6 }} and {% raw %}?\nAnswer:"


def test_few_shot_selection_is_seeded_and_label_balanced():
    pool = [qa(f"y{i}", f"q{i}", "Yes", "train") for i in range(8)] + [
        qa(f"n{i}", f"p{i}", "No", "train") for i in range(2)
    ]
    chosen = select_examples(pool, 4, seed=1)
    assert select_examples(pool, 4, seed=1) == chosen
    assert sorted(c.references[0].output for c in chosen) == ["No", "No", "Yes", "Yes"]
    assert select_examples(pool, 4, seed=2) != chosen
    assert select_examples(pool, 0, seed=1) == []


def test_few_shot_examples_come_from_the_same_subset(catalog):
    spec = AdapterSpec(method="generation", max_train_instances=1)
    instances = [
        qa("a/t", "alpha train", "1", "train", "a"),
        qa("b/t", "beta train", "2", "train", "b"),
        qa("a/e", "alpha test", "3", "test", "a"),
    ]
    (request,) = build_requests(instances, spec, catalog.templates_dir, WORDS, 0)
    assert "alpha train" in request.prompt and "beta train" not in request.prompt


def test_too_long_prompts_lose_few_shot_examples_first_then_are_truncated(catalog):
    spec = AdapterSpec(method="generation", max_train_instances=3, max_tokens=2)
    train = [qa(f"t{i}", "word " * 10, "x", "train") for i in range(3)]
    budget = TokenBudget(35, WORDS.count_tokens, WORDS.truncate_left)
    (fits,) = build_requests([*train, qa("e", "short question", "y")], spec, catalog.templates_dir, budget, 0)
    assert fits.num_train_instances == 2 and not fits.truncated  # 3 shots need 3*12+3 words > 33
    assert WORDS.count_tokens(fits.prompt) <= 33
    (cut,) = build_requests([*train, qa("e", "long " * 50, "y")], spec, catalog.templates_dir, budget, 0)
    assert cut.num_train_instances == 0 and cut.truncated
    assert WORDS.count_tokens(cut.prompt) == 33 and cut.prompt.endswith("long Answer:")  # the end survives


@pytest.mark.parametrize("method", ["generation", "multiple_choice_joint", "multiple_choice_separate_original"])
def test_prompts_counted_in_one_call_are_the_prompts_counted_one_by_one(catalog, method):
    """A model in another process counts the full few-shot prompts in one call (count_tokens_many); the
    requests are those of counting one at a time, and only what that call did not cover is counted alone."""
    spec = AdapterSpec(method=method, max_train_instances=2, max_tokens=2)
    train = [mc(f"t{i}", "word " * 10, ["a", "b"], 0, "train") for i in range(3)]
    tests = [mc("short", "short question", ["yes", "no"], 1), mc("long", "long " * 30, ["yes", "no"], 0)]
    alone, batched = [], []

    def count(text: str) -> int:
        alone.append(text)
        return len(text.split())

    def count_many(texts: list[str]) -> list[int]:
        batched.append(list(texts))
        return [len(t.split()) for t in texts]

    one_by_one = build_requests(
        [*train, *tests], spec, catalog.templates_dir, TokenBudget(50, count, WORDS.truncate_left), 0
    )
    counted_alone = list(alone)
    alone.clear()
    budget = TokenBudget(50, count, WORDS.truncate_left, count_tokens_many=count_many)
    assert build_requests([*train, *tests], spec, catalog.templates_dir, budget, 0) == one_by_one
    assert [r.num_train_instances for r in one_by_one if r.instance_id == "long"][0] < 2  # it had to drop shots
    (counted,) = batched  # one call: each question with both examples (and, scoring choices, each choice)
    full_prompts = [text for text in counted if "word" in text]
    assert len(full_prompts) == 2 and all(p.count("word") == 20 for p in full_prompts)
    choices = {" yes", " no"} if method.startswith("multiple_choice_separate") else set()
    assert set(counted) == set(full_prompts) | choices
    assert not set(counted) & set(alone)  # never counted again
    assert len(alone) == len(set(alone)) < len(counted_alone)  # the rest once each


def test_request_id_changes_with_decoding_parameters(catalog):
    inst = [qa("e1", "q", "a")]
    a = build_requests(inst, AdapterSpec(method="generation", max_tokens=5), catalog.templates_dir, WORDS, 0)[0]
    b = build_requests(inst, AdapterSpec(method="generation", max_tokens=5), catalog.templates_dir, WORDS, 0)[0]
    c = build_requests(inst, AdapterSpec(method="generation", max_tokens=6), catalog.templates_dir, WORDS, 0)[0]
    assert a.request_id == b.request_id != c.request_id


def test_a_template_variable_that_does_not_exist_names_the_template(tmp_path):
    write(tmp_path / "generation.j2", "{{ instance.input }} {{ question_text }}")
    spec = AdapterSpec(method="generation")
    with pytest.raises(CatalogError, match=r"generation.j2: 'question_text' is undefined \(variables available: "):
        build_requests([qa("e1", "q", "a")], spec, tmp_path, WORDS, 0)


def test_helm_separate_layout_is_the_question_as_written_then_each_choice(catalog):
    # HELM's separate adapter: input + " " + choice, the input's own trailing whitespace kept; no prefixes
    scenario = AdapterSpec(method="multiple_choice_separate_original", input_prefix="Question: ", instructions="Hi")
    adapter = adapter_as_asked(scenario, scenario.method, "helm")
    requests = build_requests(
        [mc("e1", "Grass colour? ", ["green ", "pink"], 0)], adapter, catalog.templates_dir, WORDS, 0
    )
    assert [r.prompt + r.continuation for r in requests] == ["Grass colour?  green ", "Grass colour?  pink"]
    # a model without prompt log-probabilities falls back to joint: the scenario's layout, not HELM's separate one
    joint = adapter_as_asked(scenario, "multiple_choice_joint", "helm")
    assert (joint.method, joint.input_prefix, joint.instructions) == ("multiple_choice_joint", "Question: ", "Hi")
    # legacy suites keep the scenario's layout for the separate methods too
    assert adapter_as_asked(scenario, scenario.method, "legacy").input_prefix == "Question: "


def test_separate_original_ranks_choices_by_log_probability_per_token_as_helm():
    """HELM 0.5.16's BasicMetric: a choice's log-probability divided by the number of tokens of " <choice>"; a lone
    whitespace token before them (a prompt that ends in a space) is not the choice's."""
    from holistic_dagster.adaptation.methods import adapter_method
    from holistic_dagster.adaptation.methods.multiple_choice_separate import per_token
    from holistic_dagster.records import Completion, Request

    spaced = Completion("r", "  a b", tokens=(" ", " a", " b"), logprobs=(-5.0, -1.0, -3.0), logprob=-9.0)
    assert per_token(spaced) == -2.0
    instance = mc("q", "Pick one.", ["yes", "four words long here"], 1)
    requests = [
        Request(f"r{i}", "q", "score", "Pick one.", " " + c, choice_index=i) for i, c in enumerate(["yes", "x"])
    ]
    completions = {
        "r0": Completion("r0", " yes", tokens=(" yes",), logprobs=(-1.5,), logprob=-1.5),  # the highest total
        "r1": Completion(
            "r1", " four", tokens=(" four", " words", " long", " here"), logprobs=(-1.0,) * 3 + (-1.2,), logprob=-4.2
        ),  # fmt: skip
    }
    original = adapter_method("multiple_choice_separate_original")
    prediction, prob, carrier = original.predict(instance, requests, completions)
    assert prediction == "four words long here" and carrier.request_id == "r1"  # -1.05 a token against -1.5
    assert prob == pytest.approx(1 / (1 + 2.718281828459045 ** (-1.5 + 1.05)))  # the softmax of those scores
    calibrated = adapter_method("multiple_choice_separate_calibrated")  # totals, less the null prompt's (none here)
    nulls = [Request(f"n{i}", "q", "score", NULL_PROMPT, "", choice_index=i, is_null_context=True) for i in (0, 1)]
    completions |= {"n0": Completion("n0", "", logprob=0.0), "n1": Completion("n1", "", logprob=0.0)}
    assert calibrated.predict(instance, requests + nulls, completions)[0] == "yes"
