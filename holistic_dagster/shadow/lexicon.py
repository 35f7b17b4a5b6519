"""What the masking policy (shadow.broad) knows of words: which are common words of a language (wordfreq's lists:
a word among a language's most frequent is no identifier) and which are person names (Faker's first and last names
of every locale it ships, in their own scripts: a frequent word that is also a name, such as "Smith" or "Maria", is
not common for this purpose).

Both lists come from well-kept packages rather than from rules: a name the lists do not hold is masked anyway when it
is capitalized or written in another script (it is then no common word); the lists only decide which frequent words
are safe to keep."""

from __future__ import annotations

import importlib
from collections import Counter
from functools import cache

import regex

# the languages whose common words are known (wordfreq's large lists), the record's own picked among them
LANGUAGES = (
    "en", "de", "fr", "es", "it", "pt", "nl", "pl", "sv", "nb", "da", "fi", "tr", "cs", "ro", "hu", "id", "ru", "uk",
    "bg", "el", "ar", "he", "hi", "ko", "zh", "ja", "fa", "vi", "ca",
)  # fmt: skip
COMMON = 25_000  # a language's most frequent words that count as common words
VERY_COMMON = 5_000  # a name this frequent ("May", "John", "Paris", "France") is masked only beside another name
_PLACEHOLDER = regex.compile(r"\[[A-Z_]+\d*\]")
_WORD = regex.compile(r"[\p{L}\p{M}]+(?:['’][\p{L}]+)?")


@cache
def common_words(language: str) -> dict[str, int]:
    """A language's common words (lower case) and their frequency rank."""
    from wordfreq import top_n_list

    return {w: rank for rank, w in enumerate(top_n_list(language, COMMON))}


@cache
def _cue_words() -> dict[str, set[str]]:
    # a language's 300 commonest words: enough to tell which language a record is written in
    return {lang: set(list(common_words(lang))[:300]) for lang in LANGUAGES}


@cache
def person_names() -> frozenset[str]:
    """Every first and last name of Faker's person providers, as written (capitalized, or in its own script)."""
    import faker.config

    names: set[str] = set()
    for locale in faker.config.AVAILABLE_LOCALES:
        try:
            provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        except ImportError:
            continue
        for attribute in vars(provider):
            if attribute.startswith(("first_name", "last_name")):
                value = getattr(provider, attribute)
                if isinstance(value, dict):
                    value = value.keys()
                if isinstance(value, (list, tuple, type({}.keys()))):
                    names.update(v for v in value if isinstance(v, str) and v.strip())
    return frozenset(names)


def language_of(text: str) -> str:
    """The language whose commonest words the text uses most (English where none stands out)."""
    words = [w.lower() for w in _WORD.findall(_PLACEHOLDER.sub(" ", text))]
    if not words:
        return "en"
    counts = Counter({lang: sum(w in cues for w in words) for lang, cues in _cue_words().items()})
    best, hits = counts.most_common(1)[0]
    return best if hits > counts["en"] else "en"


# the languages of a script: a word written in it is looked up in theirs too, whatever the record's language
_SCRIPTS = (
    (regex.compile(r"\p{Cyrillic}"), ("ru", "uk", "bg")), (regex.compile(r"\p{Greek}"), ("el",)),
    (regex.compile(r"\p{Arabic}"), ("ar", "fa")), (regex.compile(r"\p{Hebrew}"), ("he",)),
    (regex.compile(r"\p{Devanagari}"), ("hi",)), (regex.compile(r"\p{Hangul}"), ("ko",)),
    (regex.compile(r"[\p{Hiragana}\p{Katakana}]"), ("ja",)), (regex.compile(r"\p{Han}"), ("zh", "ja")),
)  # fmt: skip


def rank(word: str, language: str) -> int | None:
    """The word's frequency rank among the common words of the language, of English (code and technical words
    are English whatever the record's language) and of its script's languages; None when it is no common word."""
    lower = word.lower()
    languages = {language, "en", *(lang for script, langs in _SCRIPTS if script.match(word) for lang in langs)}
    ranks = [r for lang in languages if (r := common_words(lang).get(lower)) is not None]
    return min(ranks) if ranks else None


def is_name(word: str) -> bool:
    return word in person_names() or word.capitalize() in person_names()
