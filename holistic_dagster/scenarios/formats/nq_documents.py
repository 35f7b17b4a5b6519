"""nq_documents: NaturalQuestions' full files (nq-dev-NN.jsonl.gz: each question with its Wikipedia page's HTML and
the annotators' long and short answers as byte spans), read as HELM's NaturalQAScenario reads them (a split's
pattern is a glob: the files, read in name order as one stream)."""

from __future__ import annotations

import html
import json
import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from holistic_dagster.errors import DataFormatError
from holistic_dagster.scenarios.formats.base import GZIP_ERRORS, FileFormat, not_gzip, open_text, source_file


class NqDocuments(FileFormat):
    name = "nq_documents"
    globbed = True

    def file_records(self, spec, root, pattern, paths):
        for path, where, record in read_nq_documents(tuple((p, p.stat().st_mtime_ns) for p in paths)):
            yield path, where, record, source_file(spec, path)


def clean(raw: bytes) -> str:
    """A span of the page's HTML as HELM cleans it: no-break spaces as spaces, entities unescaped, tags removed."""
    return re.sub("<([^>]*)>", "", html.unescape(raw.replace(b"\xc2\xa0", b" ").decode("utf-8")))


@lru_cache(maxsize=1)  # both splits read the same files (about 1 GB): parsed once per process
def read_nq_documents(files: tuple[tuple[Path, int], ...]) -> list[tuple[Path, str, dict[str, Any]]]:
    """Records (path, "line N", record) of the questions with a short answer, as HELM keeps them, in file order:
    {example_id, question (capitalized, ending in "?"), split (HELM's: the even ones of each file train, the odd
    ones test), passage (the long answer of the short answer HELM draws: random.seed(0), one randint per question
    over all the files), answers (train: that short answer; test: every distinct one)}."""
    draw = random.Random(0)
    out = []
    for path, _ in files:
        out += _records(path, draw)
    return out


def _records(path: Path, draw: random.Random) -> list[tuple[Path, str, dict[str, Any]]]:
    """One file's records (see read_nq_documents); a .gz file cut off or none at all names the file and the last
    line read."""
    out, kept, n = [], 0, 0
    try:
        with open_text(path) as f:
            for n, line in enumerate(f, start=1):
                where = f"line {n}"
                try:
                    raw = json.loads(line)
                    short, long = _answers(raw)
                    question = str(raw["question_text"])
                except (ValueError, KeyError, TypeError) as e:
                    raise DataFormatError(path, where, f"not a NaturalQuestions record ({type(e).__name__}: {e})")
                if not short:
                    continue
                split = "train" if kept % 2 == 0 else "test"
                kept += 1
                question = question.capitalize()
                question += "" if question.endswith("?") else "?"
                k = draw.randint(0, len(short) - 1)
                answers = short[k : k + 1] if split == "train" else list(dict.fromkeys(short))
                record = {"example_id": str(raw.get("example_id", n)), "question": question, "split": split}
                out.append((path, where, {**record, "passage": long[k], "answers": answers}))
    except GZIP_ERRORS as e:
        raise not_gzip(path, f"after line {n}" if n else None, e) from None
    return out


def _answers(raw: dict) -> tuple[list[str], list[str]]:
    """(every annotator's short answers, and beside each the long answer of the same annotator), HELM's lists."""
    page = raw["document_html"].encode("utf-8")
    short, long = [], []
    for annotation in raw["annotations"]:
        span = annotation["long_answer"]
        long_answer = clean(page[span["start_byte"] : span["end_byte"]])
        for answer in annotation["short_answers"]:
            short.append(clean(page[answer["start_byte"] : answer["end_byte"]]))
            long.append(long_answer)
    return short, long
