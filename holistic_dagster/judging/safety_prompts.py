"""HELM Safety's judge prompts (crfm-helm 0.5.16, annotation/*_annotator.py, verbatim): one file each under the
catalog's templates/judge_safety/ beside the arena's pairwise prompt, filled as HELM fills them (the template
stripped, its question and answer placeholders replaced; XSTest's safe and unsafe prompts are two files)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

FOLDER = "judge_safety"
# HarmBench's prompt names its placeholders in lower case, the others in capitals
PLACEHOLDERS = (("{{question}}", "{{answer}}"), ("{{QUESTION}}", "{{ANSWER}}"))


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
