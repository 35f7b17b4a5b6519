"""The one place identities are hashed: files, requests, model revisions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def request_id(
    *, kind: str, prompt: str, continuation: str, max_tokens: int, temperature: float, stop: tuple[str, ...]
) -> str:
    """The request's identity: the rendered prompt plus everything that decides the answer."""
    return sha256_json(
        {
            "kind": kind,
            "prompt": prompt,
            "continuation": continuation,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stop": list(stop),
        }
    )[:32]
