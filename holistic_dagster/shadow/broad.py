"""The masking policy: what *could* identify a person, whatever the language or format, found by its shape rather
than by a rule per format (those are shadow.pii's precise detectors, which only decide a placeholder's type):

- number: a run of digits in any script (with spaces, dashes, dots, slashes or brackets between them, letters
  mixed in as identifiers have them), or of number words, with MIN_DIGITS digits or more, unless it says what it is
  and that is nothing personal: a cue before it (order, invoice, tracking, ISBN, version, ...), a price or a
  quantity, a version or a hash, a timestamp, a recent date;
- email: anything shaped like an e-mail address, obfuscated forms included ("jo dot doe at mail dot com",
  "jo(at)mail(dot)com", full-width ＠);
- name: a capitalized word (any cased script), or a word of an uncased script (Arabic, Hebrew, Devanagari,
  Hangul, ...), that is no common word of the record's language (shadow.lexicon), or that is a person's name;
  in Chinese and Japanese text a common surname and what follows it; neighbouring such words make one name;
- address: a street word of many languages (Street, rue, calle, Straße, ulica, улица, οδός, 路, 丁目, 로, ...)
  with a house number near it;
- date: a full date from a year that can be a birth year (more than ADULT_YEARS ago), or any date near a word
  about birth or age.

Placeholders are given by shadow.masking; this module only finds spans."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import regex

from holistic_dagster.shadow import lexicon
from holistic_dagster.shadow.broad_words import addresses, names
from holistic_dagster.shadow.pii_context import DATE_SHAPES, is_ip

MIN_DIGITS = 5  # a run with fewer digits is no identifier (a year, a house number, a count)
ADULT_YEARS = 10  # a date at least this many years ago may be somebody's birth date

NUMBER, EMAIL, NAME, ADDRESS, DATE = "NUMBER", "EMAIL", "NAME", "ADDRESS", "DATE"

# --- numbers ------------------------------------------------------------------------------------------------
_SEP = r"(?:[ \t\-./():\u00a0\u2009\u202f·_]{1,2}|,(?=\p{Nd}))"
# letters an identifier holds (the scripts written with spaces: a number runs straight into Chinese or Japanese)
_ALNUM = r"[\p{Latin}\p{Cyrillic}\p{Greek}\p{N}]"
_TOKEN = rf"{_ALNUM}*\p{{Nd}}{_ALNUM}*"
_RUN = regex.compile(rf"(?<!{_ALNUM}|[_@])(?:\+|\()?{_TOKEN}(?:{_SEP}(?:{_TOKEN}|\p{{Lu}}{{1,4}}(?={_SEP}{_TOKEN})))*")
# a cue before a number that names it as nothing personal (nearest cue, no other number between)
_NOT_PERSONAL = regex.compile(
    r"(?i)(?<![\p{L}])(?:order|ticket|invoice|tracking|shipment|parcel|booking|reservation|confirmation|transaction"
    r"|receipt|reference|ref|isbn|issn|ean|upc|gtin|sku|barcode|doi|arxiv|pmid|version|ver|build|release|commit"
    r"|revision|rev|page|pages|line|lines|port|error|errno|exit|status|chapter|section|row|rows|column|item|model"
    r"|part|product|patent|flight|epoch|timestamp|unix|seconds|ms|bytes|kb|mb|gb|pid|bestell|rechnung|auftrag"
    r"|sendung|artikel|commande|facture|colis|pedido|factura|envío|ordine|fattura|spedizione|zamówien|faktur"
    r"|заказ|счёт|счет|накладн|订单|單號|单号|发票|注文|請求書|주문|송장|طلب|فاتورة)[\p{L}]*"
    r"(?:[\s:#.=№-]+\p{L}{1,10}){0,3}[\s:#.=№-]*$"  # up to three words between ("order number is 48291")
)
_CURRENCY = regex.compile(r"[$€£¥₹₽₩₺]\s*$|(?i:usd|eur|gbp|chf|jpy|cny|inr|rub)\s*$")
_UNIT_AFTER = regex.compile(
    r"\s*(?:%|[$€£¥₹₽₩₺]|(?i:usd|eur|gbp|chf|jpy|cny|inr|rub|kg|g|km|m|cm|mm|mb|gb|kb|tb|ms|s|px|mhz|ghz|kwh|mah"
    r"|units?|items?|rows?|tokens?|words?|people|users?|pages?|times|steps?|meters?|miles?|dollars?|euros?)\b)"
)
_TIME = regex.compile(r"\d{1,2}:\d\d(?::\d\d(?:[.,]\d+)?)?(?:\s?(?:Z|[+-]\d\d:?\d\d))?")
_DATE_SHAPES = (
    regex.compile(r"(?P<y>(?:19|20)\d\d)[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})(?P<t>[T ]\d{1,2}:\d\d)?"),
    regex.compile(r"(?P<d>\d{1,2})[-/.](?P<m>\d{1,2})[-/.](?P<y>(?:19|20)\d\d)(?P<t>[ T]\d{1,2}:\d\d)?"),
    regex.compile(r"(?P<y>(?:19|20)\d\d)(?P<m>0[1-9]|1[0-2])(?P<d>0[1-9]|[12]\d|3[01])(?P<t>T?\d{4,6}Z?)?"),
)
_BIRTH_OR_AGE = regex.compile(
    r"(?i)born|birth|b-day|dob|d\.o\.b|\bage[ds]?\b|years? old|geb(?:oren|urt|\.)|naiss|\bnée?\b|naci|nasc|urodz"
    r"|geboorte|doğum|syntym|szület|födel|fødse|рожд|народж|γενν|生年|出生|生日|誕生|생년|생일|ميلاد|ولد|जन्म"
)
_WRITTEN_DATE = regex.compile(rf"(?i)(?<![\p{{Latin}}\p{{Cyrillic}}\p{{Greek}}\p{{N}}])(?:{DATE_SHAPES})")
_IPV6 = regex.compile(
    r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{1,4}:){2,7}(?::|[0-9A-Fa-f]{1,4})(?:[0-9A-Fa-f:]*)(?![0-9A-Fa-f:])"
)
_UUID = regex.compile(r"(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_VERSION = regex.compile(r"(?i)v?\d{1,4}(?:\.\d{1,5}){1,3}(?:[-+.]?[a-z]+\d*)?")
# a quantity's thousands (1,234,567.89; 1.234.567,89), or a mathematical decimal (3.14159)
_VERSION_CUE = regex.compile(
    r"(?i)(?<![\p{L}])(?:v|ver|version|release|build|python|node|java|kernel|firmware|patch|upgrade[ds]?|update[ds]?"
    r"|install(?:ed|ing)?|sdk|api|npm|pip|linux|windows|android|ios|macos|chrome|firefox)[\s:=]*(?:to\s+|is\s+)?$"
)
_THOUSANDS = regex.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{1,3}(?:\.\d{3})+,\d+|\d{1,3}\.\d{5,}")

_NUMBER_WORDS = frozenset(
    "zero oh one two three four five six seven eight nine double triple null eins zwei drei vier fünf sechs sieben "
    "acht neun zéro un deux trois quatre cinq sept huit neuf cero uno dos tres cuatro cinco seis siete ocho nueve "
    "due tre quattro cinque sei sette otto nove um dois três sete oito nul een twee drie vijf zes zeven negen "
    "jeden dwa trzy cztery pięć sześć siedem osiem dziewięć sıfır bir iki üç dört beş altı yedi sekiz dokuz ноль "
    "один два три четыре пять шесть семь восемь девять μηδέν ένα δύο τρία τέσσερα πέντε έξι επτά οκτώ εννέα".split()
)
_WORDS_OR_DIGITS = regex.compile(r"[\p{Latin}\p{Cyrillic}\p{Greek}]+|\p{Nd}+")
_HAN_DIGITS = regex.compile(r"[〇零一二三四五六七八九壹贰叁肆伍陆柒捌玖]{5,}")


# identifiers of things, whole: a UUID or a hash, an ISO 8601 time stamp (no part of one is a phone or a card)
_THING = regex.compile(
    r"(?i)(?<![\w-])(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{7,64}"
    r"|(?:19|20)\d\d-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)(?![\w-])"
)


def a_hash(token: str) -> bool:
    """A git hash or a digest: lower-case hex with digits and at least two letters past its first two characters
    (an IBAN, DE89370400440532013000 or de89..., has its letters in front; a passport, F2905039, has one)."""
    return (
        regex.fullmatch(r"[0-9a-f]{7,64}", token) is not None
        and any(c.isdigit() for c in token)
        and sum(c in "abcdef" for c in token[2:]) >= 2
    )


def things(text: str) -> list[tuple[int, int]]:
    """Spans of identifiers that name things, not people (UUIDs, hashes, time stamps): kept whole."""
    return [
        m.span() for m in _THING.finditer(text) if not regex.fullmatch(r"(?i)[0-9a-f]+", m.group()) or a_hash(m.group())
    ]


def numbers(text: str, today: datetime.date | None = None) -> Iterator[tuple[int, int, str]]:
    """Runs of digits (or of number words) that could identify somebody: see the module's docstring."""
    year = (today or datetime.date.today()).year
    kept = things(text)
    for m in _RUN.finditer(text):
        if any(a <= m.start() < b for a, b in kept):
            continue
        value = m.group().rstrip(" .-/(_,:·\u00a0\u2009\u202f")
        if value.endswith(")") and value.count(")") > value.count("("):
            value = value[:-1]  # "(+44 20 7946 0958)": the bracket around the number is no part of it
        start, end = m.start(), m.start() + len(value)
        if sum(c.isdigit() for c in value) < MIN_DIGITS:
            continue
        if _TIME.fullmatch(value):
            continue  # a time of day (10:30:00.123)
        date = _date(value)
        if date is not None:
            if _birth_date(text, start, date, year):
                yield start, end, DATE
            continue
        if not _says_what_it_is(text, start, end, value):
            yield start, end, NUMBER
    for m in _WRITTEN_DATE.finditer(text):
        found = regex.search(r"(?:19|20)\d\d", m.group())
        if found and not regex.fullmatch(r"[\d\s\-/.]+", m.group()):  # numeric dates are runs, above
            if _birth_date(text, m.start(), (int(found.group()), False), year):
                yield m.start(), m.end(), DATE
    for m in _IPV6.finditer(text):
        if sum(c.isalnum() for c in m.group()) >= 8:
            yield m.start(), m.end(), NUMBER
    yield from ((a, b, NUMBER) for a, b in _spelled(text))
    yield from ((m.start(), m.end(), NUMBER) for m in _HAN_DIGITS.finditer(text))


