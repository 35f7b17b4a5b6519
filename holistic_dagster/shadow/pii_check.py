"""The second pair of eyes behind `pii_removed`, run over every text before it is stored (what it finds is masked
too) and again over what was stored (the blocking check). Two methods, neither the masker's own typing rules:

- under the `mask` policy, the policy's complement: anything the policy would mask that survived in a text (a
  digit run, an e-mail-like string, a name-like word, a street, a possible birth date) is a finding, whoever let
  it through (a precise-only pass, a field the masker never saw, a value split across a sweep);
- Microsoft Presidio's analyzer, whatever the policy: its own recognizers for e-mail addresses, phone numbers,
  IBANs, credit cards, IP addresses and national identifiers of many countries, person names through spaCy, and
  detectors of its own: anything shaped like an e-mail address (x@y, whatever the domain: Presidio's e-mail
  recognizer accepts known top-level domains only) and long random-looking tokens (keys and passwords).

It shares spaCy's English model for names with the precise detectors (the only NER model that installs offline
here); the policy's complement does not depend on it. The check fails closed: when the detector cannot run, the
check fails and says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache, lru_cache

import pandas as pd

from holistic_dagster.shadow import broad, broad_words
from holistic_dagster.shadow.masking import MASK, PLACEHOLDER
from holistic_dagster.shadow.pii import SPACY_MODEL
from holistic_dagster.shadow.pii_context import FIELD_LABEL, FUNCTION_WORDS, a_quantity, is_ip, other_number

# what Presidio finds that is personal data; left out: dates, cities and countries (LOCATION: questions name
# them), organisations, URLs, nationalities (NRP), and its low-confidence US bank/driver-licence shapes
ENTITIES = (
    "PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "IBAN_CODE", "CREDIT_CARD", "IP_ADDRESS", "CRYPTO", "US_SSN",
    "US_ITIN", "US_PASSPORT", "UK_NHS", "UK_NINO", "ES_NIF", "ES_NIE", "IT_FISCAL_CODE", "IN_AADHAAR", "IN_PAN",
    "PL_PESEL", "FI_PERSONAL_IDENTITY_CODE", "SG_NRIC_FIN", "AU_TFN", "AU_MEDICARE", "KR_RRN",
)  # fmt: skip
MIN_SCORE = 0.4  # Presidio's phone numbers score 0.4 without context words; its weakest shapes score 0.01-0.05
_ANY_EMAIL = re.compile(r"[^\s@\[\]<>()\"',;:]+@[^\s@\[\]<>()\"',;:]+")
# a key's shape: upper and lower case mixed with digits (hashes and UUIDs are one case), base64's / and + included
_RANDOM_TOKEN = re.compile(r"(?<![\w/+=-])(?=[\w/+=-]*\d)(?=[\w/+=-]*[a-z])(?=[\w/+=-]*[A-Z])[\w/+=-]{20,}(?![\w/+=-])")
# the detector's own rules, written apart from the remover's: a value assigned to a key that names a secret,
# a date Presidio finds soon after a word about birth, and any long number left (9 digits or more) that no
# cue names as an order, ticket or invoice number
_SECRET_ASSIGNED = re.compile(r"(?i)\w*(?:pass|secret|token|key|pwd|credential)\w*\s*[=:]\s*(\S{4,})")
_BIRTH = re.compile(r"(?i)birth|born|\bdob\b|geb(?:oren|urt)|naissance|\bnée?\b|nacimiento|nacid|nascita|urodz|рожд"
                    r"|γενν|生年|出生|誕生|생년|ميلاد|جنم")  # fmt: skip
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")  # its header is enough: the key follows
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_LONG_NUMBER = re.compile(r"(?<![\w.])\d(?:[ .\-/]?\d){8,}(?![\w]|[.,]\d)")


# the stored texts of a traffic record, each with whether to look for key-shaped tokens in it (free text: yes;
# ids are random tokens by design)
TRAFFIC_TEXTS = {"record_id": False, "slice": False, "messages": True, "prompt": True, "production_text": True,
                 "logged_at": False}  # fmt: skip


class DetectorError(RuntimeError):
    """The detector could not run (a model missing, a library failing): no text it should have read is clean."""


@dataclass(frozen=True)
class Finding:
    entity: str
    start: int
    end: int
    score: float


@cache
def _analyzer():
    import tldextract.tldextract
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    configuration = {"nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": SPACY_MODEL}]}
    # Presidio's e-mail recognizer asks tldextract, which would fetch the public suffix list: its bundled snapshot
    tldextract.tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
    engine = NlpEngineProvider(nlp_configuration=configuration).create_engine()
    return AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])


def _a_name(text: str, start: int, end: int) -> bool:
    """Not a field's label ("Email: ..."), and no determiner in it ("Ihre Bestellnummer")."""
    words = text[start:end].lower().split()
    if broad_words.no_person(text, start, end):  # a company, a class name
        return False
    return not FIELD_LABEL.match(text, end) and not any(w in FUNCTION_WORDS for w in words)


def _another_kind_of_number(entity: str, text: str, start: int, end: int) -> bool:
    """A number Presidio calls a phone, an identifier or an IP address that its context names as something
    else: an order, ticket or invoice number, an epoch time (the remover keeps those: flagging them would
    quarantine clean records), or a version (3.10.1.2). The one rule shared with the remover: both must agree
    on what is not personal data, or every such record would be blocked."""
    value = text[start:end]
    if entity == "IP_ADDRESS" and value.count(".") == 3:
        return not is_ip(text, start, value)
    # a phone, or an identifier whose checksum a number passes by chance (NHS: 1 in 11)
    digits = sum(c.isdigit() for c in value)
    if digits < 0.8 * len(value.replace(" ", "")) or value.lstrip().startswith("+"):
        return False
    return other_number(text, start) or a_quantity(text, start, end)


