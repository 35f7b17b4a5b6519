"""Personal data in shadow traffic: a planted corpus across categories and formats, every value removed (recall per
category), clean text left alone (dates, versions, order numbers, prices), every stored field covered, malformed
records quarantined without their text, and the pii_removed check run by a detector of its own that fails closed."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from holistic_dagster import quality
from holistic_dagster.config.shadow import CATEGORIES, ShadowSpec
from holistic_dagster.shadow import pii_check, read_traffic
from holistic_dagster.shadow.pii import PiiRemover
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write

# (category, value, the sentence it is planted in): several national and separator-free formats per category
PLANTED = [
    ("email", "bob@corp.example", "Write to {} today."),
    ("email", "jürgen.müller@exämple.de", "Meine Adresse: {}."),
    ("email", "o'neil+tag@mail.co.uk", "cc {}"),
    ("email", "ops@xn--80ak6aa92e.com", "Mail {} please."),
    ("email", "root@[192.168.10.1]", "The old host {} still answers."),
    ("phone", "+1 415 555 0100", "Call me on {}."),
    ("phone", "4155550100", "my cell is {} thanks"),
    ("phone", "(415) 555-0123", "Office: {}"),
    ("phone", "+44 20 7946 0958", "London desk {}"),
    ("phone", "07700 900123", "UK mobile {}"),
    ("phone", "030 12345678", "Berlin Büro {}"),
    ("phone", "+49 30 901820", "Zentrale {}"),
    ("phone", "01 42 68 53 00", "Paris {}"),
    ("phone", "+919876543210", "WhatsApp {}"),
    ("iban", "DE89370400440532013000", "Bitte auf {} überweisen."),
    ("iban", "GB82 WEST 1234 5698 7654 32", "Pay into {} by Friday."),
    ("iban", "FR1420041010050500013M02606", "IBAN {}"),
    ("credit_card", "4111 1111 1111 1111", "Card {} exp 12/27"),
    ("credit_card", "5555555555554444", "card number {}"),
    ("national_id", "123-45-6789", "SSN {}"),
    ("national_id", "AB 12 34 56 C", "NI number {}"),
    ("national_id", "36574261809", "Steuer-ID {}"),
    ("national_id", "1 85 05 78 006 084 91", "Numéro de sécurité sociale {}"),
    ("national_id", "12345678Z", "DNI {}"),
    ("national_id", "RSSMRA85T10A562S", "codice fiscale {}"),
    ("national_id", "2345 6789 0124", "Aadhaar {}"),
    ("national_id", "111.444.777-35", "CPF {}"),
    ("ip", "192.168.1.23", "my router is {}"),
    ("ip", "2001:db8:85a3::8a2e:370:7334", "IPv6 {}"),
    ("ip", "fe80::1%eth0", "link-local {}"),
    ("secret", "sk-proj-abcdefghijklmnop1234", "my key is {}"),
    ("secret", "hunter2", "my password is {}"),
    ("secret", "correct-horse-battery", "password: {}"),
    ("secret", "4711", "PIN: {}"),
    ("secret", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "token {}"),
    ("person", "Maria Schneider", "Hi, I am {} from accounting."),
    ("person", "John O'Brien", "Please forward this to {}."),
    ("person", "Priya Natarajan", "Dr. {} signed it."),
    ("address", "221B Baker Street", "I live at {}, London."),
    ("address", "1600 Pennsylvania Avenue NW", "Send it to {}, Washington."),
    ("address", "Hauptstraße 5, 10115 Berlin", "Wohnhaft in der {}."),
    ("address", "12 rue de la Paix", "Livraison au {}, Paris."),
    ("address", "NW1 6XE", "postcode {}"),
    ("address", "DC 20500", "Washington, {}"),
    ("address", "P.O. Box 4711", "Mail to {}"),
    # beyond English: names in other scripts, other countries' addresses, dates of birth, keys in config lines
    ("person", "Ольга Смирнова", "Здравствуйте, меня зовут {}."),
    ("person", "Дмитрий", "Спасибо, {} Иванович будет рад."),
    ("person", "李娜", "您好，我叫{}，想查询订单。"),
    ("person", "山本健", "私は{}です。"),
    ("person", "فاطمة الزهراء", "مرحبا، اسمي {} وأحتاج مساعدة"),
    ("person", "Νίκος Κωνσταντίνου", "Ο {} θα σας καλέσει."),
    ("person", "박지훈", "제 이름은 {}입니다."),
    ("person", "Jürgen Weiß", "Mein Name ist {}, Kundennummer folgt."),
    ("address", "ul. Długa 44/50, 80-827 Gdańsk", "Proszę wysłać na adres {}."),
    ("address", "〒530-0001 大阪府大阪市北区梅田3-1-3", "住所は{}です。"),
    ("address", "8 boulevard Haussmann, 75009 Paris", "Adresse : {}"),
    ("address", "ул. Тверская, д. 7, кв. 15", "Доставка: {}"),
    ("date_of_birth", "1987-11-23", "DOB {}"),
    ("date_of_birth", "23.11.1987", "Geburtsdatum: {}"),
    ("date_of_birth", "November 23, 1987", "I was born on {} in Ohio."),
    ("date_of_birth", "23 novembre 1987", "Je suis née le {}."),
    ("date_of_birth", "1987年11月23日", "生年月日：{}"),
    ("national_id", "C01X00T47", "Meine Reisepassnummer ist {}."),
    ("national_id", "5678 1234 9012", "my Aadhaar number is {}"),  # no valid checksum: the cue says what it is
    ("secret", "Pr0d-Db!2026", "DB_PASSWORD={}"),
    ("secret", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "the secret key is {} (do not share)"),
    ("secret", "q8Zt2LmN4vR7xK1pW9sD3fG6hJ0cB5aE", "use {} in the header"),
    ("secret", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\n-----END RSA PRIVATE KEY-----", "k:\n{}\n"),
    ("date_of_birth", "14-Mar-1985", "DOB {}"),
    ("date_of_birth", "19850314", "Date of birth: {}"),
    ("address", "東京都千代田区丸の内一丁目9番1号", "本社は{}にあります。"),
    ("person", "王伟", "请联系{}处理退款。"),
    ("person", "Anna Kowalski", "Please call {} tomorrow."),
]
CLEAN = [
    "Order 12345 shipped on 2026-12-01 for $19.99.",
    "We upgraded to version 3.2.1 (build 20261201) on 12/01/2026 at 10:30:00.",
    "Invoice INV-2026-0042 totals 1,234.56 EUR; ticket 4711 is closed.",
    "ISBN 978-3-16-148410-0, chapter 7, page 212, 3.14159 and 2.71828.",
    "What is the capital of France? The Eiffel Tower is 330 m tall.",
    "Use python 3.11, numpy 2.4.6 and port 8080; the sha256 is e3b0c44298fc1c149afbf4c8996fb924.",
    # numbers that look like phones or identifiers but say what they are, and words an English NER model tags
    "Your order number is 482913765.",
    "Your order number is 4829137650, ticket 739201846 and invoice 2210394857.",
    "We upgraded the cluster to 3.10.1.2 last night; the event time was 1733356800.",
    "The Boeing 737 config is in config.yaml. Email: see the attached form.",
    "Tracking number 9400110200881234567890 shows it left Memphis.",
]


@pytest.fixture(scope="module")
def remover():
    return PiiRemover()


def test_every_planted_value_is_removed_with_its_category(remover):
    recall: dict[str, list[bool]] = {c: [] for c in CATEGORIES}
    for category, value, sentence in PLANTED:
        cleaned = remover.remove(sentence.format(value))
        recall[category].append(value not in cleaned)
    missed = [(c, v, remover.remove(s.format(v))) for (c, v, s) in PLANTED if v in remover.remove(s.format(v))]
    assert missed == []
    assert {c: sum(hits) / len(hits) for c, hits in recall.items()} == dict.fromkeys(CATEGORIES, 1.0)


def test_clean_text_is_left_as_it_is(remover):
    assert [remover.remove(text) for text in CLEAN] == CLEAN


def test_the_independent_detector_finds_what_a_weaker_remover_leaves():
    # the detector shares no pattern with the remover: with only e-mails removed, it still sees the rest
    text = "I am Maria Schneider, call +44 20 7946 0958, IBAN DE89370400440532013000, card 4111 1111 1111 1111."
    weak = PiiRemover(("email",)).remove(text)
    from holistic_dagster.shadow.masking import Masker
    from holistic_dagster.shadow.pii_check import find_pii

    assert {f.entity for f in find_pii(weak, policy="precise")} >= {
        "PERSON",
        "PHONE_NUMBER",
        "IBAN_CODE",
        "CREDIT_CARD",
    }
    # under the mask policy the policy's complement finds what survived too, by its shape
    assert {f.entity for f in find_pii(weak)} >= {"SURVIVING_NAME", "SURVIVING_NUMBER"}
    precise = Masker("precise")
    assert [find_pii(precise.mask(text), policy="precise"), *(find_pii(t, policy="precise") for t in CLEAN)] == [[]] * (
        1 + len(CLEAN)
    )
    masker = Masker()
    assert [find_pii(masker.mask(t)) for t in [text, *CLEAN]] == [[]] * (1 + len(CLEAN))


def _record(k: int, **overrides) -> dict:
    record = {
        "id": f"req-{k}",
        "timestamp": "2026-12-01T10:00:00+01:00",
        "metadata": {"route": "billing"},
        "request": {"messages": [{"role": "user", "content": "What is my balance?"}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "12 EUR"}}]},
    }
    return {**record, **overrides}


def test_ids_slices_times_and_every_message_part_are_cleaned(tmp_path):
    messages = [
        {"role": "system", "content": "Agent for Maria Schneider (maria@corp.example)."},
        {"role": "user", "content": [{"type": "text", "text": "My IBAN is DE89370400440532013000"}, {"type": "image"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": '{"iban": "x"}'}}]},
        {"role": "tool", "content": "account of John O'Brien, +44 20 7946 0958"},
        {"role": "user", "content": "and my password is hunter2"},
    ]
    lines = [
        _record(
            0,
            id="alice@corp.example/1",
            timestamp="2026-12-01 10:00 by alice@corp.example",
            metadata={"route": "vip-+44 20 7946 0958"},
            request={"messages": messages},
            response={"choices": [{"message": {"content": "Sent to 4111 1111 1111 1111."}}]},
        ),
        _record(1, timestamp=1764583200),
    ]
    path = write(tmp_path / "log.jsonl", "".join(json.dumps(r) + "\n" for r in lines))
    (first, second), quarantined = read_traffic(path, ShadowSpec(candidates=("a",), judge="j"))
    assert quarantined == []
    stored = json.dumps([first.record_id, first.slice, first.messages, first.prompt, first.response, first.logged_at])
    for value in ("alice", "Maria", "maria@", "DE8937", "O'Brien", "7946", "hunter2", "4111", "corp.example"):
        assert value not in stored, value
    # typed placeholders, numbered by value within the log: the phone of the slice is the tool message's phone
    assert first.record_id == "[EMAIL_2]/1" and first.slice == "vip-[PHONE_1]" and first.logged_at == ""
    assert first.messages[3]["content"] == "account of [PERSON_2], [PHONE_1]"
    assert [m["role"] for m in first.messages] == ["system", "user", "assistant", "tool", "user"]
    assert first.messages[1]["content"] == "My IBAN is [IBAN_1]" and first.response == "Sent to [CREDIT_CARD_1]."
    assert second.logged_at == "2025-12-01T10:00:00Z"  # an epoch time, normalized; free text is never a time
    assert (
        _record(0)["timestamp"]
        and read_traffic(
            write(tmp_path / "t.jsonl", json.dumps(_record(0)) + "\n"), ShadowSpec(candidates=("a",), judge="j")
        )[0][0].logged_at
        == "2026-12-01T09:00:00Z"
    )


def test_a_malformed_record_is_quarantined_without_its_text_and_the_rest_is_read(tmp_path):
    secret = "bob@corp.example +44 20 7946 0958"
    lines = [
        json.dumps(_record(0)),
        json.dumps(
            _record(1, response={"choices": [{"message": {"content": "ok"}}], "usage": {"completion_tokens": secret}})
        ),
        '{"id": "x", "request": {"prompt": "' + secret + '"',  # cut off
        json.dumps(_record(2, request={"messages": [{"role": "assistant", "content": secret}]})),
        json.dumps(_record(0)),  # the same id again
        '{"id": "deep", "request": ' + "[" * 100_000 + "]" * 100_000 + "}",  # too deep for the JSON reader
    ]
    path = tmp_path / "log.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"id": "\xff\xfe ' + secret.encode() + b'"}\n')
    records, quarantined = read_traffic(path, ShadowSpec(candidates=("a",), judge="j"))
    assert [r.record_id for r in records] == ["req-0"]
    assert [q.line for q in quarantined] == [2, 3, 4, 5, 6, 7]
    assert quarantined[0].reason == "response.usage.completion_tokens is not a count of tokens"
    assert quarantined[1].reason.startswith("not JSON") and quarantined[5].reason == "not UTF-8"
    assert quarantined[4].reason == "nested too deeply to read"  # one record, not the whole log
    assert all("bob" not in q.reason and "7946" not in q.reason for q in quarantined)


def _traffic_row(**text) -> dict:
    row = {
        "log": "l", "record_id": "req-0", "line": 1, "slice": "", "messages": "[]", "prompt": "p",
        "production": "production", "production_text": "a", "production_tokens": 1, "production_latency_s": None,
        "logged_at": "", "source_uri": "x", "source_sha256": "0",
    }  # fmt: skip
    return {**row, **text}


def test_the_check_finds_what_was_stored_and_fails_closed(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"log": "l"}, {"traffic": pd.DataFrame([_traffic_row(prompt="Hi, I am [PERSON_1] at [EMAIL_1].")])})
    (clean,) = quality.check_traffic(wh, "l")
    assert clean.passed, clean
    leaked = _traffic_row(line=2, record_id="req-1", production_text="Call Maria Schneider on +44 20 7946 0958")
    wh.replace({"log": "l"}, {"traffic": pd.DataFrame([_traffic_row(), leaked])})
    (dirty,) = quality.check_traffic(wh, "l")
    assert not dirty.passed and dirty.details["found"] == {
        2: "production_text: LONG_NUMBER/PERSON/PHONE_NUMBER/SURVIVING_NAME/SURVIVING_NUMBER"
    }
    assert "Maria" not in dirty.description and "7946" not in dirty.description
    (precise,) = quality.check_traffic(wh, "l", "precise")  # Presidio alone: the policy's shapes are no finding
    assert precise.details["found"] == {2: "production_text: LONG_NUMBER/PERSON/PHONE_NUMBER"}

    def broken(text, free_text=True, policy="mask"):
        raise RuntimeError("model missing")

    monkeypatch.setattr(pii_check, "find_pii", broken)
    (unchecked,) = quality.check_traffic(wh, "l")
    assert not unchecked.passed and "could not run: model missing" in unchecked.description


def test_what_the_detector_finds_after_the_masker_is_masked_too_and_no_record_is_lost(tmp_path, monkeypatch):
    """The independent detector reads every text before it is stored: what it still finds (here the precise policy
    is told to mask e-mail addresses only) is masked with a typed placeholder, and the record is kept (a record is
    quarantined only when it cannot be read); a detector that cannot run stores nothing."""
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.config.shadow import PiiSpec
    from holistic_dagster.errors import HolisticError
    from holistic_dagster.stages.context import StageContext
    from holistic_dagster.stages.shadow import load_traffic

    def log(*contents: str):
        records = [_record(k, request={"messages": [{"role": "user", "content": c}]}) for k, c in enumerate(contents)]
        return write(tmp_path / "log.jsonl", "".join(json.dumps(r) + "\n" for r in records))

    spec = ShadowSpec(candidates=("a",), judge="j", pii=PiiSpec(redact=("email",), policy="precise"))
    stage = StageContext(Warehouse(tmp_path / "w.duckdb"), Catalog())
    leaky = "I am Maria Schneider, call me on +44 20 7946 0958"
    metadata = load_traffic(stage, spec, "l", log("What is my balance?", leaky, "Mail me at bob@corp.example"))
    stored = stage.warehouse.df("SELECT line, messages::VARCHAR AS m, prompt FROM traffic ORDER BY line")
    assert stored["line"].tolist() == [1, 2, 3] and metadata["quarantined_lines"] == []
    assert stored["prompt"].tolist() == ["What is my balance?", "I am [PERSON_1], call me on [PHONE_1]",
                                         "Mail me at [EMAIL_1]"]  # fmt: skip
    (check,) = quality.check_traffic(stage.warehouse, "l", "precise")
    assert check.passed, check

    def broken(text, free_text=True, policy="mask"):
        raise RuntimeError("model missing")

    monkeypatch.setattr(pii_check, "find_pii", broken)
    with pytest.raises(HolisticError, match="could not run, nothing was stored: model missing"):
        load_traffic(stage, spec, "other", log("What is my balance?"))
    assert stage.warehouse.df("SELECT count(*) AS n FROM traffic WHERE log = 'other'")["n"].iat[0] == 0


def test_a_name_found_anywhere_in_a_log_is_removed_from_every_text_of_it(tmp_path):
    """The NER model tags a name in the user's message and may miss it in production's answer: found once, it
    is removed from every field of every record."""
    records = [
        _record(0, request={"messages": [{"role": "user", "content": "Hi, I am Maria Schneider from accounting."}]},
                response={"choices": [{"message": {"content": "Sure Maria, Schneider's invoice is attached."}}]}),
        _record(1, response={"choices": [{"message": {"content": "Thanks Maria"}}]}),
    ]  # fmt: skip
    path = write(tmp_path / "log.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    first, second = read_traffic(path, ShadowSpec(candidates=("a",), judge="j"))[0]
    assert "Maria" not in first.response and "Schneider" not in first.response and "Maria" not in second.response
    # one person, one placeholder: "Maria" alone and "Maria Schneider" in full are [PERSON_1] everywhere
    assert first.messages[0]["content"] == "Hi, I am [PERSON_1] from accounting."
    assert first.response.startswith("Sure [PERSON_1]") and second.response == "Thanks [PERSON_1]"
