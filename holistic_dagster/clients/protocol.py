"""The model client protocol every backend implements (HELM's Client, inspect_ai's ModelAPI): describe, count and
truncate tokens, generate, score continuations; and the helpers backends share for stop sequences and tokens."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from holistic_dagster.config.models import ModelSpec
from holistic_dagster.records import Completion, Request

# called with completions as soon as they are finished (each batch, or each HTTP response), so that callers
# can save them at once: a killed run then loses nothing that had finished
OnDone = Callable[[list[Completion]], None]


class ModelClient(Protocol):
    spec: ModelSpec
    max_context: int
    supports_prompt_logprobs: bool  # needed by the separate multiple-choice methods

    def describe(self) -> dict[str, Any]:
        """Backend, model revision, hardware and library versions: recorded with every result."""

    def count_tokens(self, text: str) -> int: ...

    def truncate_left(self, text: str, max_tokens: int) -> str: ...

    def generate(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]: ...

    def score(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        """Log-probability of each request's continuation after its prompt."""


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """The text up to the first stop sequence, and whether one was found."""
    hits = [text.find(s) for s in stop if s and s in text]
    return (text[: min(hits)], True) if hits else (text, False)


def keep_tokens_within(text: str, tokens: Sequence[str], *per_token: Sequence) -> tuple[list, ...]:
    """Drops the trailing tokens that lie past `text` (a server's tokens include the stop sequence's; our
    text is cut before it), returning the kept tokens and the matching prefix of each per-token list."""
    kept, length = 0, 0
    for token in tokens:
        if length + len(token) > len(text):
            break
        length += len(token)
        kept += 1
    return (list(tokens[:kept]), *(list(values[:kept]) for values in per_token))
