"""quac: QuAC's JSON of dialogues, one record per turn, each with the dialogue's earlier turns as its history."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holistic_dagster.errors import DataFormatError
from holistic_dagster.scenarios.formats.base import FileFormat, Records, open_text


class Quac(FileFormat):
    name = "quac"

    def records(self, path, spec, root, split, subset) -> Records:
        return read_quac(path)


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
        with open_text(path) as f:
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
