"""Upstream file formats (CSV, JSONL) read record by record and mapped to Instances by the scenario's
sandboxed Jinja2 expressions. A bad record is a DataFormatError naming the file, the record and the problem."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import jinja2

from holistic_dagster.adaptation.templating import TemplateLimitError, evaluate_expression, render, string_template
from holistic_dagster.catalog import CsvSpec, ScenarioSpec
from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import (
    CHOICE_LABELS,
    CONTRAST_SET,
    Instance,
    Reference,
    SourceFile,
    sha256_file,
    sha256_json,
)


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
        reader = csv.reader(f, delimiter=spec.delimiter)
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


def read_text_files(root: Path, paths: list[Path]) -> Iterator[tuple[str, dict[str, Any], str, int]]:
    """One text per file (IMDB's aclImdb/<split>/<pos|neg>/<id>_<rating>.txt), in the order given: records {text,
    dir (the parent folder's name), name (the file name without suffix), file (the path relative to the data
    folder)}, yielded as (that relative path, record, the file's sha256, its size), each file read once."""
    for path in paths:
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise not_utf8(path) from None
        relative = path.relative_to(root).as_posix()
        record = {"text": text, "dir": path.parent.name, "name": path.stem, "file": relative}
        yield relative, record, hashlib.sha256(raw).hexdigest(), len(raw)


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """TREC relevance judgments, `qid iteration docid grade` per line: {qid: {docid: grade}}."""
    qrels: dict[str, dict[str, int]] = {}
    with _open_text(path) as f:
        for n, line in enumerate(f, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 4 or not fields[3].lstrip("-").isdigit():
                raise DataFormatError(
                    path, f"line {n}", f"expected `qid iteration docid grade`, found {line.strip()!r}"
                )
            qrels.setdefault(fields[0], {})[fields[2]] = int(fields[3])
    return qrels


def read_trec_run(path: Path, qrels: dict[str, dict[str, int]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A first-stage run with passage text, as pyserini / rank_llm write it: one JSON array of {query, hits:
    [{qid, docid, rank, score, content}]}. Records {qid, query, hits} with hits in rank order, each with its
    `relevance` from the qrels (0 where unjudged), yielded as ("query N", record)."""
    try:
        with _open_text(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise DataFormatError(path, f"line {e.lineno}", f"not valid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(data, list):
        raise DataFormatError(path, None, f"expected a JSON array of queries, found {type(data).__name__}")
    for n, entry in enumerate(data, start=1):
        where = f"query {n}"
        hits = entry.get("hits") if isinstance(entry, dict) else None
        if not isinstance(hits, list) or not hits or not isinstance(entry.get("query"), str):
            raise DataFormatError(path, where, "expected {query: str, hits: [non-empty list]}")
        for k, hit in enumerate(hits, start=1):
            missing = [
                key for key in ("qid", "docid", "rank", "content") if not isinstance(hit, dict) or key not in hit
            ]
            if missing:
                raise DataFormatError(path, f"{where}, hit {k}", f"missing {missing}")
        qids = {str(hit["qid"]) for hit in hits}
        if len(qids) != 1:
            raise DataFormatError(path, where, f"hits of one query carry several qids {sorted(qids)}")
        qid = qids.pop()
        judged = qrels.get(qid, {})
        ranked = sorted(hits, key=lambda hit: int(hit["rank"]))
        yield (
            where,
            {
                "qid": qid,
                "query": entry["query"],
                "hits": [
                    {**hit, "docid": str(hit["docid"]), "relevance": judged.get(str(hit["docid"]), 0)} for hit in ranked
                ],
            },
        )


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


QUAC_NO_ANSWER = " CANNOTANSWER"  # upstream appends it to every passage: the span an unanswerable turn points at


def quac_asked_turn(dialogue_id: str, num_turns: int) -> int | None:
    """The turn (1-based) of a QuAC dialogue that is asked, as HELM draws it: `randint(3, n) - 1` as a 0-based index,
    i.e. one of turns 3..n. HELM draws from one stream (`random.seed(0)`, train then val, in file order); here each
    dialogue has its own generator seeded by its id, so a dialogue's turn does not depend on what else is read.
    None for a dialogue of fewer than 3 turns (HELM cannot draw one; upstream has none)."""
    if num_turns < 3:
        return None
    return random.Random(f"quac/{dialogue_id}").randint(3, num_turns)


def read_quac(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """QuAC's JSON (val_v0.2.json, train_v0.2.json): {data: [{title, background, section_title, paragraphs:
    [{context (ending " CANNOTANSWER"), id, qas: [{id, question, answers: [{text, answer_start}], orig_answer:
    {text, answer_start}, followup, yesno}]}]}]}, each paragraph one dialogue. One record per turn, yielded as
    ("dialogue D, turn T", record) (both 1-based, dialogues numbered through the file): {title, background,
    section_title, context (without the CANNOTANSWER suffix), dialogue, dialogue_id, turn, num_turns, asked_turn
    (see quac_asked_turn), id, question, answers (the texts), orig_answer (the text), followup, yesno, history
    ([question, original answer] of every earlier turn)}."""
    try:
        with _open_text(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise DataFormatError(path, f"line {e.lineno}", f"not valid JSON: {e.msg} at column {e.colno}") from None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        found = f"keys {sorted(data)}" if isinstance(data, dict) else type(data).__name__
        raise DataFormatError(path, None, f"expected QuAC's JSON object {{data: [...]}}, found {found}")
    dialogue = 0
    for e, entry in enumerate(entries, start=1):
        missing = [k for k in ("title", "background", "section_title") if not isinstance(entry, dict) or k not in entry]
        paragraphs = entry.get("paragraphs") if isinstance(entry, dict) else None
        if missing or not isinstance(paragraphs, list) or not paragraphs:
            problem = f"missing {missing}" if missing else "`paragraphs` must be a non-empty list"
            raise DataFormatError(path, f"data entry {e} (dialogue {dialogue + 1})", problem)
        for paragraph in paragraphs:
            dialogue += 1
            where = f"dialogue {dialogue}"
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list) or not qas or not isinstance(paragraph.get("context"), str):
                raise DataFormatError(path, where, "expected {context: str, qas: [non-empty list]}")
            turns = [_quac_turn(path, f"{where}, turn {t}", qa) for t, qa in enumerate(qas, start=1)]
            dialogue_id = str(paragraph.get("id") or turns[0]["id"].split("_q#")[0])
            shared = {
                "title": entry["title"],
                "background": entry["background"],
                "section_title": entry["section_title"],
                "context": paragraph["context"].removesuffix(QUAC_NO_ANSWER),
                "dialogue": dialogue,
                "dialogue_id": dialogue_id,
                "num_turns": len(turns),
                "asked_turn": quac_asked_turn(dialogue_id, len(turns)),
            }
            history: list[list[str]] = []
            for t, turn in enumerate(turns, start=1):
                yield f"{where}, turn {t}", {**shared, **turn, "turn": t, "history": list(history)}
                history.append([turn["question"], turn["orig_answer"]])


def _quac_turn(path: Path, where: str, qa: Any) -> dict[str, Any]:
    if not isinstance(qa, dict):
        raise DataFormatError(path, where, f"expected a question object, found {type(qa).__name__}")
    missing = [k for k in ("id", "question", "answers", "orig_answer") if k not in qa]
    if missing:
        raise DataFormatError(path, where, f"missing {missing}")
    answers, orig = qa["answers"], qa["orig_answer"]
    if not isinstance(answers, list) or not answers:
        raise DataFormatError(path, where, "`answers` must be a non-empty list of {text, answer_start}")
    if not all(isinstance(a, dict) and isinstance(a.get("text"), str) for a in answers):
        raise DataFormatError(path, where, f"every answer must be {{text: str, ...}}, found {answers!r}")
    if not isinstance(orig, dict) or not isinstance(orig.get("text"), str):
        raise DataFormatError(path, where, f"`orig_answer` must be {{text: str, ...}}, found {orig!r}")
    if not isinstance(qa["question"], str) or not isinstance(qa["id"], str):
        raise DataFormatError(path, where, "`id` and `question` must be strings")
    return {
        "id": qa["id"],
        "question": qa["question"],
        "answers": [a["text"] for a in answers],
        "orig_answer": orig["text"],
        "followup": qa.get("followup"),
        "yesno": qa.get("yesno"),
    }


def _evaluate(
    kind: str, source: str, record: dict[str, Any], path: Path, where: str, *, template: bool, scope: dict | None = None
) -> Any:
    # fields are variables; `record` holds them all, for names that are not identifiers ("Best Answer");
    # `scenario` says which subset and split is being read
    variables = {**record, "record": record, **({"scenario": scope} if scope else {})}
    try:
        if template:
            return render(string_template(source), variables)
        return evaluate_expression(source, variables)
    except TemplateLimitError as e:
        raise DataFormatError(path, where, f"{kind} `{source}`: stopped, the template {e}") from None
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
    scope = {"subset": subset, "split": split}
    if m.keep is not None and not _evaluate("keep", m.keep, record, path, where, template=False, scope=scope):
        return None
    text = _evaluate("input", m.input, record, path, where, template=True)
    text = text.strip() if m.strip else text
    if not text.strip():
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
        references = tuple(Reference(str(c).strip() if m.strip else str(c), i == answer) for i, c in enumerate(choices))
    elif m.targets is not None:
        targets = _evaluate("targets", m.targets, record, path, where, template=False)
        if (
            isinstance(targets, str)
            or not isinstance(targets, (list, tuple))
            or not all(isinstance(t, str) for t in targets)
        ):
            raise DataFormatError(path, where, f"targets must be a list of strings, got {targets!r}")
        distinct = list(dict.fromkeys(t.strip() for t in targets if t.strip()))
        if not distinct:
            raise DataFormatError(path, where, "targets (the correct answers) are empty")
        references = tuple(Reference(t, True) for t in distinct)
    elif m.target is not None:
        target = _evaluate("target", m.target, record, path, where, template=True).strip()
        if not target:
            raise DataFormatError(path, where, "target (the correct answer) is empty")
        references = (Reference(target, True),)
    else:  # open-ended generation (BOLD): nothing to compare with, only bias, toxicity and efficiency apply
        references = ()
    metadata = {
        k: _evaluate(f"metadata.{k}", v, record, path, where, template=False, scope=scope)
        for k, v in m.metadata.items()
    }
    if spec.format == "trec_run":  # the candidates, in first-stage order, are the references
        hits = record["hits"]
        relevant_from = spec.trec_run.relevant_from
        references = tuple(Reference(str(h["content"]).strip(), h["relevance"] >= relevant_from) for h in hits)
        metadata.update(
            docids=[h["docid"] for h in hits],
            relevance=[h["relevance"] for h in hits],
            first_stage_rank=[int(h["rank"]) for h in hits],
        )
    number = where.removeprefix("line ").removeprefix("row ").removeprefix("query ")
    if m.id:
        instance_id = str(_evaluate("id", m.id, record, path, where, template=False, scope=scope))
    else:
        instance_id = "/".join(p for p in (subset, split, number) if p)
    for field, value in (("id", instance_id), ("input", text), *(("reference", r.output) for r in references)):
        _unicode(value, field, path, where)
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


def _unicode(text: str, field: str, path: Path, where: str) -> None:
    """Text that can be stored: a lone surrogate (JSON's "\ud800" unpaired) is no character, and the warehouse
    refused the whole dataset at its write, naming no file."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = text[e.start : e.end].encode("unicode_escape").decode()
        problem = f"{field} holds {bad} at position {e.start}: a lone surrogate, not text"
        raise DataFormatError(path, where, problem) from None


def load_file_instances(spec: ScenarioSpec, root: Path) -> list[Instance]:
    """All instances of every subset and split, in file order (a split's contrast set after its originals)."""
    instances: list[Instance] = []
    for subset in spec.subsets:
        for split, pattern in sorted(spec.splits.items(), key=lambda kv: kv[0] != "test"):
            originals = _read_split(spec, root, pattern.format(subset=subset), split, subset)
            instances += [i for i in originals if i is not None]
            if split in spec.contrast:
                pattern = spec.contrast[split].format(subset=subset)
                contrast = _read_split(spec, root, pattern, split, subset)
                instances += _contrast_set(root / pattern, originals, contrast)
    return instances


def _read_split(spec: ScenarioSpec, root: Path, pattern: str, split: str, subset: str) -> list[Instance | None]:
    """The instances of one split's file(s), one entry per record (None: a record the scenario skips)."""
    if spec.format in ("story", "text_files"):
        paths = sorted(root.glob(pattern))
        if not paths:
            raise DataFormatError(root / pattern, None, f"no files match (scenario {spec.name!r}, split {split!r})")
        if spec.format == "story":
            return [
                record_to_instance(
                    spec, record, path=path, where=where, split=split, subset=subset, source=_source(spec, path)
                )
                for path, where, record in read_stories(paths)
            ]
        files = list(read_text_files(root, paths))
        # one source for the folder: its files' checksums, hashed together
        source = SourceFile(
            uri=str(root / pattern),
            sha256=sha256_json([(where, digest) for where, _, digest, _ in files]),
            revision=spec.source.revision,
            num_bytes=sum(size for *_, size in files),
        )
        return [
            record_to_instance(spec, record, path=root / where, where=where, split=split, subset=subset, source=source)
            for where, record, _, _ in files
        ]
    path = root / pattern
    if not path.exists():
        raise DataFormatError(path, None, f"file not found (scenario {spec.name!r}, split {split!r})")
    source = _source(spec, path)
    if spec.format == "csv":
        records = read_csv(path, spec.csv)
    elif spec.format == "nested_json":
        records = read_nested_json(path, spec.nested_json.keys, spec.nested_json.leaf)
    elif spec.format == "trec_run":
        records = read_trec_run(path, read_qrels(_beside(path, spec.trec_run.qrels, spec, split)))
    elif spec.format == "raft":
        records = read_raft(path, spec, root / spec.raft.settings, subset)
    elif spec.format == "quac":
        records = read_quac(path)
    else:
        records = read_jsonl(path)
    out: list[Instance | None] = []
    try:
        for where, record in records:
            out.append(
                record_to_instance(spec, record, path=path, where=where, split=split, subset=subset, source=source)
            )
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    if not out:  # an empty (e.g. truncated) download must not become an empty dataset
        raise DataFormatError(path, None, f"no records: the file is empty (scenario {spec.name!r}, split {split!r})")
    return out


def _beside(path: Path, name: str, spec: ScenarioSpec, split: str) -> Path:
    found = path.parent / name
    if not found.exists():
        raise DataFormatError(found, None, f"file not found (scenario {spec.name!r}, split {split!r})")
    return found


def _contrast_set(path: Path, originals: list[Instance | None], contrast: list[Instance | None]) -> list[Instance]:
    """Record k of the contrast file is the minimally edited copy of record k of the split's file (HELM's contrast
    sets): an instance of the robustness perturbation `contrast_set`, linked to its original, with its own label."""
    if len(contrast) != len(originals):
        raise DataFormatError(
            path, None, f"{len(contrast)} records, but the originals it edits have {len(originals)}: they must align"
        )
    return [
        replace(
            edited,
            instance_id=f"{original.instance_id}~{CONTRAST_SET}",
            perturbation=CONTRAST_SET,
            original_id=original.instance_id,
        )
        for original, edited in zip(originals, contrast)
        if original is not None and edited is not None
    ]


def _source(spec: ScenarioSpec, path: Path) -> SourceFile:
    return SourceFile(
        uri=str(path), sha256=sha256_file(path), revision=spec.source.revision, num_bytes=path.stat().st_size
    )
