"""LLM-as-judge for battles: a Jinja2 judge template (MT-Bench's pairwise prompt by default) rendered with the
two anonymous answers, asked in both position orders. A verdict is the last [[A]], [[B]] or [[C]] (tie) in the
judge's output; a battle whose two verdicts disagree counts as a tie (position inconsistency); a judgement
without a verdict is an error, never a vote."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from holistic_dagster.adaptation.adapter import greedy_request
from holistic_dagster.adaptation.templating import render_file
from holistic_dagster.judging.battles import Battle
from holistic_dagster.records import Request

VERDICT = re.compile(r"\[\[\s*([ABC])\s*\]\]")


@dataclass(frozen=True)
class JudgeSetup:
    templates_dir: Path
    template: str
    max_tokens: int
    count_tokens: Callable[[str], int]
    max_context: int
    chat_prompt: Callable[[str], str] | None = None  # the judge's chat layout, for instruct models


def judge_requests(battle: Battle, setup: JudgeSetup) -> tuple[Request, Request]:
    """The two judgements of a battle: first with the answers in the battle's drawn order, then swapped."""
    first = (battle.a, battle.b) if battle.a_first else (battle.b, battle.a)
    out = []
    for shown in (first, first[::-1]):
        variables = {
            "question": battle.question,
            "reference": battle.reference,
            "answer_a": shown[0].text,
            "answer_b": shown[1].text,
        }
        prompt = render_file(setup.templates_dir, setup.template, variables).rstrip()
        if setup.chat_prompt:
            prompt = setup.chat_prompt(prompt)
        out.append(greedy_request(battle.instance_id, prompt, setup.max_tokens, setup.count_tokens))
    return out[0], out[1]


def too_long(request: Request, setup: JudgeSetup) -> str:
    """Why the judge cannot read this prompt ("" when it can)."""
    room = setup.max_context - setup.max_tokens
    if request.num_prompt_tokens > room:
        return (
            f"the judge prompt has {request.num_prompt_tokens} tokens; the judge's context of {setup.max_context} "
            f"leaves {room} after its max_tokens of {setup.max_tokens}"
        )
    return ""


def parse_verdict(text: str) -> str | None:
    """'A', 'B' or 'C' (tie): the last verdict in the judge's output (its explanation may quote the format
    first); None when it gives none."""
    found = VERDICT.findall(text)
    return found[-1] if found else None


@dataclass(frozen=True)
class Judgement:
    verdict_first: str  # a | b | tie | "" (no verdict), in terms of the battle's models
    verdict_second: str
    winner: str  # a | b | tie; "" when a judgement has no verdict (then error says why)
    consistent: bool  # both orders gave the same verdict
    error: str


def combine(
    battle: Battle, first_output: str, second_output: str, first_error: str = "", second_error: str = ""
) -> Judgement:
    """Both judgements of a battle as one verdict. A verdict that flips with the order counts as a tie
    (MT-Bench's rule for inconsistent judgements)."""
    shown_first = ("a", "b") if battle.a_first else ("b", "a")
    verdicts, errors = [], []
    for label, output, failed, shown in (
        ("first", first_output, first_error, shown_first),
        ("second", second_output, second_error, shown_first[::-1]),
    ):
        letter = None if failed else parse_verdict(output)
        if failed:
            errors.append(f"{label} judgement failed: {failed}")
        elif letter is None:
            errors.append(f"{label} judgement has no verdict ([[A]], [[B]] or [[C]]): {output[-200:]!r}")
        verdicts.append({"A": shown[0], "B": shown[1], "C": "tie"}.get(letter or "", ""))
    if errors:
        return Judgement(verdicts[0], verdicts[1], "", False, "; ".join(errors))
    consistent = verdicts[0] == verdicts[1]
    return Judgement(verdicts[0], verdicts[1], verdicts[0] if consistent else "tie", consistent, "")
