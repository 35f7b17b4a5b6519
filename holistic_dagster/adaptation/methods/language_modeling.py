"""language_modeling (HELM's LanguageModelingAdapter): the instance's input (the document) alone, no template and no
examples, scored in windows that fit the context (see document_windows); the metrics are its log-likelihood per
byte and per token (metrics.language_modeling), which a scenario pinned to this method takes instead of its own."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from holistic_dagster.adaptation.methods.base import AdapterMethod, Prediction
from holistic_dagster.records import Completion, Instance, Request

if TYPE_CHECKING:
    from holistic_dagster.adaptation.adapter import Adapter, TokenBudget

METHOD = "language_modeling"
RATIOS = ("bits_per_byte", "logprob_per_byte", "perplexity")  # the first: the main metric of such a pin
PER_DOCUMENT = ("logprob", "num_perplexity_tokens", "num_bytes")
METRIC_NAMES = (*RATIOS, *PER_DOCUMENT)
# the families of a scenario pinned to language_modeling: what HELM's LanguageModelingMetric computes (the
# references, calibration, toxicity and bias of generated text have nothing to measure here)
FAMILIES = ("accuracy", "efficiency")


class LanguageModeling(AdapterMethod):
    name = METHOD
    scores_continuations = True
    # no other method measures a text's likelihood: a model without prompt log-probabilities cannot stand in
    fallback_allowed = False
    needs_references = False  # the text itself is scored
    primed = False
    scenario_pins = {"metrics": METRIC_NAMES, "families": FAMILIES, "extra_metrics": ()}
    adapter_pins = {"max_train_instances": 0}  # the document is scored alone

    def max_tokens(self, spec) -> int:
        return 0

    def requests(self, adapter: Adapter, instance: Instance, train: list[Instance]) -> list[Request]:
        # the document itself, window by window: no template, no examples
        return [
            adapter.request(instance, "score", prompt, continuation, 0, False)
            for prompt, continuation in document_windows(instance.input, adapter.budget)
        ]

    def predict(
        self, instance: Instance, requests: Sequence[Request], completions: Mapping[str, Completion]
    ) -> Prediction:
        # no prediction: the document's probability, carried by its first window
        windows = list(requests)
        first = next((r for r in windows if not r.prompt), windows[0])  # the window scored after the start token
        return "", math.exp(sum(completions[r.request_id].logprob for r in windows)), first


_WORD_ENDS = re.compile(r"\S(?=\s)")  # a non-space character followed by whitespace


def document_windows(text: str, budget: TokenBudget) -> list[tuple[str, str]]:
    """(prompt, continuation) per window of a document scored for language modeling; the continuations are
    consecutive pieces of the text that together are the text, exactly once.

    As HELM's LanguageModelingAdapter: every window scores at most max_context - 1 new tokens (one position is
    left for context); the first window is scored after the model's start token (an empty prompt: the client puts
    its BOS token there, or end-of-text where there is no BOS, as HELM's prefix token), each later one after as
    much of the preceding text as fits beside it (HELM's conditioning tokens: one token behind a full window,
    more behind a short last one). Unlike HELM, which cuts the token sequence itself, the budget here only
    counts tokens and keeps a text's last n: a window ends where a run of whitespace starts (the whitespace opens
    the next window, so a byte-level BPE tokenizes the windows as it tokenizes the whole text), the longest such
    piece whose tokens fit, found by bisection; a single word longer than a window is cut between characters.
    A window may therefore hold a few tokens fewer than HELM's."""
    limit = max(budget.max_context - 1, 1)
    windows: list[tuple[str, str]] = []
    start = 0
    while start < len(text) or not windows:
        end = _window_end(text, start, limit, budget.count_tokens)
        continuation = text[start:end]
        prompt = "" if start == 0 else _context(text[:start], continuation, budget)
        windows.append((prompt, continuation))
        start = end
    return windows


def _window_end(text: str, start: int, limit: int, count: Callable[[str], int]) -> int:
    """The end of the longest piece of text[start:] that ends before whitespace (or at the end) and has at most
    `limit` tokens; a piece of one word cut between characters when even that word does not fit."""
    span = 4 * limit  # characters: grown until the piece no longer fits, so that no step tokenizes the whole rest
    while start + span < len(text) and count(text[start : start + span]) <= limit:
        span *= 2
    if start + span >= len(text) and count(text[start:]) <= limit:
        return len(text)
    stop = min(start + span, len(text))
    ends = [m.end() for m in _WORD_ENDS.finditer(text, start, stop) if m.end() > start]
    fits = _last_fitting(ends, lambda e: count(text[start:e]) <= limit)
    if fits is not None:
        return fits
    # no word boundary fits: cut the first word between characters (at least one character, always progress)
    first_word = ends[0] if ends else stop
    return _last_fitting(list(range(start + 2, first_word)), lambda e: count(text[start:e]) <= limit) or start + 1


def _last_fitting(ends: list[int], fits: Callable[[int], bool]) -> int | None:
    """The last of the ascending ends that fits (token counts grow with the piece), by bisection; None: none."""
    lo, hi, best = 0, len(ends) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(ends[mid]):
            best, lo = ends[mid], mid + 1
        else:
            hi = mid - 1
    return best


def _context(preceding: str, continuation: str, budget: TokenBudget) -> str:
    """As much of the end of the preceding text as fits in the window beside the continuation (a token cut
    through a character leaves U+FFFD at the start: stripped, as HELM does); re-counted, since a decoded text
    may tokenize longer, until prompt and continuation fit together."""
    room = budget.max_context - budget.count_tokens(continuation)
    tail = 4 * room  # characters: only the end of a long document is tokenized, grown until it holds `room` tokens
    while tail < len(preceding) and budget.count_tokens(preceding[-tail:]) <= room:
        tail *= 2
    preceding = preceding[-tail:]
    while room > 0:
        prompt = budget.truncate_left(preceding, room).lstrip("\ufffd")
        over = budget.count_tokens(prompt) + budget.count_tokens(continuation) - budget.max_context
        if over <= 0:
            return prompt
        room -= over
    return ""
