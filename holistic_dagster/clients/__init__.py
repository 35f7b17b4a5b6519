"""Model clients: one protocol, one class per backend. Only the local transformers backend exists so far."""

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

    def describe(self) -> dict[str, Any]:
        """Backend, model revision, hardware and library versions: recorded with every result."""

    def count_tokens(self, text: str) -> int: ...

    def truncate_left(self, text: str, max_tokens: int) -> str: ...

    def generate(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Completion]: ...

    def score(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Completion]:
        """Log-probability of each request's continuation after its prompt."""


_CLIENTS: dict[tuple, ModelClient] = {}


def get_client(spec: ModelSpec) -> ModelClient:
    """One client per model per process: weights are loaded once and reused by every stage."""
    key = tuple(sorted(spec.model_dump().items()))
    if key not in _CLIENTS:
        if spec.backend == "transformers":
            from holistic_dagster.clients.transformers_client import TransformersClient

            _CLIENTS[key] = TransformersClient(spec)
        else:  # pragma: no cover - the registry schema only admits known backends
            raise CatalogError(f"model {spec.name!r}: unknown backend {spec.backend!r}")
    return _CLIENTS[key]
