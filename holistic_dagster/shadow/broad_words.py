"""The masking policy's rules on words (see shadow.broad): names by their case or script and the common-word
lexicon of the record's language, and addresses by a street word of many languages near a house number."""

from __future__ import annotations

from collections.abc import Iterator

import regex

from holistic_dagster.shadow import lexicon

NAME, ADDRESS = "NAME", "ADDRESS"

_WORD = regex.compile(r"(?<![\p{N}_])[\p{L}\p{M}][\p{L}\p{M}'’\-]*(?<![-'’])(?![\p{N}_])")  # no part of a code
_CASED = regex.compile(r"[\p{Latin}\p{Cyrillic}\p{Greek}\p{Armenian}\p{Georgian}]")
_UNSPACED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]")
_CODE_CASE = regex.compile(r"\p{Ll}\p{Lu}")  # getUser, HttpServletRequest: an identifier in code, no name
_NAME_PREFIX = regex.compile(r"(?:Mc|Mac|O'|O’|D'|D’|Di|De|Da|Le|La|Van|Von|Fitz)\p{Lu}")
_PARTICLES = {"van", "von", "de", "da", "di", "del", "della", "der", "den", "la", "le", "du", "dos", "das", "bin",
              "ibn", "al", "el", "ben", "y", "e"}  # fmt: skip
# a company's name is no person's (Globex Corporation, Müller GmbH)
_COMPANY = regex.compile(
    r"[ \t,]*(?:Inc|Ltd|LLC|LLP|GmbH|AG|KG|SE|SA|S\.A|SAS|SARL|SpA|S\.p\.A|Srl|BV|NV|plc|PLC|Oy|AB|AS|ASA|Co|Corp"
    r"|Corporation|Company|Group|Holdings?|Technologies|Systems|Solutions|Labs|Partners|Ventures|Bros|Brothers"
    r"|(?:and|&) (?:Sons|Co|Daughters))\b"
)
_PLACEHOLDER = regex.compile(r"\[[A-Z_]+(?:_\d+)?\]")


def _kind(word: str, language: str) -> str | None:
    """'name' for a word that may be (part of) a person's name, 'weak' for a name that is also a very common
    word (masked only beside another name: "May", "Will"), None for any other word."""
    if _UNSPACED.search(word):
        return None  # Chinese and Japanese: see _han_names
    rank = lexicon.rank(word, language)
    if _CASED.match(word):
        capitalized = word[0].isupper() and (not _CODE_CASE.search(word) or _NAME_PREFIX.match(word))
        if not capitalized:
            return None
        if rank is None:
            return "name" if not word.isupper() or len(word) > 5 else None  # ISBN, EAN, HTTP: an acronym
        if lexicon.is_name(word):
            return "weak" if rank < lexicon.VERY_COMMON else "name"
        return None
    return "name" if rank is None or lexicon.is_name(word) else None  # uncased scripts: Arabic, Hangul, ...


def names(text: str, language: str) -> Iterator[tuple[int, int, str]]:
    """Spans of name-like words (neighbours joined into one name; a lone very common name word left alone)."""
    placeholders = [m.span() for m in _PLACEHOLDER.finditer(text)]
    words = [
        (m.start(), m.end(), _kind(m.group(), language), m.group())
        for m in _WORD.finditer(text)
        if not any(a <= m.start() < b for a, b in placeholders)
    ]
    group: list[tuple[int, int, str | None, str]] = []
    for item in [*words, None]:
        if item and group and _joins(text, group[-1], item):
            group.append(item)
            continue
        yield from _named(text, group)
        group = [item] if item and item[2] else []
    for a, b in _han_names(text):
        given = _GIVEN_AFTER_SPACE.match(text, b)  # 高橋 くみ子: the given name after a space
        yield a, given.end() if given else b, NAME


def _joins(text: str, last, item) -> bool:
    """Whether a word continues the name before it: a name word (or a particle followed by one) one space on."""
    gap = text[last[1] : item[0]]
    if not regex.fullmatch(r"[ \t]|[ \t]?[.,]?[ \t]", gap) or (gap.strip(" \t") == "," and item[2] is None):
        return False
    if item[2]:
        return True
    return item[3].lower() in _PARTICLES or (item[3][:1].isupper() and last[2] == "name" and _CASED.match(item[3]))


def _named(text: str, group) -> Iterator[tuple[int, int, str]]:
    while group and not group[-1][2]:
        group = group[:-1]  # a particle or a common word at the end is no part of the name
    if not group or (len(group) == 1 and group[0][2] == "weak"):
        return
    if a_company(text, group[0][0], group[-1][1]):
        return
    yield group[0][0], group[-1][1], NAME


