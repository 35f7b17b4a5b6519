"""A model's identity, in one place: what its registry entry says it is (and, with `watch: true`, the revision its
server reports), which the registry sensor compares to decide that a model is new; and which weights answered
a request (the client's description: backend, model path, revision), which keys the completion cache."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import requests

from holistic_dagster.clients.registry import backend, served_revision
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.config.redaction import redact
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import sha256_json

# what a model's results depend on: a change of any of these (or of the revision its server reports) is a new model
IDENTITY_FIELDS = ("backend", "path", "revision", "base_url", "chat")


def model_identity(spec: ModelSpec, previous: str | None) -> tuple[str, str]:
    """(identity, warning). A watched server that cannot be reached keeps the previous identity, so an
    outage never looks like a new revision."""
    fields = {k: getattr(spec, k) for k in IDENTITY_FIELDS}
    if not spec.watch or not backend(spec).watchable:
        return sha256_json(fields)[:16], ""
    try:
        fields["served"] = served_revision(spec)
    except (requests.RequestException, OSError, HolisticError, LookupError, KeyError, ValueError) as e:
        note = redact(f"could not read the served revision ({type(e).__name__}: {e})")  # logged by the sensor
        return previous or sha256_json(fields)[:16], note
    return sha256_json(fields)[:16], ""


def model_identities(models: Mapping[str, ModelSpec], cursor: dict | None) -> tuple[dict[str, str], list[str]]:
    """({model: identity}, warnings) for the registry, against the identities the cursor remembers."""
    seen = (cursor or {}).get("models", {})
    identities, warnings = {}, []
    for name, spec in models.items():
        identities[name], note = model_identity(spec, seen.get(name))
        if note:
            warnings.append(f"{name}: {note}")
    return identities, warnings


# what changes a model's numbers besides its weights, where a client's description says it: the dtype a local model
# runs in; whether llama.cpp scores a question's choices from one evaluation of its context
NUMERICS = ("dtype", "reuse_context")


def answering_identity(described: Mapping[str, Any]) -> str:
    """Which weights answer a client's requests, and how (its describe(): backend, model path, revision, and the
    NUMERICS it states): completions are cached under it, so a model registered again under another name reuses them
    and a new revision, dtype or way of scoring does not."""
    keys = ("backend", "model_path", "model_revision") + tuple(k for k in NUMERICS if k in described)
    return sha256_json({k: described.get(k) for k in keys})[:16]
