"""Perturbations as data: each one turns an evaluation instance into a new instance (its own rows, linked to
the original), seeded per instance, for HELM's robustness (invariance) and fairness families.

A perturbation that leaves an instance unchanged produces nothing: the original's score stands for it.
Robustness perturbations change only the input (the answer should not move); fairness perturbations also
rewrite the references with the same mapping (a swapped name or pronoun in the answer follows the question).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache

from holistic_dagster.errors import CatalogError
from holistic_dagster.records import CONTRAST_SET, Instance, Reference
from holistic_dagster.wordlists import load

# (text, rng, memo) -> text; memo keeps choices consistent within one instance (e.g. a renamed person)
Transform = Callable[[str, random.Random, dict], str]


@dataclass(frozen=True)
class Perturbation:
    name: str
    family: str  # "robustness" | "fairness"
    description: str
    transform: Transform
    perturbs_references: bool = False
    from_data: bool = False  # the perturbed instances come with the data (contrast sets): nothing to transform


def _match_case(original: str, replacement: str) -> str:
    if len(original) > 1 and original.isupper():
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


@cache
def _pattern(keys: tuple[str, ...], ignore_case: bool) -> re.Pattern:
    # longest first, so "do not" wins over "do"; a key is a whole word (or phrase), not part of one
    alternatives = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    return re.compile(rf"(?<![\w'])(?:{alternatives})(?![\w'])", re.IGNORECASE if ignore_case else 0)


def replace_words(
    text: str, mapping: Mapping[str, Sequence[str]], rng: random.Random, prob: float = 1.0, memo: dict | None = None
) -> str:
    """Each word (or phrase) found in `mapping` (lower-case keys) is replaced, with probability `prob`, by one
    of its options, in the original's case. With a memo, a word keeps the replacement it first got."""
    if not text:
        return text

    def swap(match: re.Match) -> str:
        word = match.group(0)
        if rng.random() >= prob:
            return word
        key = word.lower()
        if memo is not None and key in memo:
            return _match_case(word, memo[key])
        choice = rng.choice(list(mapping[key]))
        if memo is not None:
            memo[key] = choice
        return _match_case(word, choice)

    return _pattern(tuple(mapping), True).sub(swap, text)


# --- robustness --------------------------------------------------------------------------------------------
def typos(prob: float) -> Transform:
    """HELM's TyposPerturbation ("butter fingers"): each letter is, with probability `prob`, replaced by a
    key next to it on a QWERTY keyboard, keeping its case."""
    neighbours = load("keyboard_neighbours")

    def transform(text: str, rng: random.Random, memo: dict) -> str:
        out = []
        for ch in text:
            low = ch.lower()
            if low in neighbours and rng.random() < prob:
                new = rng.choice(neighbours[low])
                out.append(new.upper() if ch != low else new)
            else:
                out.append(ch)
        return "".join(out)

    return transform


def lowercase(text: str, rng: random.Random, memo: dict) -> str:
    return text.lower()


def contractions(text: str, rng: random.Random, memo: dict) -> str:
    """Expanded forms contracted ("do not" -> "don't"). Negations go first, so "it will not" becomes
    "it won't" rather than "it'll not"."""
    pairs = {k.lower(): [v] for k, v in load("contractions").items()}
    negations = {k: v for k, v in pairs.items() if k.endswith("not")}
    text = replace_words(text, negations, rng)
    return replace_words(text, {k: v for k, v in pairs.items() if k not in negations}, rng)


def expansions(text: str, rng: random.Random, memo: dict) -> str:
    """Contractions expanded ("don't" -> "do not"), from the same pairs."""
    return replace_words(text, {v.lower(): [k] for k, v in load("contractions").items()}, rng)


def misspellings(prob: float) -> Transform:
    """HELM's MisspellingPerturbation: each word with a common misspelling is misspelled with probability
    `prob`."""

    def transform(text: str, rng: random.Random, memo: dict) -> str:
        return replace_words(text, load("misspellings"), rng, prob)

    return transform


def extra_space(max_spaces: int) -> Transform:
    """HELM's SpacePerturbation: every run of spaces becomes 1..max_spaces spaces."""

    def transform(text: str, rng: random.Random, memo: dict) -> str:
        return re.sub(r" +", lambda _: " " * rng.randint(1, max_spaces), text)

    return transform


def chain(*steps: Transform) -> Transform:
    def transform(text: str, rng: random.Random, memo: dict) -> str:
        for step in steps:
            text = step(text, rng, memo)
        return text

    return transform


