"""Battles: two models' stored answers to the same instance, to be compared by a judge. Built from completions
already in the warehouse (no new generation), scheduled as a seeded sample so that judging cost grows with the
sample size, not with the square of the number of models."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from itertools import combinations

from holistic_dagster.records import sha256_json


@dataclass(frozen=True)
class Answer:
    """A model's completion of an instance's request: what a battle compares."""

    model: str
    request_id: str
    text: str
    num_tokens: int


@dataclass(frozen=True)
class Battle:
    battle_id: str
    scenario: str
    instance_id: str
    question: str  # the instance's input: what both models were asked
    reference: str  # its first correct reference ("" when it has none)
    a: Answer  # model_a sorts before model_b
    b: Answer
    a_first: bool  # the first judgement shows a's answer as "Assistant A"; the second swaps them

    @property
    def models(self) -> tuple[str, str]:
        return self.a.model, self.b.model


def battle_id(scenario: str, instance_id: str, model_a: str, model_b: str) -> str:
    return sha256_json([scenario, instance_id, model_a, model_b])[:16]


def draw(seed: int, *parts: str) -> int:
    """A number fixed by the seed and the parts: the same battle gets the same draw in every run."""
    return int.from_bytes(hashlib.sha256("/".join([str(seed), *parts]).encode()).digest()[:8], "big")


def candidate_battles(
    answers: dict[tuple[str, str], list[Answer]], questions: dict[tuple[str, str], tuple[str, str]], seed: int
) -> list[Battle]:
    """Every pair of models that both answered an instance. answers: (scenario, instance_id) -> the models'
    answers; questions: (scenario, instance_id) -> (input, reference). The position order of each battle's first
    judgement is drawn from the seed."""
    out = []
    for (scenario, instance_id), given in sorted(answers.items()):
        question, reference = questions[(scenario, instance_id)]
        for a, b in combinations(sorted(given, key=lambda x: x.model), 2):
            bid = battle_id(scenario, instance_id, a.model, b.model)
            out.append(Battle(bid, scenario, instance_id, question, reference, a, b, draw(seed, bid, "order") % 2 == 0))
    return out


def schedule(candidates: list[Battle], max_battles: int | None, seed: int) -> list[Battle]:
    """All candidates, or the max_battles first in an order drawn from the seed (as Arena samples its pairs).
    The order depends on nothing but the seed and each battle's identity, so a larger sample extends a smaller
    one, and a new model adds its battles without reshuffling the others."""
    ordered = sorted(candidates, key=lambda b: draw(seed, b.battle_id))
    return ordered if max_battles is None else ordered[:max_battles]
