"""The echo backend: a weightless model for wiring tests and dry runs (inspect_ai's mockllm, HELM's simple
models), registered like any other (`backend: echo`). It needs no checkpoint, no server and no network, and answers
at once and always the same:

- a token is a run of non-space characters;
- generation echoes the prompt's last non-empty line, cut at the request's stop sequences and to its max_tokens
  tokens, each with log-probability -1;
- scoring gives a continuation -0.1 per character (a shorter choice is the likelier one), one token per word.

A real model path (transformers' demo models, the packaged SmolLM2) is what tests that measure a model use."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from holistic_dagster.clients.protocol import OnDone, cut_at_stop, scored_completion
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.records import Completion, Request


class EchoClient:
    supports_prompt_logprobs = True

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.max_context = spec.max_context or spec.context_tokens

    def describe(self) -> dict[str, Any]:
        return {"backend": "echo", "model_path": self.spec.path, "model_revision": "echo", "hardware": "none"}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def truncate_left(self, text: str, max_tokens: int) -> str:
        words = text.split()
        return " ".join(words[-max_tokens:]) if len(words) > max_tokens else text

    def generate(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        out = [self._echo(r) for r in requests]
        if on_done and out:
            on_done(out)
        return out

    def score(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        out = []
        for r in requests:
            tokens = r.continuation.split(" ") if r.continuation.strip() else [r.continuation]
            share = [-0.1 * len(t) for t in tokens]
            out.append(scored_completion(r, tokens, share, self.count_tokens(r.prompt), 0.0))
        if on_done and out:
            on_done(out)
        return out

    def _echo(self, request: Request) -> Completion:
        started = time.perf_counter()
        lines = [line for line in request.prompt.splitlines() if line.strip()]
        words = (lines[-1] if lines else "").split()[: request.max_tokens]
        text, stopped = cut_at_stop(" ".join(words), request.stop)
        tokens = tuple(text.split())
        return Completion(
            request_id=request.request_id,
            text=text,
            tokens=tokens,
            logprobs=(-1.0,) * len(tokens),
            logprob=-1.0 * len(tokens),
            num_prompt_tokens=self.count_tokens(request.prompt),
            num_completion_tokens=len(tokens),
            latency_s=time.perf_counter() - started,
            finish_reason="stop" if stopped else "length",
        )