# --- fairness ----------------------------------------------------------------------------------------------
def dialect(text: str, rng: random.Random, memo: dict) -> str:
    """HELM's DialectPerturbation (SAE -> AAE, probability 1): mapped words replaced, consistently."""
    return replace_words(text, load("dialect_sae_to_aae"), rng, 1.0, memo.setdefault("dialect", {}))


def gender(text: str, rng: random.Random, memo: dict) -> str:
    """HELM's GenderPerturbation (male -> female, pronouns and terms, probability 1)."""
    terms = load("gender_terms")
    mapping = {k: [v] for k, v in {**terms["pronouns"], **terms["terms"]}.items()}
    return replace_words(text, mapping, rng)


def person_names(source: str, target: str) -> Transform:
    """HELM's PersonNamePerturbation (probability 1, gender preserved): each first name from the `source`
    group becomes a name of the same gender from the `target` group; the same person keeps the same new name
    throughout the instance (input and references). Names match case-sensitively ("Frank", not "frank")."""
    names = load("person_names")
    options = {n: names[target][g] for g in ("female", "male") for n in names[source][g]}

    def transform(text: str, rng: random.Random, memo: dict) -> str:
        chosen = memo.setdefault("person_names", {})

        def swap(match: re.Match) -> str:
            name = match.group(0)
            if name not in chosen:
                chosen[name] = rng.choice(options[name])
            return chosen[name]

        return _pattern(tuple(options), False).sub(swap, text)

    return transform


def _registry() -> dict[str, Perturbation]:
    items = [
        Perturbation("typos", "robustness", "keyboard-neighbour typos, 5% of letters", typos(0.05)),
        Perturbation("lowercase", "robustness", "all text lower-cased", lowercase),
        Perturbation("contractions", "robustness", "expanded forms contracted (do not -> don't)", contractions),
        Perturbation("expansions", "robustness", "contractions expanded (don't -> do not)", expansions),
        Perturbation("misspellings", "robustness", "common misspellings, 20% of eligible words", misspellings(0.2)),
        Perturbation("extra_space", "robustness", "runs of spaces become 1-3 spaces", extra_space(3)),
        Perturbation(
            "mild_mix",
            "robustness",
            "misspellings (10%), typos (1%), contractions and extra spaces (1-2), in that order",
            chain(misspellings(0.1), typos(0.01), contractions, extra_space(2)),
        ),
        Perturbation("dialect", "fairness", "Standard American -> African American English words", dialect, True),
        Perturbation("gender", "fairness", "male pronouns and terms -> female", gender, True),
        Perturbation(
            "person_names",
            "fairness",
            "white American first names -> Black American first names of the same gender",
            person_names("white_american", "black_american"),
            True,
        ),
        Perturbation(
            CONTRAST_SET,
            "robustness",
            "the data's contrast set: minimally edited inputs whose gold label flips (Gardner et al. 2020)",
            lambda text, rng, memo: text,
            True,
            from_data=True,
        ),
    ]
    return {p.name: p for p in items}


PERTURBATIONS: dict[str, Perturbation] = _registry()


def get_perturbation(name: str) -> Perturbation:
    if name not in PERTURBATIONS:
        raise CatalogError(f"unknown perturbation {name!r} (known: {', '.join(PERTURBATIONS)})")
    return PERTURBATIONS[name]


def perturbed_id(instance_id: str, perturbation: str) -> str:
    return f"{instance_id}~{perturbation}"


def perturb_instance(instance: Instance, perturbation: Perturbation, seed: int) -> Instance | None:
    """The perturbed copy of an evaluation instance, or None when the perturbation changes nothing.
    Seeded per (seed, perturbation, instance): the same suite version always gives the same text."""
    rng = random.Random(f"{seed}/{perturbation.name}/{instance.instance_id}")
    memo: dict = {}
    text = perturbation.transform(instance.input, rng, memo)
    references = instance.references
    if perturbation.perturbs_references:
        references = tuple(Reference(perturbation.transform(r.output, rng, memo), r.correct) for r in references)
    if text == instance.input and references == instance.references:
        return None
    return replace(
        instance,
        instance_id=perturbed_id(instance.instance_id, perturbation.name),
        input=text,
        references=references,
        perturbation=perturbation.name,
        original_id=instance.instance_id,
    )


def perturb_instances(instances: Iterable[Instance], names: Sequence[str], seed: int) -> list[Instance]:
    """Perturbed copies of the evaluation (test) instances, for each named perturbation."""
    perturbations = [p for p in map(get_perturbation, names) if not p.from_data]  # those came with the data
    out = []
    for inst in instances:
        if inst.split != "test" or inst.perturbation:
            continue
        for p in perturbations:
            new = perturb_instance(inst, p, seed)
            if new is not None:
                out.append(new)
    return out
