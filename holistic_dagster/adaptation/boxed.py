"""The answer a MATH solution gives: what its last `\\boxed{...}` holds (the MATH paper's `last_boxed_only_string`
and `remove_boxed`, which HELM runs unchanged). A scenario's expressions use it as the `boxed_answer` filter (MATH's
reference answer); math_equiv_chain_of_thought reads a model's answer with it."""

from __future__ import annotations


def last_boxed(text: str) -> str | None:
    """The last `\\boxed{...}` (or, when there is none, `\\fbox{...}`) with its braces balanced; None when there is
    none or its braces never close."""
    start = text.rfind("\\boxed")
    if start < 0:
        start = text.rfind("\\fbox")
        if start < 0:
            return None
    depth = 0
    for end in range(start, len(text)):
        if text[end] == "{":
            depth += 1
        elif text[end] == "}":
            depth -= 1
            if depth == 0:
                return text[start : end + 1]
    return None


def boxed_answer(solution: str | None) -> str | None:
    """What the last `\\boxed{...}` of a solution holds (None: no box, or an `\\fbox` the paper does not unwrap)."""
    if solution is None or (box := last_boxed(solution)) is None:
        return None
    opening = "\\boxed{"
    return box[len(opening) : -1] if box.startswith(opening) and box.endswith("}") else None
