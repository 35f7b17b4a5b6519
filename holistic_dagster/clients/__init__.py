"""Model clients: one protocol, one class per backend (local transformers, OpenAI-compatible HTTP)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from holistic_dagster.catalog import ModelSpec
from holistic_dagster.errors import CatalogError
from holistic_dagster.records import Completion, Request

Progress = Callable[[int], None]  # called with the number of requests just finished


class ModelClient(Protocol):
    spec: ModelSpec
    max_context: int
    supports_prompt_logprobs: bool  # needed by the separate multiple-choice methods

    def describe(self) -> dict[str, Any]:
        """Backend, model revision, hardware and library versions: recorded with every result."""

    def count_tokens(self, text: str) -> int: ...

    def truncate_left(self, text: str, max_tokens: int) -> str: ...

    def generate(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Completion]: ...

    def score(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Completion]:
        """Log-probability of each request's continuation after its prompt."""


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """The text up to the first stop sequence, and whether one was found."""
    hits = [text.find(s) for s in stop if s and s in text]
    return (text[: min(hits)], True) if hits else (text, False)


_CLIENTS: dict[tuple, ModelClient] = {}


def get_client(spec: ModelSpec) -> ModelClient:
    """One client per model per process: weights are loaded once and reused by every stage."""
    key = tuple(sorted(spec.model_dump().items()))
    if key not in _CLIENTS:
        if spec.backend == "transformers":
            from holistic_dagster.clients.transformers_client import TransformersClient

            _CLIENTS[key] = TransformersClient(spec)
        elif spec.backend == "openai":
            from holistic_dagster.clients.openai_client import OpenAICompatibleClient

            _CLIENTS[key] = OpenAICompatibleClient(spec)
        else:  # pragma: no cover - the registry schema only admits known backends
            raise CatalogError(f"model {spec.name!r}: unknown backend {spec.backend!r}")
    return _CLIENTS[key]
