"""Personal data masked, never dropped: every span that might identify a person becomes a typed placeholder,
numbered consistently within one log (`[PERSON_1]` is the same person in every record of it, so answers stay
judgeable).

Two policies (resources/shadow.yaml, `pii.policy`):
- `mask` (the default): high recall first. shadow.broad finds what *could* be an identifier by its shape, in any
  language or format (long digit runs, e-mail-like strings, capitalized or non-Latin words that are no common word,
  street shapes, dates that may be birth dates); shadow.pii's precise detectors (libphonenumber, python-stdnum's
  checksums, spaCy's names, the context rules) add what they find and decide each placeholder's type.
- `precise`: only the precise detectors; benign numbers and words are kept, and values of formats they do not know
  pass (its measured recall is in docs/how-to/shadow.md)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable

import regex

from holistic_dagster.config.redaction import redact
from holistic_dagster.config.shadow import CATEGORIES, PHONE_REGIONS
from holistic_dagster.shadow import broad, broad_words
from holistic_dagster.shadow.pii import PiiRemover

MASK, PRECISE = "mask", "precise"
POLICIES = (MASK, PRECISE)
# the precise categories, in the order that decides a placeholder's type where spans overlap, then the policy's own
_TYPES = [c.upper() for c in CATEGORIES if c != "person"] + ["PERSON", "EMAIL", "ADDRESS", "DATE", "NUMBER", "NAME"]
PLACEHOLDER = regex.compile(r"\[(?:SECRET|[A-Z]+(?:_[A-Z]+)*_\d+)\]")
_NAMED = ("PERSON", "NAME")


class Masker:
    """Masks the texts of one log. It remembers what it masked: the same value gets the same placeholder in every
    text, and a name found in one text is masked in every other (`sweep`)."""

    def __init__(
        self,
        policy: str = MASK,
        categories: tuple[str, ...] = CATEGORIES,
        phone_regions: tuple[str, ...] = PHONE_REGIONS,
        today: datetime.date | None = None,
    ):
        if policy not in POLICIES:
            raise ValueError(f"unknown PII policy {policy!r}: known are {', '.join(POLICIES)}")
        self.policy, self.today = policy, today
        self.precise = PiiRemover(categories, phone_regions)
        self._secrets = "secret" in categories
        self._numbers: dict[tuple[str, str], str] = {}
        self._names: dict[str, str] = {}  # a name as found -> its placeholder
        self._sweeper: regex.Pattern | None = None
        self._masked: dict[str, str] = {}

    def mask(self, text: str) -> str:
        """`text` with every span found replaced by its typed placeholder."""
        if not text:
            return text
        if text not in self._masked:
            clean = redact(text).replace("[REDACTED]", "[SECRET]") if self._secrets else text
            things = broad.things(clean)  # a UUID, a hash, a time stamp: no part of one is a phone or a card
            spans = [
                (s.start, s.end, s.category.upper())
                for s in self.precise.spans(clean)
                if not (s.category == "person" and broad_words.no_person(clean, s.start, s.end))
                and not any(a <= s.start and s.end <= b for a, b in things)
            ]
            if self.policy == MASK:
                spans += broad.spans(clean, self.today)
            self._masked[text] = self.replace(clean, spans)
        return self._masked[text]

    def replace(self, text: str, spans: Iterable[tuple[int, int, str]]) -> str:
        """`text` with the given (start, end, type) spans replaced; overlapping spans become one, typed by the
        most precise type among them. Spans inside a placeholder are left alone."""
        inside = [m.span() for m in PLACEHOLDER.finditer(text)]
        # an opening bracket a detector took along without its closing one stays ("(+44 20 ...)")
        spans = [(a + 1 if text[a : a + 1] == "(" and ")" not in text[a:b] else a, b, t) for a, b, t in spans]
        spans = sorted((a, b, t) for a, b, t in spans if b > a and not any(x <= a and b <= y for x, y in inside))
        joined: list[list] = []
        for a, b, kind in spans:
            if joined and a < joined[-1][1]:
                joined[-1][1] = max(joined[-1][1], b)
                joined[-1][2].append(kind)
            else:
                joined.append([a, b, [kind]])
        # numbered in reading order, replaced from the end (earlier offsets stay valid)
        placeholders = [self._placeholder(text[a:b], min(kinds, key=_rank)) for a, b, kinds in joined]
        for (a, b, _), placeholder in reversed(list(zip(joined, placeholders))):
            text = text[:a] + placeholder + text[b:]
        return text

    def _placeholder(self, value: str, kind: str) -> str:
        key = " ".join(value.casefold().split())  # the same value, however spaced or cased: one placeholder
        if kind in _NAMED and (kind, key) not in self._numbers:
            # a name met before in part ("Maria", then "Maria Schneider's"): the same person, the same placeholder
            known = [self._names[w] for w in regex.findall(r"[\p{L}\p{M}'’-]+", value) if w in self._names]
            if known:
                self._numbers[(kind, key)] = known[0]
        if (kind, key) not in self._numbers:
            count = sum(1 for k, _ in self._numbers if k == kind)
            self._numbers[(kind, key)] = f"[{kind}_{count + 1}]"
        placeholder = self._numbers[(kind, key)]
        if kind in _NAMED:
            self._remember(value, placeholder)
        return placeholder

    def _remember(self, name: str, placeholder: str) -> None:
        parts = [name.strip(), *(w for w in name.split() if len(w) >= 3 and w[0].isupper())]
        new = {p for p in parts if p and p not in self._names and p.lower() not in _NOT_A_NAME}
        for part in new:
            self._names[part] = placeholder
        if new:
            self._sweeper = None

    def sweep(self, text: str) -> str:
        """`text` with every name masked anywhere in this log so far replaced by that name's placeholder (the NER
        model may tag a name in the user's message and miss it in production's answer)."""
        if not text or not self._names:
            return text
        if self._sweeper is None:
            alternatives = "|".join(regex.escape(n) for n in sorted(self._names, key=len, reverse=True))
            self._sweeper = regex.compile(rf"(?<![\p{{L}}\p{{N}}\[_])(?:{alternatives})(?![\p{{L}}\p{{N}}\]])")
        return self._sweeper.sub(lambda m: self._names[m.group()], text)


def _rank(kind: str) -> int:
    return _TYPES.index(kind) if kind in _TYPES else len(_TYPES)


# months, days and words that head a field: never a name to sweep through a whole log
_NOT_A_NAME = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mr", "mrs", "ms",
    "dr", "prof", "dear", "hello", "thanks", "regards", "the", "and",
}  # fmt: skip
