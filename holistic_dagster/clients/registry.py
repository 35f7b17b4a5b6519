"""The backends, one module each, behind one lookup: which client class serves a model's `backend`, whether its
models run on this machine (a local model gets a process of its own: clients.model_process) and whether its server
reports the revision it serves (automation watches it). The one place a backend kind is switched on.

Adding a backend is one module with its client class (the ModelClient protocol; a `served_revision` static method
where its server says what it serves), its entry in BACKENDS below, and its settings class in
config/models.BACKEND_SETTINGS (the schema of its section of resources/backends.yaml)."""

from __future__ import annotations

import atexit
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from holistic_dagster.clients.checkpoints import checkpoint_files, missing_weights
from holistic_dagster.clients.protocol import ModelClient
from holistic_dagster.config.models import BACKEND_SETTINGS, ModelSpec
from holistic_dagster.errors import CatalogError


@dataclass(frozen=True)
class Backend:
    client: str  # "module:Class", imported when a model of the kind is first used (torch loads only when needed)
    local: bool = False  # a model of its kind loads in a process of its own (clients.model_process)
    watchable: bool = False  # its server reports the revision it serves (`watch: true` in the registry)
    local_weights: bool = True  # its weights are files here (what a re-run compares); not a server's, not none

    def client_class(self) -> type:
        module, _, name = self.client.partition(":")
        return getattr(importlib.import_module(module), name)


BACKENDS: dict[str, Backend] = {
    "transformers": Backend("holistic_dagster.clients.transformers_client:TransformersClient", local=True),
    "tgi": Backend("holistic_dagster.clients.tgi_client:TGIClient", watchable=True, local_weights=False),
    "openai": Backend(
        "holistic_dagster.clients.openai_client:OpenAICompatibleClient", watchable=True, local_weights=False
    ),
    "llamacpp": Backend("holistic_dagster.clients.llamacpp_client:LlamaCppClient", watchable=True),
    "echo": Backend("holistic_dagster.clients.echo_client:EchoClient", local_weights=False),  # weightless
}
assert set(BACKENDS) == set(BACKEND_SETTINGS), "every backend kind has its settings schema (config/models.py)"


def backend(spec: ModelSpec) -> Backend:
    if spec.backend not in BACKENDS:  # pragma: no cover - the registry schema only admits known backends
        raise CatalogError(f"model {spec.name!r}: unknown backend {spec.backend!r} (known: {', '.join(BACKENDS)})")
    return BACKENDS[spec.backend]


_CLIENTS: dict[tuple, ModelClient] = {}


def _key(spec: ModelSpec) -> tuple:
    return tuple(sorted(spec.model_dump(exclude={"price"}).items()))  # the price changes no answer


def get_client(spec: ModelSpec) -> ModelClient:
    """One client per model per process: weights are loaded once and reused by every stage."""
    key = _key(spec)
    if key not in _CLIENTS:
        _CLIENTS[key] = backend(spec).client_class()(spec)
    return _CLIENTS[key]


def served_revision(spec: ModelSpec, timeout_s: float = 5.0) -> str:
    """The revision the model's server says it serves (raises on a server that cannot be asked)."""
    if not backend(spec).watchable:
        raise LookupError(f"model {spec.name!r}: a {spec.backend} model has no server to ask")
    return backend(spec).client_class().served_revision(spec, timeout_s)


def model_files(spec: ModelSpec, cache: Path) -> list[str]:
    """The local files a model's weights come from (none for a server's, or a weightless model)."""
    return checkpoint_files(spec, cache) if backend(spec).local_weights and not spec.base_url else []


def installed_models(models: Mapping[str, ModelSpec], cache: Path) -> tuple[dict[str, ModelSpec], list[str]]:
    """(the models that can run here, a note for each left out): a registered ladder model is evaluated once
    its weights are installed, not before."""
    missing = {name: why for name, spec in models.items() if (why := missing_weights(spec, cache))}
    return {n: s for n, s in models.items() if n not in missing}, [f"{n}: {why}" for n, why in missing.items()]


def start_model_processes(specs: Sequence[ModelSpec]) -> None:
    """From now on, get_client gives these local models in processes of their own (clients.model_process): the
    first starts loading at once, each next one when the one before is ready."""
    from holistic_dagster.clients.model_process import ModelProcessClient

    following = None
    for spec in reversed([s for s in specs if backend(s).local and _key(s) not in _CLIENTS]):
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
