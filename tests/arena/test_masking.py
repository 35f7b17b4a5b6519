"""The masking policy (shadow.masking, shadow.broad): personal data masked by its shape in any language, typed and
numbered placeholders consistent within a log, benign look-alikes kept, and the figures on values drawn from
Faker's locales with a seed of the tests' own (bench/pii_masking.py reports another)."""

from __future__ import annotations

import datetime
import importlib.util
from pathlib import Path

import pytest
from pydantic import ValidationError

from holistic_dagster.config.shadow import PiiSpec
from holistic_dagster.shadow.masking import Masker
from holistic_dagster.shadow.pii_check import find_pii

TODAY = datetime.date(2026, 12, 6)


@pytest.fixture(scope="module")
def masker():
    return Masker(today=TODAY)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Write to jo dot doe at mail dot com today", "doe"),
        ("jo(at)mail(dot)org is my address", "jo(at)"),
        ("reach me at kenji＠example．jp", "kenji"),
        ("call five five five, one two three four please", "one two three"),
        ("номер восемь девять один шесть пять пять", "девять"),
        ("رقمي ٠٥٥١٢٣٤٥٦٧ شكرا", "٠٥٥١٢٣٤٥٦٧"),  # Arabic-Indic digits
        ("電話は０９０１２３４５６７８です", "０９０１２３４５６７８"),  # full-width digits run into Japanese
        ("昨日7381:41fc:885b:ee51:7b62:58aa:5984:998dから", "41fc"),  # IPv6 inside unspaced text
        ("Member 4815 1623 42 asked again", "4815"),  # an account-like number with no cue saying what it is
        ("Pay into DE89370400440532013000 or de89370400440532013000", "0532013000"),  # hex-shaped, yet no hash
        ("Details: 6308 Moran Trail", "Moran"),
        ("Neem contact op met Kyradreef 230.", "Kyradreef"),
        ("Kontaktujte prosím Žofie Havlíčková.", "Havlíčková"),
        ("Adatok: Orosz Varga Lajos", "Lajos"),
        ("נא לפנות אל אליאב כהן בנושא.", "אליאב"),
        ("情報：高橋 くみ子", "くみ子"),
        ("Dados: June 25, 1974", "1974"),  # a date from a birth year, no cue
        ("I turned 30 on my birthday, 2019-04-01", "2019-04-01"),  # a recent date after a birth cue
    ],
)
def test_what_could_identify_somebody_is_masked_whatever_its_language_or_format(masker, text, value):
    masked = masker.mask(text)
    assert value not in masked, masked
    assert find_pii(masked) == []  # and the independent check finds nothing left


@pytest.mark.parametrize(
    "text",
    [
        "ISBN 978-0-15-244939-1 is out of print.",
        "EAN 0926685878409 scanned at the till.",
        "Request 770348a0-5d30-4cb9-8706-a045defc044a failed; reverted commit 8f481fd0a8.",
        "The job finished at 1992-05-15T17:17:27.539712 and again at 10:30:00.",
        "Upgrade to version 10.0.19045.2965 first; python 3.11.4 is fine.",
        "Tracking number 1Z270EK631549801 shows it left the depot.",
        "Invoice INV-2026-48213 totals 1,234.56 EUR; order 482913765 ships on 2026-12-10.",
        "The HttpServletRequest class of Globex Corporation throws on null.",
        "What is the capital of France? Paris, population 2,102,650.",
    ],
)
def test_benign_look_alikes_are_kept_as_written(masker, text):
    assert masker.mask(text) == text


def test_placeholders_are_typed_and_numbered_by_value_within_a_log():
    masker = Masker(today=TODAY)
    first = masker.mask("Maria Schneider (+44 20 7946 0958) wrote to bob@corp.example.")
    second = masker.mask("Call +44 20 7946 0958 again; cc alice@corp.example and bob@corp.example.")
    assert first == "[PERSON_1] ([PHONE_1]) wrote to [EMAIL_1]."
    assert second == "Call [PHONE_1] again; cc [EMAIL_2] and [EMAIL_1]."
    assert masker.sweep("Thanks Maria, and Schneider too") == "Thanks [PERSON_1], and [PERSON_1] too"
    assert Masker(today=TODAY).mask("bob@corp.example") == "[EMAIL_1]"  # a new log numbers from 1


def test_the_precise_policy_keeps_benign_numbers_and_misses_what_it_has_no_format_for():
    precise = Masker("precise", today=TODAY)
    assert precise.mask("Member 4815 1623 42 asked; jo dot doe at mail dot com") == (
        "Member 4815 1623 42 asked; jo dot doe at mail dot com"
    )
    assert precise.mask("Maria Schneider, +44 20 7946 0958") == "[PERSON_1], [PHONE_1]"
    # what the precise policy left is a finding of the mask policy's complement
    assert {f.entity for f in find_pii("Member 4815 1623 42 asked; jo dot doe at mail dot com")} >= {
        "SURVIVING_NUMBER",
        "SURVIVING_EMAIL",
    }


def test_an_unknown_policy_is_refused_naming_the_known_ones():
    with pytest.raises(ValidationError, match="mask"):
        PiiSpec(policy="loose")
    with pytest.raises(ValueError, match="known are mask, precise"):
        Masker("loose")


def _bench():
    path = Path(__file__).parents[2] / "bench" / "pii_masking.py"
    spec = importlib.util.spec_from_file_location("pii_masking_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_values_drawn_from_fakers_locales_are_kept_out_and_no_record_is_lost():
    """Seed 11, never used while writing the rules (the report's seed is 2026): through read_traffic, every
    planted value of 11 categories in 25 locales kept out of what is stored and sent, benign look-alikes kept,
    no record quarantined."""
    result = _bench().measure(seed=11, per_category=12, policy="mask")
    planted = [sum(v[i] for v in result["recall"].values()) for i in (0, 1)]
    benign = [sum(v[i] for v in result["benign"].values()) for i in (0, 1)]
    assert planted[0] / planted[1] >= 0.97, result["misses"]
    assert benign[0] / benign[1] >= 0.8, result["changed"]
    assert result["lost"] == 0
