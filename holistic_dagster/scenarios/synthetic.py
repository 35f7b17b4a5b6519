"""Procedurally generated scenarios: no data file, nothing to download, fully seeded.

synthetic_reasoning follows HELM's idea (Liang et al., 2022, sec. "synthetic reasoning"): abstract
symbol manipulation that needs no world knowledge, in three modes:
- pattern_match: which of several strings instantiates a pattern of variables?
- variable_substitution: substitute words for the variables of a rule.
- induction: name the rule (canonical variables) that produced an expression.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from urllib.parse import urlencode

from holistic_dagster.errors import CatalogError
from holistic_dagster.records import Instance, Reference, SourceFile, sha256_json
from holistic_dagster.scenarios.helm_synthetic import MODES as HELM_MODES
from holistic_dagster.scenarios.helm_synthetic import mode_rows

WORDS = ("apple", "river", "cat", "stone", "cloud", "lamp", "tree", "bird", "door", "fish", "moon", "sand")
VARIABLES = "ABCD"
OPERATORS = ("+", "-", "*")
GENERATOR_VERSION = "synthetic_reasoning/1"
HELM_GENERATOR_VERSION = "helm_synthetic_reasoning/1 (crfm-helm 0.5.16)"


def _rule(rng: random.Random) -> list[str]:
    """A rule such as ['A', '+', 'B', '-', 'A'] in canonical form (variables named by first appearance)."""
    n_terms = rng.randint(3, 4)
    used = 0
    terms: list[str] = []
    for i in range(n_terms):
        pick = rng.randint(0, min(used, len(VARIABLES) - 1)) if i else 0
        used = max(used, pick + 1)
        if i:
            terms.append(rng.choice(OPERATORS))
        terms.append(VARIABLES[pick])
    if used < 2:  # at least two distinct variables make the task non-trivial
        terms[-1] = "B"
    return terms


def _substitute(rule: list[str], mapping: dict[str, str]) -> str:
    return " ".join(mapping.get(t, t) for t in rule)


def _assignment(rule: list[str], rng: random.Random) -> dict[str, str]:
    variables = sorted({t for t in rule if t in VARIABLES})
    return dict(zip(variables, rng.sample(WORDS, len(variables))))


def variable_substitution(rng: random.Random) -> tuple[str, str]:
    rule = _rule(rng)
    mapping = _assignment(rule, rng)
    subs = ", ".join(f"{v} = {w}" for v, w in mapping.items())
    return f"Rule: {' '.join(rule)}\nSubstitute: {subs}", _substitute(rule, mapping)


def pattern_match(rng: random.Random) -> tuple[str, str]:
    rule = _rule(rng)
    answer = _substitute(rule, _assignment(rule, rng))
    candidates = {answer}
    while len(candidates) < 3:
        other = _rule(rng)
        if other != rule:
            candidates.add(_substitute(other, _assignment(other, rng)))
    ordered = sorted(candidates)
    rng.shuffle(ordered)
    return f"Pattern: {' '.join(rule)}\nCandidates: {' | '.join(ordered)}\nWhich candidate matches the pattern?", answer


def induction(rng: random.Random) -> tuple[str, str]:
    rule = _rule(rng)
    return f"Expression: {_substitute(rule, _assignment(rule, rng))}\nWhich rule produced it?", " ".join(rule)


MODES: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "pattern_match": pattern_match,
    "variable_substitution": variable_substitution,
    "induction": induction,
}


def synthetic_reasoning(
    *, seed: int = 0, num_train: int = 200, num_test: int = 200, modes: tuple[str, ...] = tuple(MODES)
) -> list[Instance]:
    unknown = set(modes) - set(MODES)
    if unknown:
        raise CatalogError(f"synthetic_reasoning: unknown mode(s) {sorted(unknown)}; known: {sorted(MODES)}")
    rows = []
    for mode in modes:
        for split, count in (("train", num_train), ("test", num_test)):
            rng = random.Random(f"{seed}/{mode}/{split}")
            for i in range(count):
                rows.append((mode, split, i, *MODES[mode](rng)))
    params = {"seed": seed, "num_train": num_train, "num_test": num_test, "modes": ",".join(modes)}
    source = SourceFile(
        uri=f"generator://synthetic_reasoning?{urlencode(params)}", sha256=sha256_json(rows), revision=GENERATOR_VERSION
    )
    return _instances(rows, source)


def helm_synthetic_reasoning(
    *, seed: int = 42, num_train: int = 1000, num_eval: int = 10_000, modes: tuple[str, ...] = HELM_MODES
) -> list[Instance]:
    """Every mode's instances as HELM generates them (scenarios.helm_synthetic; its defaults: seed 42, 1,000 train,
    5,000 + 5,000 eval)."""
    unknown = set(modes) - set(HELM_MODES)
    if unknown:
        raise CatalogError(f"helm_synthetic_reasoning: unknown mode(s) {sorted(unknown)}; known: {list(HELM_MODES)}")
    instances = []
    for mode in modes:
        rows = [(mode, *row) for row in mode_rows(mode, seed, num_train, num_eval)]
        params = {"mode": mode, "seed": seed, "num_train": num_train, "num_eval": num_eval}
        source = SourceFile(
            uri=f"generator://helm_synthetic_reasoning?{urlencode(params)}",
            sha256=sha256_json([row[1:] for row in rows]),
            revision=HELM_GENERATOR_VERSION,
        )
        instances += _instances(rows, source)
    return instances


def _instances(rows, source: SourceFile) -> list[Instance]:
    """(mode, split, number, question, answer) rows as the instances of one generated source."""
    return [
        Instance(
            instance_id=f"{mode}/{split}/{i}",
            split=split,
            input=text,
            references=(Reference(target, True),),
            source=source,
            record=f"#{i}",
            subset=mode,
        )
        for mode, split, i, text, target in rows
    ]


GENERATORS: dict[str, Callable[..., list[Instance]]] = {
    "synthetic_reasoning": synthetic_reasoning,
    "helm_synthetic_reasoning": helm_synthetic_reasoning,
}
