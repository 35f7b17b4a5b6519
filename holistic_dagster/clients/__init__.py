"""Model clients: one protocol, one class per backend (local transformers, TGI, OpenAI-compatible)."""

from __future__ import annotations

import atexit
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import CatalogError
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


_CLIENTS: dict[tuple, ModelClient] = {}


def _key(spec: ModelSpec) -> tuple:
    return tuple(sorted(spec.model_dump().items()))


def get_client(spec: ModelSpec) -> ModelClient:
    """One client per model per process: weights are loaded once and reused by every stage."""
    key = _key(spec)
    if key not in _CLIENTS:
        if spec.backend == "transformers":
            from holistic_dagster.clients.transformers_client import TransformersClient

            _CLIENTS[key] = TransformersClient(spec)
        elif spec.backend == "tgi":
            from holistic_dagster.clients.tgi_client import TGIClient

            _CLIENTS[key] = TGIClient(spec)
        elif spec.backend == "openai":
            from holistic_dagster.clients.openai_client import OpenAICompatibleClient

            _CLIENTS[key] = OpenAICompatibleClient(spec)
        else:  # pragma: no cover - the registry schema only admits known backends
            raise CatalogError(f"model {spec.name!r}: unknown backend {spec.backend!r}")
    return _CLIENTS[key]


def start_model_processes(specs: Sequence[ModelSpec]) -> None:
    """From now on, get_client gives these local (transformers) models in processes of their own
    (clients.model_process): the first starts loading at once, each next one when the one before is ready."""
    from holistic_dagster.clients.model_process import ModelProcessClient

    following = None
    for spec in reversed([s for s in specs if s.backend == "transformers" and _key(s) not in _CLIENTS]):
        following = _CLIENTS[_key(spec)] = ModelProcessClient(spec, then=following)
    if following:
        following.start()
        atexit.register(stop_model_processes)


def stop_model_processes() -> None:
    from holistic_dagster.clients.model_process import ModelProcessClient

    for key, client in list(_CLIENTS.items()):
        if isinstance(client, ModelProcessClient):
            client.close()
            del _CLIENTS[key]
