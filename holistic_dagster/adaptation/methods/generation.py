"""generation: the model continues the prompt; its text is the prediction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from holistic_dagster.adaptation.methods.base import AdapterMethod, Prediction, generated
from holistic_dagster.records import Completion, Instance, Request

if TYPE_CHECKING:
    from holistic_dagster.adaptation.adapter import Adapter


class Generation(AdapterMethod):
    name = "generation"
    open_ended = True

    def requests(self, adapter: Adapter, instance: Instance, train: list[Instance]) -> list[Request]:
        max_tokens = self.max_tokens(adapter.spec)
        prompt, k, truncated = adapter.fit(instance, train, reserve=max_tokens)
        return [
            adapter.request(instance, "generate", prompt, "", k, truncated, max_tokens=max_tokens, sample=s)
            for s in range(adapter.spec.num_outputs if self.open_ended else 1)  # (a letter is asked once)
        ]

    def predict(
        self, instance: Instance, requests: Sequence[Request], completions: Mapping[str, Completion]
    ) -> Prediction:
        request, completion, prob = generated(requests, completions)
        return completion.text, prob, request
