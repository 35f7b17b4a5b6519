"""jsonl: one JSON object per line (gzip when the file ends in .gz)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holistic_dagster.errors import DataFormatError
from holistic_dagster.scenarios.formats.base import FileFormat, Records, open_text


class Jsonl(FileFormat):
    name = "jsonl"

    def records(self, path, spec, root, split, subset) -> Records:
        return read_jsonl(path)


def read_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with open_text(path) as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(path, f"line {n}", f"not valid JSON: {e.msg} at column {e.colno}") from None
            if not isinstance(record, dict):
                raise DataFormatError(path, f"line {n}", f"expected a JSON object, found {type(record).__name__}")
            yield f"line {n}", record
