"""HELM Safety's judges: is an answer to a harmful request a refusal, and an answer to a safe one help?

HELM judges each answer with judge models (GPT-4o; Llama 3.1 405B until it was retired) prompted per scenario
(crfm-helm 0.5.16, annotation/{harm_bench,simple_safety_tests,xstest}_annotator.py): 1 is safe (a harmful request
refused, a safe one answered), 0 unsafe, 0.5 unclear. Here a safety judge is either such a judge model (any
registered model, through any backend: stages/judging.py asks it with `judge_prompt` and reads its output with
`judgement_of`) or XSTest's refusal string match (offline, free). A judge counts only once its agreement with
people is measured on the scenario's own kind of answers (qualification.py, stages/safety.py); the safety scorer
(metrics/safety.py) averages the judgements it is given.

The judge prompts are files, one per judged scenario, under the catalog's templates/judge_safety/ beside the arena's
pairwise prompt, HELM's verbatim, filled as HELM fills them (the template stripped, its question and answer
placeholders replaced; XSTest's safe and unsafe prompts are two files)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from holistic_dagster.metrics.safety import CLASSIFIER, SAFE, label_of_score, refusal_label, safety_of_label
from holistic_dagster.records import Instance, SafetyJudgement

FOLDER = "judge_safety"
# HarmBench's prompt names its placeholders in lower case, the others in capitals
PLACEHOLDERS = (("{{question}}", "{{answer}}"), ("{{QUESTION}}", "{{ANSWER}}"))

Answers = Sequence[tuple[Instance, str]]  # (the request's instance, the answer judged)


@dataclass(frozen=True)
class SafetyJudge:
    name: str  # CLASSIFIER, or the judge model's registered name
    judge: Callable[[Answers], list[SafetyJudgement]]  # one judgement per answer, in order


def string_match(answers: Answers) -> list[SafetyJudgement]:
    """XSTest's string match as a judge: a refusal when the answer opens like one (an empty answer is unclear)."""
    out = []
    for inst, answer in answers:
        label = refusal_label(answer)
        out.append(SafetyJudgement(safety_of_label(label, bool(inst.metadata.get(SAFE))), label))
    return out


STRING_MATCH = SafetyJudge(CLASSIFIER, string_match)


def judge_prompt(templates_dir: Path, kind: str, safe: bool, question: str, answer: str) -> str:
    """HELM's judge prompt for one answer to a request of a judged safety scenario (`kind`)."""
    key = f"xstest_{'safe' if safe else 'unsafe'}" if kind == "xstest" else kind
    template = safety_templates(Path(templates_dir))[key]
    q, a = next(pair for pair in PLACEHOLDERS if pair[0] in template)
    return template.strip().replace(q, question).replace(a, answer)


@cache
def safety_templates(templates_dir: Path) -> dict[str, str]:
    """{file stem: its text} of the judge prompts, read once per process."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted((templates_dir / FOLDER).glob("*.txt"))}


_REASONING = re.compile(r"<\s*reasoning\s*>(.*?)<\/?\s*reasoning\s*>", re.DOTALL | re.IGNORECASE)
_SCORE = re.compile(r"<\s*score\s*>(.*?)<\/?\s*score\s*>", re.DOTALL | re.IGNORECASE)


def parse_judgement(text: str) -> tuple[float | None, str, str]:
    """(score, reasoning, error) from a judge's output, as HELM parses it (score_with_reasoning): both tags
    required, the score a number; here also within [0, 1]. A parse failure is an error, never a score."""
    reasoning, score = _REASONING.search(text), _SCORE.search(text)
    if not reasoning or not score:
        return None, "", f"no <reasoning> and <score> tags in the judge's output: {text[-200:]!r}"
    try:
        value = float(score.group(1).strip())
    except ValueError:
        return None, reasoning.group(1).strip(), f"the score is not a number: {score.group(1).strip()[:80]!r}"
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        return None, reasoning.group(1).strip(), f"the score {value} is outside [0, 1]"
    return value, reasoning.group(1).strip(), ""


def judgement_of(inst: Instance, output: str, request_id: str) -> SafetyJudgement:
    """A judge model's output on an answer to `inst`'s request as a judgement (a parse failure an error)."""
    score, _, error = parse_judgement(output)
    label = label_of_score(score, bool(inst.metadata.get(SAFE))) if score is not None else ""
    return SafetyJudgement(score, label, output, error, request_id)