def a_company(text: str, start: int, end: int) -> bool:
    """Whether the name ends in a company's suffix or is followed by one (Globex Corporation, Müller GmbH)."""
    return bool(_COMPANY.match(text, end) or _COMPANY_END.search(text[start:end]))


_COMPANY_END = regex.compile(_COMPANY.pattern + "$")


def no_person(text: str, start: int, end: int) -> bool:
    """A span a name detector tagged that names no person: a company, or an identifier in code (a class name)."""
    found = text[start:end]
    return a_company(text, start, end) or (" " not in found and bool(_CODE_CASE.search(found)))


_GIVEN_AFTER_SPACE = regex.compile(
    r"[ \t\u3000][\p{Han}\p{Hiragana}\p{Katakana}]{1,4}(?![\p{Han}\p{Hiragana}\p{Katakana}])"
)


# Chinese: a common surname and one or two characters after it; Japanese: a family name of the list, and the
# given name after it
_HAN_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}ー]+")


def _han_names(text: str) -> Iterator[tuple[int, int]]:
    names = lexicon.person_names()
    for m in _HAN_RUN.finditer(text):
        run, i = m.group(), 0
        while i < len(run):
            length = _han_name_at(run, i, names)
            if length:
                yield m.start() + i, m.start() + i + length
                i += length
            else:
                i += 1


def _han_name_at(run: str, i: int, names: frozenset[str]) -> int:
    """The length of a name starting at run[i] (0 for none): a listed family name of two or three characters and
    a listed given name after it (or one to two Han characters), or a one-character surname and one or two Han
    characters that make no common word."""
    for size in (3, 2):
        family = run[i : i + size]
        if len(family) == size and family in names and regex.fullmatch(r"\p{Han}+", family):
            given = next((g for g in (run[i + size : i + size + n] for n in (3, 2, 1)) if g in names), "")
            return size + len(given)
    if run[i] in names and i + 1 < len(run) and regex.match(r"\p{Han}", run[i + 1 :]):
        for size in (3, 2):
            candidate = run[i : i + size]
            if len(candidate) == size and regex.fullmatch(r"\p{Han}+", candidate):
                if lexicon.rank(candidate, "zh") is None and lexicon.rank(candidate, "ja") is None:
                    return size
    return 0


