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


def not_utf8(path: Path) -> DataFormatError:
    """The error for a file that is not UTF-8, naming the first line and column that is not."""
    raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    for n, line in enumerate(raw.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            return DataFormatError(
                path,
                f"line {n}",
                f"not UTF-8: byte 0x{line[e.start]:02x} at byte {e.start + 1} of the line (convert the file to UTF-8)",
            )
    return DataFormatError(path, None, "not UTF-8 (convert the file to UTF-8)")


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


def read_nested_json(path: Path, keys: tuple[str, ...], leaf: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """One JSON object whose nested keys are fields and whose leaves are lists: BOLD's
    {group: {entity: [prompt, ...]}} gives records {group, entity, prompt, index} ("group/entity/index")."""
    try:
        with _open_text(path) as f:
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


def read_stories(paths: list[Path]) -> Iterator[tuple[Path, str, dict[str, Any]]]:
    """CNN/DailyMail .story files (one article each): the article's paragraphs, then each highlight after a
    line `@highlight`. Records {id, article, highlights} with highlights joined by newlines, as the upstream
    Hugging Face builder does."""
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise not_utf8(path) from None
        article, *highlights = text.split("@highlight")
        paragraphs = [p.strip() for p in article.strip().split("\n\n") if p.strip()]
        yield (
            path,
            "file",
            {
                "id": path.stem,
                "article": "\n\n".join(paragraphs),
                "highlights": "\n".join(h.strip() for h in highlights if h.strip()),
            },
        )


def _evaluate(kind: str, source: str, record: dict[str, Any], path: Path, where: str, *, template: bool) -> Any:
    # fields are variables; `record` holds them all, for names that are not identifiers ("Best Answer")
    variables = {**record, "record": record}
    try:
        if template:
            return string_template(source).render(**variables)
        return expression(source)(**variables)
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
) -> Instance | None:
    """The record as an Instance (None: an empty input the scenario says to skip)."""
    m = spec.instance
    assert m is not None
    text = _evaluate("input", m.input, record, path, where, template=True).strip()
    if not text:
        if m.skip_empty_input:
            return None
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
    elif m.target is not None:
        target = _evaluate("target", m.target, record, path, where, template=True).strip()
        if not target:
            raise DataFormatError(path, where, "target (the correct answer) is empty")
        references = (Reference(target, True),)
    else:  # open-ended generation (BOLD): nothing to compare with, only bias, toxicity and efficiency apply
        references = ()
    metadata = {k: _evaluate(f"metadata.{k}", v, record, path, where, template=False) for k, v in m.metadata.items()}
    number = where.removeprefix("line ").removeprefix("row ")
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
        metadata=metadata,
    )


def load_file_instances(spec: ScenarioSpec, root: Path) -> list[Instance]:
    """All instances of every subset and split, in file order."""
    instances: list[Instance] = []
    for subset in spec.subsets:
        for split, pattern in sorted(spec.splits.items(), key=lambda kv: kv[0] != "test"):
            pattern = pattern.format(subset=subset)
            if spec.format == "story":
                paths = sorted(root.glob(pattern))
                if not paths:
                    raise DataFormatError(
                        root / pattern, None, f"no files match (scenario {spec.name!r}, split {split!r})"
                    )
                for path, where, record in read_stories(paths):
                    source = _source(spec, path)
                    instances.append(
                        record_to_instance(
                            spec, record, path=path, where=where, split=split, subset=subset, source=source
                        )
                    )
                continue
            path = root / pattern
            if not path.exists():
                raise DataFormatError(path, None, f"file not found (scenario {spec.name!r}, split {split!r})")
            source = _source(spec, path)
            if spec.format == "csv":
                records = read_csv(path, spec.csv)
            elif spec.format == "nested_json":
                records = read_nested_json(path, spec.nested_json.keys, spec.nested_json.leaf)
            else:
                records = read_jsonl(path)
            before = len(instances)
            try:
                for where, record in records:
                    instances.append(
                        record_to_instance(
                            spec, record, path=path, where=where, split=split, subset=subset, source=source
                        )
                    )
            except UnicodeDecodeError:
                raise not_utf8(path) from None
            if len(instances) == before:  # an empty (e.g. truncated) download must not become an empty dataset
                raise DataFormatError(
                    path, None, f"no records: the file is empty (scenario {spec.name!r}, split {split!r})"
                )
    return [i for i in instances if i is not None]


def _source(spec: ScenarioSpec, path: Path) -> SourceFile:
    return SourceFile(
        uri=str(path), sha256=sha256_file(path), revision=spec.source.revision, num_bytes=path.stat().st_size
    )
