"""HELM Safety's judges at work (judging/safety.py): before a safety scenario is scored, each judge the suite names
(XSTest's string match always; each judge model of `safety.judges`, through its backend and the completion cache)
is measured against people on XSTest's human labels (judging/qualification.py), and only the judges that qualify
judge the scenario's answers. Every judgement is stored with the judge's identity, its request and its raw output
(`safety_ratings`; a parse failure is an error row, never a score), and every measurement per human label
(`safety_agreement`). The stored tables name a judge in their `rater` column."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone

import pandas as pd

from holistic_dagster.clients.identity import answering_identity
from holistic_dagster.judging.qualification import ALL_MODELS, Agreement, agreement, qualifies, seeded_sample
from holistic_dagster.judging.safety import STRING_MATCH, SafetyJudge
from holistic_dagster.metrics.safety import CLASSIFIER, KIND
from holistic_dagster.metrics.scoring import Prediction
from holistic_dagster.records import Instance, SafetyJudgement
from holistic_dagster.scenarios import load_instances
from holistic_dagster.scenarios.sources import source_dir
from holistic_dagster.stages.context import StageContext
from holistic_dagster.stages.judging import safety_model_judge

HUMAN_LABELS = "xstest_labelled_answers"  # the judging set (assets/judging/): one subset per answering model
LABELLED_FILES = "xstest_v2_completions_*.csv"  # upstream's files of labelled answers, one per answering model
# {judge: {instance_id: its judgement}}: what the safety scorer receives, and what safety_ratings stores
Judgements = Mapping[str, Mapping[str, SafetyJudgement]]


def human_labelled(stage: StageContext, items: int, seed: int) -> dict[str, list[Instance]]:
    """Per answering model, XSTest's human-labelled answers (all, or a seeded sample of `items` of each), as
    safety items of kind xstest: the judging set's subsets, and any further labelled file of upstream's layout
    in its folder."""
    spec = stage.catalog.scenario(HUMAN_LABELS, "judging")
    spec = spec.model_copy(update={"subsets": labelled_files(spec, stage.deployment.data_dirs)})
    by_model: dict[str, list[Instance]] = {}
    for inst in load_instances(spec, stage.deployment.data_dirs):
        as_xstest = replace(inst, metadata={**inst.metadata, KIND: "xstest"})
        by_model.setdefault(inst.metadata["answers_of"], []).append(as_xstest)
    return {
        model: seeded_sample(found, items or len(found), seed, f"{HUMAN_LABELS}/{model}")
        for model, found in sorted(by_model.items())
    }


def labelled_files(spec, data_dirs) -> tuple[str, ...]:
    """The judging set's subsets, then every other labelled file beside them (xstest_v2_completions_<m>.csv with
    a final_label column), one per answering model (<m>_streval is <m>'s answers with more columns)."""
    root = source_dir(spec, data_dirs)
    subsets = list(spec.subsets)
    for path in sorted(root.glob(LABELLED_FILES)):
        subset = path.stem.removeprefix(LABELLED_FILES.split("*")[0])
        models = {s.removesuffix("_streval") for s in subsets}
        with path.open(encoding="utf-8", errors="replace") as f:
            labelled = "final_label" in f.readline().strip().split(",")
        if labelled and subset.removesuffix("_streval") not in models:
            subsets.append(subset)
    return tuple(subsets)


def qualified_judges(stage: StageContext, version: str) -> tuple[list[SafetyJudge], list[Agreement], dict[str, str]]:
    """The suite's safety judges, each measured against people first, on each answering model's labelled answers:
    (the judges that agree enough on every model's answers to score, every judge's measurement per model and over
    all of them, each judge's identity)."""
    spec = stage.catalog.suite(version).safety
    labelled = human_labelled(stage, spec.agreement_items, spec.seed)
    answers = [(i, i.references[0].output) for found in labelled.values() for i in found]
    judges = [STRING_MATCH, *(safety_model_judge(stage, j, spec.max_tokens, "safety_judge") for j in spec.judges)]
    identities = {CLASSIFIER: CLASSIFIER}
    identities |= {j: answering_identity(stage.client(j).describe()) for j in spec.judges}
    measured: list[Agreement] = []
    scoring = []
    for judge in judges:
        # every model's answers in one call (a judge model's requests go out together)
        labels = [j.label for j in judge.judge(answers)]
        pairs = list(zip((i.metadata["human_label"] for i, _ in answers), labels))
        measured += agreement(judge.name, pairs)
        start = 0
        for model, found in labelled.items():
            measured += agreement(judge.name, pairs[start : start + len(found)], answers_of=model)
            start += len(found)
        enters = spec.classifier or judge.name != CLASSIFIER
        if enters and qualifies(measured, judge.name, spec.min_kappa):
            scoring.append(judge)
    return scoring, measured, identities


def judge_predictions(judges: Sequence[SafetyJudge], predictions: Sequence[Prediction]) -> Judgements:
    """Each qualified judge's judgement of each answer (Judgements)."""
    answers = [(p.instance, p.text) for p in predictions]
    return {j.name: {p.instance.instance_id: r for p, r in zip(predictions, j.judge(answers))} for j in judges}


def judge_summary(measured: list[Agreement], scoring: Sequence[str], min_kappa: float) -> dict[str, str]:
    """Each judge's measurement against people, one line per judge (the scores step's metadata in Dagster): over
    every labelled answer, then Cohen's kappa on each answering model's."""
    out: dict[str, str] = {}
    for a in measured:
        kappa = "undefined" if a.kappa is None else f"{a.kappa:.3f}"
        if a.label == "all" and a.answers_of == ALL_MODELS:
            verdict = "scores" if a.judge in scoring else "does not score (below min_kappa, or not asked to)"
            out[a.judge] = f"agreement {a.agreeing}/{a.n}, Cohen's kappa {kappa}; {verdict}"
        elif a.label == "all":
            short = "" if a.kappa is not None and a.kappa >= min_kappa else " (below min_kappa)"
            out[a.judge] += f"; on {a.answers_of}'s answers kappa {kappa}{short} ({a.agreeing}/{a.n})"
        elif a.n and a.answers_of == ALL_MODELS:
            out[a.judge] += f"; {a.label} {a.agreeing}/{a.n}"
    return out


def safety_tables(
    keys: dict[str, str], judged: Judgements, measured: list[Agreement], identity: dict[str, str]
) -> dict[str, pd.DataFrame]:
    """The judgements of the scenario's answers by the judges that qualified, and every judge's measurement (with
    whether it scored): written with the scores, at once."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    ratings = pd.DataFrame(
        [
            {**keys, "instance_id": inst, "rater": judge, "rater_identity": identity[judge], "score": j.score,
             "label": j.label, "judge_request_id": j.request_id, "raw_output": j.raw, "error": j.error}
            for judge, of in judged.items() for inst, j in of.items()
        ],
        columns=[*keys, "instance_id", "rater", "rater_identity", "score", "label", "judge_request_id", "raw_output",
                 "error"],
    )  # fmt: skip
    agreements = pd.DataFrame(
        [
            {**keys, "rater": a.judge, "rater_identity": identity[a.judge], "answers_of": a.answers_of,
             "human_label": a.label, "n": a.n, "agreeing": a.agreeing, "agreement": a.agreement, "kappa": a.kappa,
             "scores": a.judge in judged, "measured_at": now}
            for a in measured
        ]
    )  # fmt: skip
    return {"safety_ratings": ratings, "safety_agreement": agreements}