def find_pii(text: str, free_text: bool = True, policy: str = MASK) -> list[Finding]:
    """Personal data left in `text`, by entity type (the masker's [PLACEHOLDERS] are not findings). free_text:
    whether to look for key-shaped tokens too (not in ids, which are random tokens by design). Under the `mask`
    policy, anything the policy would mask is a finding too (SURVIVING_<kind>: a digit run, an e-mail-like
    string, a name-like word, a street or a date left in the text). Raises when the detector cannot run: callers
    must treat that as a failure, never as clean text."""
    if not text:
        return []
    found = list(_findings(text, free_text)) + (list(_survivors(text)) if policy == MASK else [])
    return sorted(found, key=lambda f: f.start)


# read before storing, by the stage's last look and by the pii_removed check: the policy runs once per text
@lru_cache(maxsize=50_000)
def _survivors(text: str) -> tuple[Finding, ...]:
    """What the mask policy would mask that is left in `text` (outside the masker's placeholders)."""
    inside = [m.span() for m in PLACEHOLDER.finditer(text)]
    return tuple(
        Finding(f"SURVIVING_{kind}", a, b, 1.0)
        for a, b, kind in broad.spans(text)
        if not any(x <= a and b <= y for x, y in inside)
    )


# what the masker calls each of the detector's findings when it masks them
_TYPES = {"PERSON": "PERSON", "EMAIL_ADDRESS": "EMAIL", "EMAIL_SHAPE": "EMAIL", "PHONE_NUMBER": "PHONE",
          "IBAN_CODE": "IBAN", "CREDIT_CARD": "CREDIT_CARD", "IP_ADDRESS": "IP", "DATE_OF_BIRTH": "DATE_OF_BIRTH",
          "SECRET_ASSIGNED": "SECRET", "PRIVATE_KEY": "SECRET", "RANDOM_TOKEN": "SECRET", "CRYPTO": "SECRET",
          "LONG_NUMBER": "NUMBER"}  # fmt: skip


def placeholder_type(entity: str) -> str:
    """The placeholder type of a finding (a national identifier for Presidio's country-specific ones)."""
    return entity.removeprefix("SURVIVING_") if entity.startswith("SURVIVING_") else _TYPES.get(entity, "NATIONAL_ID")


# a log's texts are read before they are stored and again by the pii_removed check: the analyzer runs once each
@lru_cache(maxsize=50_000)
def _findings(text: str, free_text: bool) -> tuple[Finding, ...]:
    # the masker's placeholders, and identifiers of things (a UUID, a hash, a time stamp's fraction of a second)
    placeholders = [m.span() for m in PLACEHOLDER.finditer(text)] + broad.things(text)
    found = [
        Finding(r.entity_type, r.start, r.end, round(float(r.score), 2))
        for r in _analyzer().analyze(text, language="en", entities=[*ENTITIES, "DATE_TIME"], score_threshold=MIN_SCORE)
        if not any(a <= r.start and r.end <= b for a, b in placeholders)  # "[date_of_birth]" names no person
        and not (r.entity_type == "PERSON" and re.search(r"\d", text[r.start : r.end]))  # "1,234.56 EUR"
        and not _another_kind_of_number(r.entity_type, text, r.start, r.end)
        and not (r.entity_type == "PERSON" and not _a_name(text, r.start, r.end))
        and (r.entity_type != "DATE_TIME" or _BIRTH.search(text[max(0, r.start - 40) : r.start]))
    ]
    found = [replace(f, entity="DATE_OF_BIRTH") if f.entity == "DATE_TIME" else f for f in found]
    found += [Finding("SECRET_ASSIGNED", m.start(1), m.end(1), 1.0) for m in _SECRET_ASSIGNED.finditer(text)
              if not PLACEHOLDER.fullmatch(m.group(1).strip("\"',;."))]  # fmt: skip
    found += [Finding("PRIVATE_KEY", m.start(), m.end(), 1.0) for m in _PEM.finditer(text)]
    found += [Finding("LONG_NUMBER", m.start(), m.end(), 1.0) for m in _LONG_NUMBER.finditer(text)
              if not other_number(text, m.start())]  # fmt: skip
    found += [Finding("EMAIL_SHAPE", m.start(), m.end(), 1.0) for m in _ANY_EMAIL.finditer(text)]
    if free_text:
        urls = [m.span() for m in _URL.finditer(text)]  # a URL's path is no key
        found += [Finding("RANDOM_TOKEN", m.start(), m.end(), 1.0) for m in _RANDOM_TOKEN.finditer(text)
                  if not any(a <= m.start() < b for a, b in urls)]  # fmt: skip
    return tuple(sorted(found, key=lambda f: f.start))


def found_per_row(frame: pd.DataFrame, free_text: dict[str, bool], policy: str = MASK) -> list[str]:
    """Per row of `frame`, what is left in the named columns (column -> free_text), as 'column: KIND/KIND, ...'
    ('' for a clean row): kinds and places, never the values. A text that recurs (a system prompt) is analyzed
    once."""
    kinds: dict[tuple[str, bool], str] = {}
    rows = []
    for row in frame[list(free_text)].itertuples(index=False):
        found = []
        for column, value in zip(free_text, row):
            key = (str(value), free_text[column])
            if key not in kinds:
                kinds[key] = "/".join(sorted({f.entity for f in find_pii(*key, policy)}))
            if kinds[key]:
                found.append(f"{column}: {kinds[key]}")
        rows.append(", ".join(found))
    return rows
