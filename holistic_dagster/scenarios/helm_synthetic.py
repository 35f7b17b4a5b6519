"""HELM's synthetic reasoning generator (Liang et al., 2022; crfm-helm's SyntheticReasoningScenario), written here
from its definition so that the same seed gives HELM's instances: per mode, NumPy's RandomState(seed) draws
1,000 train, then 5,000 valid and 5,000 test instances, each from a pattern of rule symbols (X, Y, Z) and math
symbols (+ - * =) and substitutions of animal and fruit names. HELM evaluates its valid and test splits together:
here they are the test split, valid first, as HELM lists them.

- pattern_match: "Rules: <4 patterns> | Result: <a substitution of one>" -> that pattern;
- variable_substitution: "Rules: <pattern> | Substitutions: X by "...", ..." -> the substituted result;
- induction: "Two results: <r1> | <r2>" -> "Rule: <the pattern both came from>"."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

ANIMALS = ("zebra", "cobra", "stork", "penguin", "shark", "lion", "buffalo", "whale", "seal", "eagle", "horse", "rat")
FRUITS = ("apple", "peach", "watermelon", "banana", "grape", "kiwi", "pear", "strawberry", "blueberry", "blackberry")
RULE_SYMBOLS = ("X", "Y", "Z")
MATH_SYMBOLS = ("+", "-", "*", "=")
MODES = ("pattern_match", "variable_substitution", "induction")


def _substituted(pattern: list[str], symbols: list[str], words: dict[str, str]) -> list[str]:
    """The pattern with each rule symbol replaced by its words, symbol by symbol (HELM's pattern_subst)."""
    return [words[token] if token in symbols else token for token in pattern]


class _Draws:
    """HELM's generator's draws, in its order, on one RandomState."""

    def __init__(self, seed: int):
        self.rng = np.random.RandomState(seed)

    def pattern(self, math_symbols: list[str], rule_symbols: list[str]) -> list[str]:
        pattern = list(rule_symbols) + list(math_symbols)
        self.rng.shuffle(pattern)
        return pattern

    def substitution(self, symbols: list[str]) -> tuple[dict[str, str], str]:
        words: dict[str, str] = {}
        parts: list[str] = []
        for symbol in symbols:
            length = self.rng.randint(1, 3)
            words[symbol] = " ".join(self.rng.choice(ANIMALS + FRUITS, size=length))
            parts += [symbol, "by", '"', words[symbol], '"', ","]
        return words, " ".join(parts[:-1])

    def example(self, mode: str) -> tuple[str, str]:
        rule_symbols = [str(s) for s in self.rng.choice(RULE_SYMBOLS, size=self.rng.randint(2, 4))]
        symbols = sorted(set(rule_symbols))
        math_symbols = [str(s) for s in self.rng.choice(MATH_SYMBOLS, size=self.rng.randint(2, 4))]
        pattern = self.pattern(math_symbols, rule_symbols)
        words, words_text = self.substitution(symbols)
        result = " ".join(_substituted(pattern, symbols, words))
        words_2, _ = self.substitution(symbols)  # drawn in every mode, as HELM does
        pattern_text = " ".join(pattern)
        if mode == "induction":
            return (
                f"Two results: {result} | {' '.join(_substituted(pattern, symbols, words_2))}",
                f"Rule: {pattern_text}",
            )
        if mode == "variable_substitution":
            return f"Rules: {pattern_text} | Substitutions: {words_text}", result
        others = [" ".join(self.pattern(math_symbols, symbols)) for _ in range(3)]
        candidates = [*others, pattern_text]
        self.rng.shuffle(candidates)
        return f"Rules: {' | '.join(candidates)} | Result: {result}", pattern_text


@lru_cache(maxsize=4)
def mode_rows(mode: str, seed: int, num_train: int, num_eval: int) -> tuple[tuple[str, int, str, str], ...]:
    draws = _Draws(seed)
    return tuple(
        ("train" if k < num_train else "test", k if k < num_train else k - num_train, *draws.example(mode))
        for k in range(num_train + num_eval)
    )
