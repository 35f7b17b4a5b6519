"""multiple_choice_joint_chain_of_thought (HELM's, for MMLU-Pro and GPQA in HELM Capabilities): every choice listed
with its letter, the model reasons and then names a letter ("The correct answer is (C)"); the letter is extracted
with HELM's patterns (GPQAChainOfThoughtMetric.extract_answer) and mapped back to its choice. An answer whose
letter cannot be extracted predicts nothing: it is wrong, and counted (metrics/chain_of_thought.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from holistic_dagster.adaptation.methods.base import Prediction, choices, generated
from holistic_dagster.adaptation.methods.multiple_choice_joint import MultipleChoiceJoint
from holistic_dagster.records import CHOICE_LABELS, Completion, Instance, Request

# HELM 0.5.16's patterns, in its order, first match wins. The second is HELM's as written: its escaped brackets
# match the literal text "[aA]nswer:", not "Answer:" (kept, so that the same outputs extract the same letters).
PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"answer is \(?([A-J])\)?",
        r"\.*\[aA\]nswer:\s*\(?([A-J])\)?",
        r"correct answer is [^A-Za-z]*([A-J])",
        r"correct answer is [^A-Z]*([A-J])",
    )
)
CHAIN_OF_THOUGHT = "chain_of_thought"  # the metadata field of a training instance's worked reasoning (GPQA's)


def extract_answer(text: str) -> str | None:
    """The answer letter (A-J) a chain-of-thought output names, as HELM extracts it; None when it names none."""
    for pattern in PATTERNS:
        if found := pattern.search(text):
            return found.group(1)
    return None


class MultipleChoiceJointChainOfThought(MultipleChoiceJoint):
    name = "multiple_choice_joint_chain_of_thought"
    template = "multiple_choice_joint_chain_of_thought.j2"
    helm_decoding = None  # its reasoning stops where the scenario (or the suite) says

    def max_tokens(self, spec) -> int:
        return spec.max_tokens  # the reasoning, then the letter

    def examples(self, train, spec):
        return [
            {"input": t.input, "choices": choices(t), "output": self.example_output(t),
             "chain_of_thought": str(t.metadata.get(CHAIN_OF_THOUGHT) or "")}
            for t in train
        ]  # fmt: skip

    def predict(
        self, instance: Instance, requests: Sequence[Request], completions: Mapping[str, Completion]
    ) -> Prediction:
        request, completion, prob = generated(requests, completions)
        letter = extract_answer(completion.text)
        labels = CHOICE_LABELS[: len(instance.references)]
        if letter is not None and letter in labels:
            return instance.references[labels.index(letter)].output, prob, request
        return "", prob, request  # no letter, or one past the choices: no prediction (wrong)
