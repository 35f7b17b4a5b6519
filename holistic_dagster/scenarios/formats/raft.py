"""raft: a RAFT task's labelled CSV (read as the `csv:` section says) with the task's prompt construction settings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Strict
from holistic_dagster.scenarios.formats.base import FileFormat, Records
from holistic_dagster.scenarios.formats.delimited import read_csv

if TYPE_CHECKING:
    from holistic_dagster.scenarios.spec import ScenarioSpec


class RaftSpec(Strict):
    """RAFT's prompt construction settings: a 2-line JSON file, line 1 {task: [fields in prompt order]},
    line 2 {task: instructions}."""

    # the prompt construction settings file (fields, instructions), in the scenario's folder
    settings: str


class Raft(FileFormat):
    name = "raft"
    options = RaftSpec
    section_hint = "`raft: {settings: <file>}`"

    def records(self, path, spec, root, split, subset) -> Records:
        return read_raft(path, spec, root / spec.raft.settings, subset)


def read_raft_settings(path: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """RAFT's prompt construction settings: line 1 {task: [fields in prompt order]}, line 2 {task: instructions}."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    try:
        fields, instructions = (json.loads(line) for line in lines)
    except ValueError as e:
        raise DataFormatError(path, None, f"expected 2 lines of JSON (fields, instructions): {e}") from None
    return fields, instructions


def read_raft(path: Path, spec: ScenarioSpec, settings_path: Path, task: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """A RAFT task's labelled CSV, each record with `fields` ([name, value] in the task's prompt order) and the
    task's `instructions` from the prompt construction settings."""
    if not settings_path.exists():
        raise DataFormatError(settings_path, None, f"file not found (scenario {spec.name!r}, RAFT prompt settings)")
    order, instructions = read_raft_settings(settings_path)
    if task not in order or task not in instructions:
        raise DataFormatError(settings_path, None, f"no field order or instructions for task {task!r}")
    for where, record in read_csv(path, spec.csv):
        missing = [name for name in order[task] if name not in record]
        if missing:
            raise DataFormatError(path, where, f"missing field(s) {missing} of task {task!r}")
        yield (
            where,
            {**record, "fields": [[name, record[name]] for name in order[task]], "instructions": instructions[task]},
        )
