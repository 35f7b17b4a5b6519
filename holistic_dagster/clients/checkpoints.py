"""Where a local model's weights are. A registry path is a checkpoint directory (or a hub id), `demo:<name>` (a
demo model built offline under the working folder: clients.demo_models) or `gguf:<package>/<file>.gguf` (a GGUF
file converted once under the working folder: clients.gguf_models). The one place these prefixes are read."""

from __future__ import annotations

from pathlib import Path

from holistic_dagster.clients.gguf_models import PREFIX as GGUF_PREFIX
from holistic_dagster.clients.gguf_models import ensure_converted, resolve_gguf
from holistic_dagster.config.models import ModelSpec

DEMO_PREFIX = "demo:"


def local_checkpoint(spec: ModelSpec, home: Path) -> str:
    """The checkpoint to load: a demo model built first, a GGUF file converted first (each once)."""
    path = spec.path
    if path.startswith(DEMO_PREFIX):
        from holistic_dagster.clients.demo_models import ensure_demo_model

        return str(ensure_demo_model(path.removeprefix(DEMO_PREFIX), home / "demo_models"))
    if path.startswith(GGUF_PREFIX):
        return str(ensure_converted(path, home / "models"))
    return path


def checkpoint_files(spec: ModelSpec, home: Path) -> list[str]:
    """The local files the weights come from, without building or converting anything (what a re-run compares)."""
    path = spec.path
    if path.startswith(DEMO_PREFIX):
        folder = home / "demo_models" / path.removeprefix(DEMO_PREFIX)
    elif path.startswith(GGUF_PREFIX):
        try:
            return [str(resolve_gguf(path))]
        except Exception:  # not installed: the evaluation will say so
            return []
    else:
        folder = Path(path)
    return [str(p) for p in sorted(folder.glob("*")) if p.is_file()] if folder.is_dir() else [str(folder)]
