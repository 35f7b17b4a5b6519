"""legalbench: a LegalBench task's TSV (read as the `csv:` section says) with HELM's prompt settings for it."""

from __future__ import annotations

import json
from pathlib import Path

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Strict
from holistic_dagster.scenarios.formats.base import FileFormat, Records
from holistic_dagster.scenarios.formats.delimited import read_csv

# the lines of helm_prompt_settings.jsonl, each {task: value}
SETTINGS = ("fields", "instructions", "label_key", "output_noun", "shots")


class LegalBenchSpec(Strict):
    """LegalBench's prompt settings for HELM (HazyResearch/legalbench helm_prompt_settings.jsonl): 5 lines of JSON,
    each {task: value}: the fields in prompt order as [label, column], the instructions, the answer's column, the
    output noun, the number of shots."""

    # the authors' HELM prompt settings file, in the scenario's folder
    settings: str


class LegalBench(FileFormat):
    name = "legalbench"
    options = LegalBenchSpec
    section_hint = "`legalbench: {settings: <file>}`"

    def records(self, path, spec, root, split, subset) -> Records:
        settings = read_settings(root / spec.legalbench.settings, subset)
        for where, record in read_csv(path, spec.csv):
            missing = [column for _, column in settings["fields"] if column not in record]
            if missing or settings["label_key"] not in record:
                raise DataFormatError(path, where, f"missing column(s) {missing or [settings['label_key']]}")
            yield (
                where,
                {
                    **record,
                    "fields": [[label, record[column]] for label, column in settings["fields"]],
                    "answer": record[settings["label_key"]],
                    "instructions": settings["instructions"],
                    "output_noun": settings["output_noun"],
                },
            )


def read_settings(path: Path, task: str) -> dict:
    """The prompt settings of one task: {fields, instructions, label_key, output_noun, shots}."""
    if not path.exists():
        raise DataFormatError(path, None, "file not found (LegalBench's HELM prompt settings)")
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    try:
        parsed = [json.loads(line) for line in lines]
    except ValueError as e:
        raise DataFormatError(path, None, f"not JSON lines: {e}") from None
    if len(parsed) != len(SETTINGS):
        found = f"found {len(parsed)}"
        raise DataFormatError(path, None, f"expected {len(SETTINGS)} lines ({', '.join(SETTINGS)}), {found}")
    for n, (name, values) in enumerate(zip(SETTINGS, parsed), start=1):
        if not isinstance(values, dict):
            raise DataFormatError(path, f"line {n}", f"{name}: expected an object {{task: value}}")
        if task not in values:
            raise DataFormatError(path, f"line {n}", f"no {name} for task {task!r}")
        problem = _malformed(name, values[task])
        if problem:
            raise DataFormatError(path, f"line {n}", f"{name} of task {task!r}: {problem}")
    return {name: values[task] for name, values in zip(SETTINGS, parsed)}


def _malformed(name: str, value: object) -> str | None:
    """What is wrong with one setting's value, or None."""
    if name == "fields":
        pairs = isinstance(value, list) and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value
        )
        return None if pairs and value else "expected a list of [label, column] pairs of text"
    if name == "shots":
        return None if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else "expected a count"
    return None if isinstance(value, str) else "expected text"
