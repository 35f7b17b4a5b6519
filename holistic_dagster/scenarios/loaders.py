"""Upstream file formats (CSV, JSONL) read record by record and mapped to Instances by the scenario's
sandboxed Jinja2 expressions. A bad record is a DataFormatError naming the file, the record and the problem."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2

from holistic_dagster.catalog import CsvSpec, ScenarioSpec
from holistic_dagster.errors import DataFormatError
from holistic_dagster.hashing import sha256_file
from holistic_dagster.records import Instance, Reference, SourceFile
from holistic_dagster.templating import expression, string_template

CHOICE_LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def read_csv(path: Path, spec: CsvSpec) -> Iterator[tuple[str, dict[str, str]]]:
    """Yields ("row N", record). Quoted fields may hold commas and newlines."""
    with _open_text(path) as f:
        reader = csv.reader(f)
        if spec.header:
            try:
                header = next(reader)
            except StopIteration:
                raise DataFormatError(path, None, "empty file (expected a header row)") from None
            missing = [c for c in spec.columns if c not in header]
            if missing:
                raise DataFormatError(path, "header", f"missing column(s) {missing}; found {header}")
            names = header
        else:
            names = list(spec.columns)
        try:
            for n, row in enumerate(reader, start=1):
                if not row:
                    continue
                if len(row) != len(names):
                    raise DataFormatError(
                        path, f"row {n}", f"expected {len(names)} fields ({', '.join(names)}), found {len(row)}"
                    )
                yield f"row {n}", dict(zip(names, row))
        except csv.Error as e:
            raise DataFormatError(path, f"line {reader.line_num}", f"malformed CSV: {e}") from None


def read_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with _open_text(path) as f:
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


def _evaluate(kind: str, source: str, record: dict[str, Any], path: Path, where: str, *, template: bool) -> Any:
    try:
        if template:
            return string_template(source).render(**record)
        return expression(source)(**record)
    except jinja2.UndefinedError as e:
        raise DataFormatError(
            path, where, f"{kind} `{source}`: {e.message} (record fields: {', '.join(record)})"
        ) from None
    except jinja2.TemplateError as e:
        raise DataFormatError(path, where, f"{kind} `{source}` is not valid Jinja2: {e}") from None
    except Exception as e:  # an expression failing on this record's values (e.g. 'ABCD'.index('E'))
        raise DataFormatError(path, where, f"{kind} `{source}` failed: {type(e).__name__}: {e}") from None


def record_to_instance(
    spec: ScenarioSpec, record: dict[str, Any], *, path: Path, where: str, split: str, subset: str, source: SourceFile
) -> Instance:
    m = spec.instance
    assert m is not None
    text = _evaluate("input", m.input, record, path, where, template=True).strip()
    if not text:
        raise DataFormatError(path, where, "input is empty")
    if m.choices is not None:
        choices = _evaluate("choices", m.choices, record, path, where, template=False)
        if not isinstance(choices, (list, tuple)) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
            raise DataFormatError(path, where, f"choices must be a list of at least two strings, got {choices!r}")
        if len(choices) > len(CHOICE_LABELS):
            raise DataFormatError(path, where, f"{len(choices)} choices; at most {len(CHOICE_LABELS)} are supported")
        answer = _evaluate("answer_index", m.answer_index or "", record, path, where, template=False)
        if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(choices):
            raise DataFormatError(
                path, where, f"answer_index must be an integer in 0..{len(choices) - 1}, got {answer!r}"
            )
        references = tuple(Reference(str(c).strip(), i == answer) for i, c in enumerate(choices))
    else:
        target = _evaluate("target", m.target or "", record, path, where, template=True).strip()
        if not target:
            raise DataFormatError(path, where, "target (the correct answer) is empty")
        references = (Reference(target, True),)
    number = where.split()[-1]
    if m.id:
        instance_id = str(_evaluate("id", m.id, record, path, where, template=False))
    else:
        instance_id = "/".join(p for p in (subset, split, number) if p)
    return Instance(
        instance_id=instance_id,
        split=split,
        input=text,
        references=references,
        source=source,
        record=where,
        subset=subset,
        is_multiple_choice=m.choices is not None,
    )


def load_file_instances(spec: ScenarioSpec, root: Path) -> list[Instance]:
    """All instances of every subset and split, in file order."""
    instances: list[Instance] = []
    for subset in spec.subsets:
        for split, pattern in sorted(spec.splits.items(), key=lambda kv: kv[0] != "test"):
            path = root / pattern.format(subset=subset)
            if not path.exists():
                raise DataFormatError(path, None, f"file not found (scenario {spec.name!r}, split {split!r})")
            source = SourceFile(
                uri=str(path), sha256=sha256_file(path), revision=spec.source.revision, num_bytes=path.stat().st_size
            )
            records = read_csv(path, spec.csv) if spec.format == "csv" else read_jsonl(path)
            for where, record in records:
                instances.append(
                    record_to_instance(spec, record, path=path, where=where, split=split, subset=subset, source=source)
                )
    return instances