def _date(value: str) -> tuple[int, bool] | None:
    """(year, whether a time of day follows) where the whole value is a date, else None."""
    for shape in _DATE_SHAPES:
        m = shape.match(value)
        if m and 1 <= int(m.group("m")) <= 12 and 1 <= int(m.group("d")) <= 31:
            rest = value[m.end() :]
            if not rest or regex.fullmatch(r"[:.,\d]*Z?(?:[+-]\d\d:?\d\d)?", rest) or m.group("t"):
                return int(m.group("y")), bool(m.group("t") or rest)
    return None


def _birth_date(text: str, start: int, date: tuple[int, bool], year: int) -> bool:
    found_year, timed = date
    sentence = regex.split(r"[.!?。！？]\s|\n", text[max(0, start - 40) : start])[-1]
    if _BIRTH_OR_AGE.search(sentence):
        return True
    return not timed and found_year <= year - ADULT_YEARS


def _says_what_it_is(text: str, start: int, end: int, value: str) -> bool:
    """A number that is no identifier by its own shape (a hash, a version, a price, a quantity, a dotted quad
    that is no IP address) or by the cue before it."""
    before = text[max(0, start - 40) : start]
    if _UUID.fullmatch(value) or a_hash(value):
        return True
    if _VERSION.fullmatch(value) and (value[0] in "vV" or _VERSION_CUE.search(before)):
        return not (value.count(".") == 3 and value.replace(".", "").isdigit() and is_ip(text, start, value))
    if _THOUSANDS.fullmatch(value) or _CURRENCY.search(before) or _UNIT_AFTER.match(text, end):
        return True
    return _NOT_PERSONAL.search(before.split("\n")[-1]) is not None


