"""What identifies a model for automation: its registry entry, and for entries with `watch: true` the
revision its server reports (TGI `/info` model_sha; an OpenAI-compatible server's `/v1/models` entry)."""

from __future__ import annotations

import os

import requests

from holistic_dagster.catalog import ModelSpec
from holistic_dagster.hashing import sha256_json


def served_revision(spec: ModelSpec, timeout_s: float = 5.0) -> str:
    """The revision the server says it serves (raises on a server that cannot be asked)."""
    base = (spec.base_url or "").rstrip("/")
    if spec.backend == "tgi":
        info = requests.get(f"{base}/info", timeout=timeout_s)
        info.raise_for_status()
        body = info.json()
        return f"{body.get('model_id')}@{body.get('model_sha')}"
    headers = {"Authorization": f"Bearer {os.environ[spec.api_key_env]}"} if spec.api_key_env else {}
    listing = requests.get(f"{base}/models", headers=headers, timeout=timeout_s)
    listing.raise_for_status()
    for entry in listing.json().get("data", []):
        if entry.get("id") == spec.path:
            return f"{entry.get('id')}@{entry.get('root', '')}@{entry.get('created', '')}"
    raise LookupError(f"{spec.path!r} is not in {base}/models")


def model_identity(spec: ModelSpec, previous: str | None) -> tuple[str, str]:
    """(identity, warning). A watched server that cannot be reached keeps the previous identity, so an
    outage never looks like a new revision."""
    fields = {k: getattr(spec, k) for k in ("backend", "path", "revision", "base_url", "chat")}
    if not spec.watch or spec.backend == "transformers":
        return sha256_json(fields)[:16], ""
    try:
        fields["served"] = served_revision(spec)
    except (requests.RequestException, LookupError, KeyError, ValueError) as e:
        return previous or sha256_json(fields)[:16], f"could not read the served revision ({type(e).__name__}: {e})"
    return sha256_json(fields)[:16], ""
