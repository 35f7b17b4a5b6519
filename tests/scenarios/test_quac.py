"""QuAC: the loader on dialogues written here in the upstream JSON layout (no copy of QuAC exists on this machine),
HELM's prompt and references, malformed files, and what happens without the data."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from holistic_dagster.errors import DataFormatError, DataUnavailableError
from holistic_dagster.scenarios import load_instances, sources
from holistic_dagster.scenarios.formats.quac import quac_asked_turn
from holistic_dagster.scenarios.loaders import load_file_instances
from tests.conftest import write


def qa(qid: str, question: str, *answers: str, orig: str | None = None) -> dict:
    return {
        "id": qid,
        "question": question,
        "answers": [{"text": a, "answer_start": 0} for a in answers],
        "orig_answer": {"text": orig if orig is not None else answers[0], "answer_start": 0},
        "followup": "y",
        "yesno": "x",
    }


# Dialogue C_c3d4_1 (4 turns) is asked at turn 4 and C_a1b2_0 (3 turns) at turn 3 (see quac_asked_turn).
VAL = {
    "data": [
        {
            "title": "Ada Lovelace",
            "background": "Augusta Ada King, Countess of Lovelace, was an English mathematician.",
            "section_title": "Analytical Engine",
            "paragraphs": [
                {
                    "context": "She translated Menabrea's article and added notes. Note G held an algorithm. "
                    "CANNOTANSWER",
                    "id": "C_c3d4_1",
                    "qas": [
                        qa("C_c3d4_1_q#0", "What did she translate?", "Menabrea's article"),
                        qa("C_c3d4_1_q#1", "Did she add anything?", "added notes", "notes"),
                        qa("C_c3d4_1_q#2", "What was in Note G?", "an algorithm"),
                        qa(
                            "C_c3d4_1_q#3",
                            "Was it the first program?",
                            "Note G held an algorithm.",
                            "an algorithm",
                            "Note G held an algorithm.",
                            orig="Note G held an algorithm.",
                        ),
                    ],
                }
            ],
        },
        {
            "title": "Alan Turing",
            "background": "Alan Mathison Turing was an English computer scientist.",
            "section_title": "Early life",
            "paragraphs": [
                {
                    "context": "Turing was born in Maida Vale, London. CANNOTANSWER",
                    "id": "C_a1b2_0",
                    "qas": [
                        qa("C_a1b2_0_q#0", "Where was he born?", "Maida Vale, London", orig="in Maida Vale, London"),
                        qa("C_a1b2_0_q#1", "Who were his parents?", "CANNOTANSWER"),
                        qa("C_a1b2_0_q#2", "Did he have siblings?", "CANNOTANSWER", "CANNOTANSWER"),
                    ],
                }
            ],
        },
    ]
}

TRAIN = {
    "data": [
        {
            "title": "Grace Hopper",
            "background": "Grace Brewster Hopper was an American computer scientist.",
            "section_title": "UNIVAC",
            "paragraphs": [
                {
                    "context": "Her team wrote the A-0 compiler. CANNOTANSWER",
                    "id": "C_e5f6_0",
                    "qas": [
                        qa("C_e5f6_0_q#0", "What did her team write?", "the A-0 compiler"),
                        qa("C_e5f6_0_q#1", "When?", "CANNOTANSWER"),
                        qa("C_e5f6_0_q#2", "Was it used?", "CANNOTANSWER"),
                    ],
                }
            ],
        }
    ]
}


def write_quac(root, val=VAL, train=TRAIN) -> None:
    write(root / "val_v0.2.json", json.dumps(val))
    write(root / "train_v0.2.json", json.dumps(train))


def test_quac_one_instance_per_dialogue_with_helms_prompt_and_references(catalog, tmp_path):
    root = tmp_path / "quac"
    write_quac(root)
    instances = load_file_instances(catalog.scenario("quac"), root)
    assert [(i.instance_id, i.split, i.record) for i in instances] == [
        ("C_c3d4_1_q#3", "test", "dialogue 1, turn 4"),
        ("C_a1b2_0_q#2", "test", "dialogue 2, turn 3"),
        ("C_e5f6_0_q#2", "train", "dialogue 1, turn 3"),
    ]
    ada, turing, hopper = instances
    # HELM's layout; the turn just before the asked one is not shown (HELM's `range(k - 1)`), earlier answers
    # are the original answers, the passage loses its CANNOTANSWER suffix
    assert ada.input == (
        "Title: Ada Lovelace\n\n"
        "Background: Augusta Ada King, Countess of Lovelace, was an English mathematician.\n\n"
        "Section: Analytical Engine\n"
        "Passage: She translated Menabrea's article and added notes. Note G held an algorithm.\n\n"
        "Question: What did she translate?\nAnswer: Menabrea's article\n\n"
        "Question: Did she add anything?\nAnswer: added notes\n\n"
        "Question: Was it the first program?"
    )
    assert "Note G?" not in ada.input
    # every distinct answer is correct
    assert [(r.output, r.correct) for r in ada.references] == [
        ("Note G held an algorithm.", True),
        ("an algorithm", True),
    ]
    assert turing.input.endswith(
        "Passage: Turing was born in Maida Vale, London.\n\n"
        "Question: Where was he born?\nAnswer: in Maida Vale, London\n\n"
        "Question: Did he have siblings?"
    )
    assert [r.output for r in turing.references] == [
        "CANNOTANSWER",
        "Not enough information",
        "Cannot answer",
        "Do not know",
    ]
    assert hopper.input.startswith("Title: Grace Hopper\n\n") and hopper.references[0].output == "CANNOTANSWER"
    assert all(not i.is_multiple_choice and i.source.uri.endswith(".json") for i in instances)
    # the draw is fixed: the same turns on every load
    again = load_file_instances(catalog.scenario("quac"), root)
    assert [(i.instance_id, i.input) for i in again] == [(i.instance_id, i.input) for i in instances]


def test_quac_asked_turn_follows_helms_draw():
    """randint(3, n): never one of the first two turns, every later turn about equally often, fixed per id."""
    for n in (3, 4, 7, 12):
        turns = Counter(quac_asked_turn(f"C_{k:x}_0", n) for k in range(2000))
        assert set(turns) == set(range(3, n + 1))
        assert min(turns.values()) > 0.6 * 2000 / (n - 2)
    assert quac_asked_turn("C_c3d4_1", 4) == quac_asked_turn("C_c3d4_1", 4) == 4
    assert quac_asked_turn("C_short", 2) is None


def test_quac_malformed_files_name_the_file_and_the_dialogue(catalog, tmp_path):
    spec, root = catalog.scenario("quac"), tmp_path / "quac"
    write_quac(root)
    write(root / "val_v0.2.json", '{"data": [')
    with pytest.raises(DataFormatError, match=r"val_v0.2.json, record line 1: not valid JSON"):
        load_file_instances(spec, root)
    write(root / "val_v0.2.json", json.dumps({"version": "0.2"}))
    with pytest.raises(DataFormatError, match=r"val_v0.2.json: expected QuAC's JSON object \{data: \[...\]\}"):
        load_file_instances(spec, root)
    broken = json.loads(json.dumps(VAL))
    del broken["data"][1]["paragraphs"][0]["qas"][1]["answers"]
    write(root / "val_v0.2.json", json.dumps(broken))
    with pytest.raises(DataFormatError, match=r"val_v0.2.json, record dialogue 2, turn 2: missing \['answers'\]"):
        load_file_instances(spec, root)
    broken["data"][1]["paragraphs"][0]["qas"][1]["answers"] = []
    write(root / "val_v0.2.json", json.dumps(broken))
    with pytest.raises(DataFormatError, match=r"dialogue 2, turn 2: `answers` must be a non-empty list"):
        load_file_instances(spec, root)
    del broken["data"][0]["background"]
    write(root / "val_v0.2.json", json.dumps(broken))
    with pytest.raises(DataFormatError, match=r"record data entry 1 \(dialogue 1\): missing \['background'\]"):
        load_file_instances(spec, root)


def test_quac_without_data_offline_says_what_to_do(catalog, tmp_path, monkeypatch):
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HOLISTIC_OFFLINE", "1")
    with pytest.raises(DataUnavailableError) as e:
        load_instances(catalog.scenario("quac"))
    message = str(e.value)
    assert message.startswith("scenario 'quac': no local copy and downloads are off; ")
    assert "set HOLISTIC_DATA_DIR to a folder that contains `quac/`" in message
    assert "val_v0.2.json and train_v0.2.json" in message and "HOLISTIC_OFFLINE" in message
    # a local copy where the message says is read
    write_quac(tmp_path / "data" / "quac")
    assert len(load_instances(catalog.scenario("quac"))) == 3


def test_quac_download_fetches_each_split_file(catalog, tmp_path, monkeypatch):
    """With downloads on, each split's file comes from the upstream URL with its file name ({file})."""
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOLISTIC_DATA_DIR", "")
    monkeypatch.delenv("HOLISTIC_OFFLINE")
    fetched = []

    def fake_fetch(url, dest):
        fetched.append(url)
        dest.write_text(json.dumps(VAL if url.endswith("val_v0.2.json") else TRAIN), encoding="utf-8")

    monkeypatch.setattr(sources, "_fetch", fake_fetch)
    assert len(load_instances(catalog.scenario("quac"))) == 3
    assert sorted(fetched) == [
        "https://s3.amazonaws.com/my89public/quac/train_v0.2.json",
        "https://s3.amazonaws.com/my89public/quac/val_v0.2.json",
    ]
