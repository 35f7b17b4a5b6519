"""The model client protocol every backend implements (HELM's Client, inspect_ai's ModelAPI): describe, count and
truncate tokens, generate, score continuations; and the helpers backends share for stop sequences and tokens."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from holistic_dagster.config.models import ModelSpec
from holistic_dagster.records import Completion, Request

# called with completions as soon as they are finished (each batch, or each HTTP response), so that callers
# can save them at once: a killed run then loses nothing that had finished
OnDone = Callable[[list[Completion]], None]


class StopSending(Exception):  # noqa: N818 (a signal, not an error)
    """Raised by an OnDone callback (a budget reached): send no more requests. Those in flight finish and are
    handed over; those never sent come back as not_sent completions, which are not handed over."""


def not_sent(request: Request) -> Completion:
    return Completion(request_id=request.request_id, text="", error="NotSent: sending was stopped (a budget reached)")


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


def scored_completion(
    request: Request, tokens: Sequence[str], logprobs: Sequence[float], num_prompt_tokens: int, latency_s: float
) -> Completion:
    """A continuation's log-probability as stored: its tokens and theirs, their sum, nothing generated."""
    logprobs = tuple(float(x) for x in logprobs)
    return Completion(
        request_id=request.request_id,
        text=request.continuation,
        tokens=tuple(tokens),
        logprobs=logprobs,
        logprob=float(sum(logprobs)),
        num_prompt_tokens=num_prompt_tokens,
        num_completion_tokens=0,
        latency_s=latency_s,
        finish_reason="scored",
    )


def generated_completion(
    request: Request,
    text: str,
    tokens: Sequence[str],
    logprobs: Sequence[float],
    top: Sequence[dict[str, float]],
    usage: Mapping[str, Any],
    finish_reason: str,
    started: float,
    count_tokens: Callable[[str], int],
) -> Completion:
    """A server's generation as stored: the text cut at the first stop sequence (its tokens with it), the token
    counts the server reports (else counted here), the latency since `started` (time.perf_counter())."""
    text, stopped = cut_at_stop(text, request.stop)
    if stopped and tokens:
        tokens, logprobs, top = keep_tokens_within(text, tokens, logprobs, top or [{}] * len(tokens))
        top = [t for t in top if t]
    prompt_tokens, output_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return Completion(
        request_id=request.request_id,
        text=text,
        tokens=tuple(tokens),
        logprobs=tuple(logprobs),
        logprob=sum(logprobs),
        num_prompt_tokens=int(prompt_tokens) if prompt_tokens is not None else count_tokens(request.prompt),
        num_completion_tokens=int(output_tokens) if output_tokens is not None else len(tokens),
        latency_s=time.perf_counter() - started,
        finish_reason=finish_reason,
        top_logprobs=tuple(top),
    )


def token_logprobs(logprobs: dict[str, Any]) -> tuple[list[str], list[float], list[dict[str, float]]]:
    """Tokens, their log-probabilities and top alternatives from an OpenAI-shaped `logprobs` (OpenAI-compatible
    servers, llama.cpp's): the chat shape (`content[]`) or the completions shape (`tokens`, `token_logprobs`,
    `top_logprobs`)."""
    if "content" in logprobs:
        content = logprobs.get("content") or []
        return (
            [t["token"] for t in content],
            [float(t["logprob"]) for t in content],
            [{a["token"]: float(a["logprob"]) for a in (t.get("top_logprobs") or [])} for t in content],
        )
    tokens = list(logprobs.get("tokens") or [])
    return (
        tokens,
        [float(x) for x in logprobs.get("token_logprobs") or []],
        [dict(t) for t in logprobs.get("top_logprobs") or [] if t],
    )