# --- addresses ----------------------------------------------------------------------------------------------
_STREET = (
    r"street|st|road|rd|avenue|ave|av|boulevard|blvd|lane|ln|drive|dr|way|court|ct|place|pl|terrace|square|sq"
    r"|parkway|pkwy|highway|hwy|close|crescent|row|circle|walk|alley|mews|rue|chemin|allée|impasse|quai|cours"
    r"|calle|carrer|avenida|avda|paseo|plaza|camino|via|viale|piazza|corso|vicolo|rua|travessa|largo|praça"
    r"|straße|strasse|str|weg|gasse|platz|allee|ring|damm|ufer|straat|laan|plein|gracht|ulica|ul|aleja|al|plac"
    r"|osiedle|улица|ул|проспект|просп|пр|переулок|пер|шоссе|площадь|бульвар|набережная|вулиця|вул|οδός|οδ"
    r"|λεωφόρος|λεωφ|gatan|gata|vägen|väg|gade|vej|gate|veien|katu|tie|utca|út|tér|sokak|sok|cadde|caddesi|cad"
    r"|bulvar|bulvarı|mahalle|mahallesi|mah|strada|ulice|náměstí|trg|ulitsa|jalan|jl|đường|phố|شارع|طريق|רחוב|דרך"
    r"|मार्ग|रोड|सड़क|набережна|набережная|сквер|провулок|узвіз|тупик|шосе|trail|hills?|club|cove|spur|park|view"
    r"|ridge|glen|grove|heights|point|port|crossing|creek|harbor|harbour|meadows?|springs?|estates?|extension|loop"
    r"|pass|path|pike|plains?|run|station|track|turnpike|valley|vista|village|well|wells|camp|center|centre|ranch"
)
_STREET_NAME = r"[\p{L}\p{M}'’.\-]+"
_HOUSE = r"\p{Nd}{1,5}(?:\s?\p{L}(?!\p{L}))?(?:[-/]\p{Nd}{1,4}\p{L}?)?"
_NAMEISH = r"(?:\p{Lu}|[^\p{Latin}\p{Cyrillic}\p{Greek}\p{N}\p{P}\p{S}\s\p{Han}\p{Hiragana}\p{Katakana}])"
_UNIT = r"(?:[ \t,]+\p{L}{1,4}\.?[ \t]?\p{Nd}{1,5}\p{L}?)*"  # ", кв. 89", " Apt 4", ", Suite 210"
_ADDRESSES = (
    # 6308 Moran Trail, 621 Williams Club: a house number and capitalized words (a year is no house number)
    regex.compile(
        rf"(?<![\p{{L}}\p{{N}}.,:/-])(?!(?:19|20)\d\d\b){_HOUSE},?[ \t]+"
        rf"(?:{_NAMEISH}[\p{{L}}\p{{M}}'’.\-]*[ \t]?){{1,3}}{_UNIT}"
    ),
    # Trevo de Ramos, 782; Kyradreef 230; Raya Setiabudhi No. 811: a street's name (no street word) and the number
    regex.compile(
        rf"(?<![\p{{L}}]){_NAMEISH}[\p{{L}}\p{{M}}'’\-]*(?:[ \t]+(?:de|da|do|dos|van|von|di|del|la|le)?[ \t]*{_NAMEISH}"
        rf"[\p{{L}}\p{{M}}'’\-]*){{0,2}},?[ \t]+(?:\p{{L}}{{1,4}}\.[ \t]?)?(?!(?:19|20)\d\d\b){_HOUSE}{_UNIT}"
        r"(?![\p{N}.,:/-]\p{N})"
    ),
    # Kossuth utca 58, Софії Перовської вулиця 5: a street's name, its street word, the house number
    regex.compile(
        rf"\p{{Lu}}[\p{{L}}'’\-]*[ \t]+(?:[\p{{L}}'’\-]+[ \t]+){{0,2}}(?i:{_STREET})\.?[ \t,]+"
        rf"(?:\p{{L}}{{1,4}}\.[ \t]?)?{_HOUSE}{_UNIT}"
    ),
    # 221B Baker Street; 12 rue de la Paix
    regex.compile(rf"(?<![\p{{L}}\p{{N}}]){_HOUSE},?[ \t]+(?:{_STREET_NAME}[ \t]+){{0,4}}?(?i:{_STREET})\b\.?"),
    # Calle Mayor 10; ul. Marszałkowska 10; улица Ленина, д. 5; Οδός Ερμού 12
    regex.compile(
        rf"(?<![\p{{L}}])(?i:{_STREET})\.?[ \t]+(?:{_STREET_NAME}[ \t,]+){{0,4}}?(?:\p{{L}}{{1,4}}\.[ \t]?)?{_HOUSE}"
        rf"{_UNIT}(?![\p{{N}}])"
    ),
    # Hauptstraße 5, Drottninggatan 12, Mannerheimintie 3, Váci utca 19
    regex.compile(
        rf"(?<![\p{{L}}])\p{{Lu}}[\p{{L}}\-]*(?i:straße|strasse|str\.|weg|gasse|platz|allee|gatan|vägen|katu|tie"
        rf"|straat|laan|gade|vej|veien|utca|sokak|caddesi)[ \t]+{_HOUSE}"
    ),
    # 中山路123号, 銀座1丁目2番3号, 세종대로 110, 테헤란로 152길
    regex.compile(
        r"[\p{Han}]{1,6}(?:路|街|道|大道|巷|弄|段|通り)(?:\s?\p{Nd}+\s?(?:号|號|番地?|段|巷|弄|室|楼|樓|之|-)?)+"
    ),
    regex.compile(r"\p{Nd}+丁目\s?\p{Nd}+(?:番地?|[-－])?\s?(?:\p{Nd}+号?)?"),
    regex.compile(r"\p{Hangul}+(?:로|길|대로)\s?\p{Nd}+(?:번?길)?(?:\s?\p{Nd}+)?"),
)


def addresses(text: str, language: str = "en") -> Iterator[tuple[int, int, str]]:
    for number, pattern in enumerate(_ADDRESSES):
        for m in pattern.finditer(text):
            found = m.group().rstrip(" \t,")
            if not _street_named(found):
                continue
            if number in (0, 1) and not any(_kind(w, language) for w in _WORD.findall(found)):
                continue  # "12 Angry Men", "Windows 11": capitalized common words, no name among them
            yield m.start(), m.start() + len(found), ADDRESS


def _street_named(found: str) -> bool:
    """A street has a name: a capitalized word, a word of another script, or a Han or Hangul street; '5 ways to
    go' is no address."""
    return bool(regex.search(r"\p{Lu}|[^\p{Latin}\p{N}\s\p{P}]", found))
