"""The separate multiple-choice methods: each choice is scored separately as a continuation of the prompt.

- multiple_choice_separate_original: the choice with the highest log-probability per token wins (HELM 0.5.16's
  BasicMetric: the continuation's log-probability divided by its number of tokens).
- multiple_choice_separate_calibrated: the choice's total log-probability divided by its probability after the null
  prompt "Answer:" (log p(c | prompt) - log p(c | "Answer:")), as HELM's.
The choice's probability (max_prob, for calibration) is the softmax of those scores, as HELM's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from holistic_dagster.adaptation.methods.base import AdapterMethod, Prediction
from holistic_dagster.records import Completion, Instance, Request

if TYPE_CHECKING:
    from holistic_dagster.adaptation.adapter import Adapter

NULL_PROMPT = "Answer:"  # HELM's calibration context for multiple_choice_separate_calibrated
# HELM's get_multiple_choice_separate_adapter_spec: our continuation " <choice>" supplies its output_prefix " "
HELM_SEPARATE_LAYOUT = {
    "instructions": "",
    "input_prefix": "",
    "input_suffix": "",
    "output_prefix": "",
    "output_suffix": "",
    "max_train_instances": 0,
}


class MultipleChoiceSeparateOriginal(AdapterMethod):
    name = "multiple_choice_separate_original"
    scores_continuations = True
    helm_layout = HELM_SEPARATE_LAYOUT
    calibrated = False

    def max_tokens(self, spec) -> int:
        return 0

    def prime_texts(self, tests: Sequence[Instance]) -> list[str]:
        return [" " + r.output for t in tests for r in t.references]  # each choice's length is counted too

    def requests(self, adapter: Adapter, instance: Instance, train: list[Instance]) -> list[Request]:
        # one scoring request per choice (plus the null-context ones when calibrated)
        longest = max(adapter.budget.count_tokens(" " + r.output) for r in instance.references)
        prompt, k, truncated = adapter.fit(instance, train, reserve=longest)
        out = [
            adapter.request(instance, "score", prompt, " " + r.output, k, truncated, choice=i)
            for i, r in enumerate(instance.references)
        ]
        if self.calibrated:
            out += [
                adapter.request(instance, "score", NULL_PROMPT, " " + r.output, 0, False, choice=i, null=True)
                for i, r in enumerate(instance.references)
            ]
        return out

    def predict(
        self, instance: Instance, requests: Sequence[Request], completions: Mapping[str, Completion]
    ) -> Prediction:
        choices = sorted((r for r in requests if not r.is_null_context), key=lambda r: r.choice_index)
        scored = [completions[r.request_id] for r in choices]
        scores = [c.logprob if self.calibrated else per_token(c) for c in scored]
        if self.calibrated:
            null = {r.choice_index: completions[r.request_id].logprob for r in requests if r.is_null_context}
            scores = [s - null[r.choice_index] for s, r in zip(scores, choices)]
        best = int(np.argmax(scores))
        return instance.references[best].output, _softmax_prob(scores, best), choices[best]


class MultipleChoiceSeparateCalibrated(MultipleChoiceSeparateOriginal):
    name = "multiple_choice_separate_calibrated"
    calibrated = True


# how tokenizers write a space or a line break inside a token (byte-level BPE, SentencePiece)
_SPACE_MARKS = str.maketrans({"Ġ": " ", "Ċ": "\n", "▁": " "})


def per_token(c: Completion) -> float:
    """HELM's score of a separate choice: the log-probability per token of " <choice>" tokenized alone, which HELM
    takes as the last tokens of the scored text. A prompt ending in whitespace (HellaSwag's empty second context)
    makes a lone whitespace token before them: it is left out, as HELM's count leaves it."""
    if not c.logprobs:  # a score without its tokens' (an import): its total, as for one token
        return c.logprob
    k = 0
    while k < len(c.logprobs) - 1 and k < len(c.tokens) and not c.tokens[k].translate(_SPACE_MARKS).strip():
        k += 1
    kept = c.logprobs[k:]
    return sum(kept) / max(len(kept), 1)


def _softmax_prob(scores: list[float], index: int) -> float:
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    return weights[index] / sum(weights)