def _spelled(text: str) -> Iterator[tuple[int, int]]:
    """Digits written as words ("five five five, one two three four"), digits mixed in: MIN_DIGITS or more."""
    run: list[tuple[int, int, int]] = []  # (start, end, digits)
    for m in [*_WORDS_OR_DIGITS.finditer(text), None]:
        word = m.group().lower() if m else ""
        gap = text[run[-1][1] : m.start()] if m and run else ""
        if m and (word in _NUMBER_WORDS or word.isdigit()) and (not run or regex.fullmatch(r"[\s,\-.]{1,3}", gap)):
            run.append((m.start(), m.end(), len(word) if word.isdigit() else (2 if word == "double" else 1)))
            continue
        words = sum(1 for a, b, _ in run if not text[a:b].isdigit())
        if run and words >= 2 and sum(d for *_, d in run) >= MIN_DIGITS:
            yield run[0][0], run[-1][1]
        run = [(m.start(), m.end(), 1)] if m and word in _NUMBER_WORDS else []


# --- e-mail addresses, obfuscated ones included --------------------------------------------------------------
_AT = r"(?:\s*[@＠﹫]\s*|\s*[\[({<]\s*(?i:at|@)\s*[\])}>]\s*|\s+(?i:at|arroba|chiocciola|klammeraffe|собака)\s+)"
_DOT = r"(?:\s*[.．。]\s*|\s*[\[({<]\s*(?i:dot|\.)\s*[\])}>]\s*|\s+(?i:dot|punto|punkt|point|точка)\s+)"
_EMAILS = regex.compile(
    rf"(?<![\w.+-])[\w.+%'-]+(?:{_DOT}[\w+%'-]+)*{_AT}[\w-]+(?:{_DOT}[\w-]+)*{_DOT}(?i:[a-z]{{2,12}}|[\p{{L}}]{{2,12}})(?![\w])"
)


def emails(text: str) -> Iterator[tuple[int, int, str]]:
    for m in _EMAILS.finditer(text):
        if regex.search(r"[@＠﹫\[({<]|(?i:\bdot\b|punto|punkt|point|точка)", m.group()):
            yield m.start(), m.end(), EMAIL


def spans(text: str, today: datetime.date | None = None) -> list[tuple[int, int, str]]:
    """Every span the policy masks in `text` (start, end, kind), overlapping spans left for the caller to join."""
    language = lexicon.language_of(text)
    return [*emails(text), *numbers(text, today), *addresses(text, language), *names(text, language)]
