"""Where a local model's weights are. A registry path is a checkpoint directory (or a hub id), `demo:<name>` (a
demo model built offline in the model cache: clients.demo_models), `gguf:<package>/<file>.gguf` or `gguf:<path>` (a
GGUF file: converted once in the model cache for transformers, clients.gguf_models; read as it is by llama.cpp), or
`ladder:<name>` (a GGUF file of the model ladder, assembled in the model cache by scripts/install-ladder). The model
cache (`cache` below) is settings.model_cache_dir(), by default the home. The one place these prefixes are read."""

from __future__ import annotations

from pathlib import Path

from holistic_dagster.clients.gguf_models import PREFIX as GGUF_PREFIX
from holistic_dagster.clients.gguf_models import ensure_converted, resolve_gguf
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import CatalogError

DEMO_PREFIX = "demo:"
LADDER_PREFIX = "ladder:"


def ladder_file(name: str, cache: Path) -> Path:
    """Where scripts/install-ladder assembles the ladder's GGUF file `name`."""
    return cache / "ladder" / f"{name}.gguf"


def gguf_file(spec: ModelSpec, cache: Path) -> Path:
    """The GGUF file a llama.cpp entry names (a `gguf:` or `ladder:` path)."""
    path = spec.path
    if path.startswith(LADDER_PREFIX):
        found = ladder_file(path.removeprefix(LADDER_PREFIX), cache)
        if not found.is_file():
            raise CatalogError(
                f"model {spec.name!r}: {found} is not there: install the model ladder first (scripts/install-ladder)"
            )
        return found
    if path.startswith(GGUF_PREFIX):
        return resolve_gguf(path)
    raise CatalogError(f"model {spec.name!r}: a llama.cpp model's path is gguf:<file> or ladder:<name>, not {path!r}")


def missing_weights(spec: ModelSpec, cache: Path) -> str | None:
    """Why a registered local model cannot run here yet (its weights are an optional install that is not there),
    or None. Only the ladder is optional; any other missing file is an error the evaluation reports."""
    if spec.path.startswith(LADDER_PREFIX) and not spec.base_url:
        found = ladder_file(spec.path.removeprefix(LADDER_PREFIX), cache)
        if not found.is_file():
            return f"not installed ({found} is not there: holistic install-ladder)"
    return None


def local_checkpoint(spec: ModelSpec, cache: Path) -> str:
    """The checkpoint to load: a demo model built first, a GGUF file converted first (each once)."""
    path = spec.path
    if path.startswith(DEMO_PREFIX):
        from holistic_dagster.clients.demo_models import ensure_demo_model

        return str(ensure_demo_model(path.removeprefix(DEMO_PREFIX), cache / "demo_models"))
    if path.startswith(GGUF_PREFIX):
        return str(ensure_converted(path, cache / "models"))
    return path


def checkpoint_files(spec: ModelSpec, cache: Path) -> list[str]:
    """The local files a local model's weights come from, without building or converting anything (what a re-run
    compares); clients.registry.model_files asks only for a backend whose weights are here."""
    path = spec.path
    if path.startswith(LADDER_PREFIX):
        return [str(ladder_file(path.removeprefix(LADDER_PREFIX), cache))]
    if path.startswith(DEMO_PREFIX):  # the folder local_checkpoint builds (this recipe's)
        from holistic_dagster.clients.demo_models import demo_model_dir

        folder = demo_model_dir(path.removeprefix(DEMO_PREFIX), cache / "demo_models")
    elif path.startswith(GGUF_PREFIX):
        try:
            return [str(resolve_gguf(path))]
        except Exception:  # not installed: the evaluation will say so
            return []
    else:
        folder = Path(path)
    return [str(p) for p in sorted(folder.glob("*")) if p.is_file()] if folder.is_dir() else [str(folder)]
