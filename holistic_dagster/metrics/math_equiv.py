"""MATH's answer check (Hendrycks et al., 2021; HELM's math_equiv and math_equiv_chain_of_thought): two answers are
equal when their normalized LaTeX is. The normalization is the MATH paper's `is_equiv` (hendrycks/math, which HELM
0.5.16 runs unchanged), rule for rule, quirks included: an answer the normalization cannot read (two `\\text{ `
units, a `\\sqrt` or `\\frac` with nothing after it) is compared as written. The chain-of-thought variant compares
the last `\\boxed{...}` of the reference solution with the last one of the output."""

from __future__ import annotations

from holistic_dagster.adaptation.boxed import boxed_answer
from holistic_dagster.metrics.registry import reference_metric


class _Unreadable(Exception):
    """The MATH paper's normalization fails on this text (its helpers raise): compare the raw strings."""


def _units_removed(text: str) -> str:
    # "\text{ " only ever introduces units in MATH; a second one is a text the rule cannot read
    if "\\text{ " not in text:
        return text
    parts = text.split("\\text{ ")
    if len(parts) != 2:
        raise _Unreadable
    return parts[0]


def _sqrt_braced(text: str) -> str:
    r"""\sqrt3 -> \sqrt{3}."""
    head, *rest = text.split("\\sqrt")
    out = [head]
    for part in rest:
        if not part:
            raise _Unreadable
        out.append("\\sqrt" + part if part[0] == "{" else "\\sqrt{" + part[0] + "}" + part[1:])
    return "".join(out)


def _fracs_braced(text: str) -> str:
    r"""\frac12 -> \frac{1}{2}, \frac1b -> \frac{1}{b}, \frac1{72} -> \frac{1}{72}; a \frac with fewer than two
    characters after it leaves the text as it was."""
    head, *rest = text.split("\\frac")
    out = [head]
    for part in rest:
        if not part:
            raise _Unreadable
        if part[0] == "{":
            out.append("\\frac" + part)
            continue
        if len(part) < 2:
            return text
        numerator, second, tail = part[0], part[1], part[2:]
        out.append(
            "\\frac{" + numerator + "}" + second + tail
            if second == "{"
            else "\\frac{" + numerator + "}{" + second + "}" + tail
        )
    return "".join(out)


def _slash_as_frac(text: str) -> str:
    r"""An integer ratio written a/b as \frac{a}{b}."""
    parts = text.split("/")
    if len(parts) != 2:
        return text
    try:
        a, b = int(parts[0]), int(parts[1])
    except ValueError:
        return text
    return f"\\frac{{{a}}}{{{b}}}" if text == f"{a}/{b}" else text


def normalize_answer(text: str) -> str:
    """The MATH paper's normalization of an answer (its `_strip_string`); raises _Unreadable where it fails."""
    for old, new in (
        ("\n", ""),
        ("\\!", ""),
        ("\\\\", "\\"),
        ("tfrac", "frac"),
        ("dfrac", "frac"),
        ("\\left", ""),
        ("\\right", ""),
        ("^{\\circ}", ""),
        ("^\\circ", ""),
        ("\\$", ""),
    ):
        text = text.replace(old, new)
    text = _units_removed(text)
    text = text.replace("\\%", "").replace(" .", " 0.").replace("{.", "{0.")
    if not text:
        return text
    if text[0] == ".":
        text = "0" + text
    sides = text.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:  # "k = 5" -> "5"
        text = sides[1]
    if "\\sqrt" in text:
        text = _sqrt_braced(text)
    text = _fracs_braced(text.replace(" ", ""))
    if text == "0.5":
        text = "\\frac{1}{2}"
    return _slash_as_frac(text)


def answers_equal(gold: str | None, pred: str | None) -> float:
    """1.0 when the two answers normalize to the same text (both missing counts as equal, as in the paper)."""
    if gold is None or pred is None:
        return float(gold is None and pred is None)
    try:
        return float(normalize_answer(gold) == normalize_answer(pred))
    except _Unreadable:
        return float(gold == pred)


@reference_metric("math_equiv", "the answer equals the reference after the MATH paper's normalization (HELM's)")
def math_equiv(gold: str, pred: str) -> float:
    return answers_equal(gold, pred.strip())  # HELM strips a completion before any metric


@reference_metric(
    "math_equiv_chain_of_thought",
    "the last \\boxed{} answer of the output equals the reference solution's, after the MATH paper's normalization",
)
def math_equiv_chain_of_thought(gold: str, pred: str) -> float:
    return answers_equal(boxed_answer(gold), boxed_answer(pred))
