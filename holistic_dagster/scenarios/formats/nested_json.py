"""nested_json: one JSON object per file whose nested keys are fields and whose leaves are lists of records (BOLD)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Strict
from holistic_dagster.scenarios.formats.base import FileFormat, Records, open_text


class NestedJsonSpec(Strict):
    """One JSON object per file whose nested keys are fields and whose leaves are lists of records, e.g. BOLD's
    {group: {entity: [prompt, ...]}} with keys [group, entity] and leaf `prompt`."""

    # names given to the nesting levels' keys, outermost first
    keys: tuple[str, ...]
    # the name given to the innermost value
    leaf: str


class NestedJson(FileFormat):
    name = "nested_json"
    options = NestedJsonSpec
    section_hint = "`nested_json: {keys: [...], leaf: ...}`"

    def records(self, path, spec, root, split, subset) -> Records:
        return read_nested_json(path, spec.nested_json.keys, spec.nested_json.leaf)


def read_nested_json(path: Path, keys: tuple[str, ...], leaf: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """One JSON object whose nested keys are fields and whose leaves are lists: BOLD's
    {group: {entity: [prompt, ...]}} gives records {group, entity, prompt, index} ("group/entity/index")."""
    try:
        with open_text(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise DataFormatError(path, f"line {e.lineno}", f"not valid JSON: {e.msg} at column {e.colno}") from None

    def walk(node: Any, depth: int, fields: dict[str, str]) -> Iterator[tuple[str, dict[str, Any]]]:
        where = "/".join(fields.values()) or "(top)"
        if depth == len(keys):
            if not isinstance(node, list):
                raise DataFormatError(path, where, f"expected a list of {leaf} values, found {type(node).__name__}")
            for n, value in enumerate(node):
                yield f"{where}/{n}", {**fields, leaf: value, "index": n}
            return
        if not isinstance(node, dict):
            raise DataFormatError(
                path, where, f"expected an object keyed by {keys[depth]}, found {type(node).__name__}"
            )
        for key, child in node.items():
            yield from walk(child, depth + 1, {**fields, keys[depth]: key})

    yield from walk(data, 0, {})
