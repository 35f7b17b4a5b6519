"""multiple_choice_joint: every choice is listed with a letter; the model generates the letter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from holistic_dagster.adaptation.methods.base import Prediction, generated
from holistic_dagster.adaptation.methods.generation import Generation
from holistic_dagster.records import CHOICE_LABELS, Completion, Instance, Request


class MultipleChoiceJoint(Generation):
    name = "multiple_choice_joint"
    template = "multiple_choice_joint.j2"
    open_ended = False
    # HELM's joint requests carry no stop sequence (one token: only a line break would differ, and neither scores
    # one as a letter); the scenarios' own `\n` stays under the other conventions
    helm_decoding = {"stop_sequences": ()}

    def max_tokens(self, spec) -> int:
        return 1  # the letter

    def example_output(self, inst: Instance) -> str:
        return CHOICE_LABELS[next(i for i, r in enumerate(inst.references) if r.correct)]

    def predict(
        self, instance: Instance, requests: Sequence[Request], completions: Mapping[str, Completion]
    ) -> Prediction:
        request, completion, prob = generated(requests, completions)
        letter = completion.text.strip()
        labels = CHOICE_LABELS[: len(instance.references)]
        if len(letter) == 1 and letter in labels:  # map the letter back to its choice, as HELM does
            return instance.references[labels.index(letter)].output, prob, request
        return completion.text, prob, request
