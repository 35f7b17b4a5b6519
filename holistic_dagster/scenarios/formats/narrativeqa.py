"""narrativeqa_csv: NarrativeQA's upstream layout (google-deepmind/narrativeqa): qaps.csv (document_id, set,
question, answer1, answer2, ...) and, beside it, third_party/wikipedia/summaries.csv (document_id, set, summary),
read as HELM's NarrativeQAScenario reads them: one question drawn per story (random.seed(0) once, then per split in
HELM's order, train, valid, test, one random.choice per document in its first appearance's order), the story's
summary as the passage and both answers as references. HELM evaluates its valid and test splits: a scenario's test
split here is valid's records then test's, its train split train's (HELM's few-shot pool)."""

from __future__ import annotations

import csv
import random
from functools import lru_cache
from pathlib import Path
from typing import Any

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Reference
from holistic_dagster.scenarios.formats.base import FileFormat, Records, not_utf8

SUMMARIES = Path("third_party") / "wikipedia" / "summaries.csv"
HELM_SPLITS = ("train", "valid", "test")  # HELM's ALL_SPLITS, the order of its draws
OURS = {"train": ("train",), "test": ("valid", "test")}  # HELM's EVAL_SPLITS are valid and test


class NarrativeQaCsv(FileFormat):
    name = "narrativeqa_csv"

    def references(self, record, spec, references, metadata):
        # HELM's two references as written (not stripped, both kept when they are the same text): what importing
        # HELM's runs matches, and what its few-shot grouping reads
        return tuple(Reference(answer, True) for answer in record["answer"]), metadata

    def companions(self, path):
        return [path.parent / SUMMARIES]

    def records(self, path, spec, root, split, subset) -> Records:
        (summaries,) = self.companions(path)
        drawn = read_narrativeqa(path, path.stat().st_mtime_ns, summaries, _mtime(summaries))
        for helm_split in OURS[split]:
            yield from drawn[helm_split]


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        why = "file not found: NarrativeQA's summaries, beside qaps.csv in upstream's layout"
        raise DataFormatError(path, None, why) from None


@lru_cache(maxsize=2)  # the train and test splits read the same two files, drawn once
def read_narrativeqa(qaps: Path, _qaps_mtime: int, summaries: Path, _summaries_mtime: int) -> dict[str, list]:
    """{HELM split: [(where, record)]}: per story one question, {document_id, question (ending in "?"), passage (the
    story's summary), answer [answer1, answer2]}; where names the question's record and its summary's."""
    passages = {}
    for n, row in _rows(summaries, ("document_id", "set", "summary")):
        passages[(row["set"], row["document_id"])] = (n, row["summary"])
    questions: dict[str, dict[str, list]] = {s: {} for s in HELM_SPLITS}
    for n, row in _rows(qaps, ("document_id", "set", "question", "answer1", "answer2")):
        if row["set"] in questions:
            questions[row["set"]].setdefault(row["document_id"], []).append((n, row))
    draw, order = random.Random(0), 0
    out: dict[str, list] = {}
    for split in HELM_SPLITS:
        out[split] = []
        for document_id, rows in questions[split].items():
            n, row = draw.choice(rows)
            if (split, document_id) not in passages:
                raise DataFormatError(qaps, str(n), f"story {document_id!r} ({split}) has no summary in {summaries}")
            m, summary = passages[(split, document_id)]
            question = row["question"].strip()
            record: dict[str, Any] = {
                "document_id": document_id,
                "question": question if question.endswith("?") else question + "?",
                "passage": summary.strip(),
                "answer": [row["answer1"], row["answer2"]],
            }
            # placed in HELM's order (its instances, train, valid, test, each story where it first appears), which
            # HELM's draw of the evaluated ones and of the few-shot examples follows, not qaps.csv's rows
            order += 1
            out[split].append((f"order {order} (record {n}, its summary: {SUMMARIES} record {m})", record))
    return out


def _rows(path: Path, needed: tuple[str, ...]):
    """(record number, record) of a CSV file as HELM reads it (csv.DictReader over the text), its columns checked."""
    try:
        yield from _read_rows(path, needed)
    except UnicodeDecodeError:
        raise not_utf8(path) from None


def _read_rows(path: Path, needed: tuple[str, ...]):
    with path.open(encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise DataFormatError(
                path, "0 (the header)", f"no column(s) {', '.join(missing)} (found: {reader.fieldnames})"
            )
        for n, row in enumerate(reader, start=1):
            if any(row[c] is None for c in needed):
                raise DataFormatError(path, str(n), f"fewer fields than the header's {len(reader.fieldnames)}")
            yield n, row
