"""Verbs about the models themselves: `holistic install-ladder` (the model ladder's GGUF files, clients/ladder.py)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from holistic_dagster.cli.common import console, deployment, fail
from holistic_dagster.errors import HolisticError


def install_ladder(
    models: Annotated[
        Optional[list[str]], typer.Option("--model", help="only this ladder model (repeatable; default: all)")
    ] = None,
) -> None:
    """Download and assemble the model ladder's GGUF files (Qwen2.5-Coder 0.5B and 1.5B Instruct, Gemma 3 270M;
    about 1.9 GB) under <HOLISTIC_MODEL_CACHE>/ladder (by default <HOLISTIC_HOME>/ladder), each checked against its
    pinned size and sha256. The registry's `ladder:` models (resources/models.yaml) then run on llama.cpp."""
    from holistic_dagster.clients.ladder import LADDER, install_ladder

    unknown = sorted(set(models or []) - set(LADDER))
    if unknown:
        fail(f"unknown ladder model(s) {unknown} (known: {', '.join(LADDER)})")
    cache = deployment().model_cache
    try:
        install_ladder(cache, [LADDER[m] for m in models or LADDER], announce=lambda line: console.print(line))
    except HolisticError as e:
        fail(str(e))
    console.print(f"The ladder is in {cache / 'ladder'}: `holistic evaluate --model qwen2.5-coder-1.5b-instruct ...`")
