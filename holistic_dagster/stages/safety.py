"""HELM Safety's raters at work (metrics/safety.py): before a safety scenario is scored, each rater the suite names
(the refusal classifier always; each judge model of `safety.judges`, through its backend and the completion cache)
is measured against people on XSTest's human labels, and only then rates the scenario's answers. Every rating is
stored with the rater's identity, the judge's request and its raw output (`safety_ratings`; a parse failure is an
error row, never a score), and every measurement per human label (`safety_agreement`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import pandas as pd

from holistic_dagster.adaptation.adapter import greedy_request
from holistic_dagster.clients.identity import answering_identity
from holistic_dagster.judging.judge import JudgeSetup, too_long
from holistic_dagster.judging.qualification import seeded_sample
from holistic_dagster.judging.safety_prompts import judge_prompt
from holistic_dagster.metrics.safety import (
    ALL_MODELS,
    CLASSIFIER,
    KIND,
    REFUSAL_CLASSIFIER,
    SAFE,
    Agreement,
    Rater,
    Rating,
    agreement,
    label_of_score,
    parse_judgement,
    qualifies,
)
from holistic_dagster.records import Instance
from holistic_dagster.scenarios import load_instances
from holistic_dagster.scenarios.sources import source_dir
from holistic_dagster.stages.completions import answer_requests
from holistic_dagster.stages.context import StageContext

HUMAN_LABELS = "xstest_labelled_answers"  # the judging set (assets/judging/): one subset per answering model
LABELLED_FILES = "xstest_v2_completions_*.csv"  # upstream's files of labelled answers, one per answering model


@dataclass
class Recorded:
    """A rater that keeps what it said: each rating with the answer's instance and the judge's request."""

    rater: Rater
    identity: str
    ratings: list[tuple[str, str, Rating]] = field(default_factory=list)  # (instance_id, judge request id, rating)

    @property
    def name(self) -> str:
        return self.rater.name

    def rate(self, items: Sequence[tuple[Instance, str]]) -> list[Rating]:
        out = self.rater.rate(items)
        self.ratings += [(inst.instance_id, getattr(r, "request_id", ""), r) for (inst, _), r in zip(items, out)]
        return out


@dataclass(frozen=True)
class JudgeRating(Rating):
    request_id: str = ""


def judge_rater(stage: StageContext, judge: str, max_tokens: int, purpose: str) -> Rater:
    """A judge model as a rater: HELM's judge prompt per answer (in the judge's chat layout when it has one),
    greedy, through its backend and the completion cache; each output parsed as HELM parses it."""
    client = stage.client(judge)
    layout = getattr(client, "chat_prompt", None)
    # the arena's judge setup, for its context check (no template: HELM's prompts are filled by judge_prompt)
    setup = JudgeSetup(stage.catalog.templates_dir, "", max_tokens, client.count_tokens, client.max_context, layout)

    def rate(items: Sequence[tuple[Instance, str]]) -> list[Rating]:
        requests = []
        for inst, answer in items:
            safe = bool(inst.metadata.get(SAFE))
            prompt = judge_prompt(stage.catalog.templates_dir, inst.metadata[KIND], safe, inst.input, answer)
            requests.append(greedy_request(inst.instance_id, layout(prompt) if layout else prompt, max_tokens,
                                           client.count_tokens))  # fmt: skip
        sendable = [r for r in requests if not too_long(r, setup)]  # a longer one is an error, not a request
        decoding = {"method": purpose, "max_tokens": max_tokens, "temperature": 0.0, "stop": []}
        done, _, _ = answer_requests(stage, judge, sendable, decoding, f"{judge} rating {len(items)} answers")
        out: list[Rating] = []
        for (inst, _), request in zip(items, requests):
            if why := too_long(request, setup):
                out.append(JudgeRating(None, "", "", why, request.request_id))
                continue
            completion = done[request.request_id][0]
            if completion.error:
                out.append(
                    JudgeRating(None, "", "", f"the judge's request failed: {completion.error}", request.request_id)
                )
                continue
            score, _, error = parse_judgement(completion.text)
            label = label_of_score(score, bool(inst.metadata.get(SAFE))) if score is not None else ""
            out.append(JudgeRating(score, label, completion.text, error, request.request_id))
        return out

    return Rater(judge, rate)


def human_labelled(stage: StageContext, items: int, seed: int) -> dict[str, list[Instance]]:
    """Per answering model, XSTest's human-labelled answers (all, or a seeded sample of `items` of each), as
    safety items of kind xstest: the judging set's subsets, and any further labelled file of upstream's layout
    in its folder."""
    spec = stage.catalog.scenario(HUMAN_LABELS, "judging")
    spec = spec.model_copy(update={"subsets": labelled_files(spec, stage.deployment.data_dirs)})
    by_model: dict[str, list[Instance]] = {}
    for inst in load_instances(spec, stage.deployment.data_dirs):
        rated = replace(inst, metadata={**inst.metadata, KIND: "xstest"})
        by_model.setdefault(inst.metadata["answers_of"], []).append(rated)
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


def measured_raters(stage: StageContext, version: str) -> tuple[list[Recorded], list[Agreement], dict[str, str]]:
    """The suite's raters, each measured against people first, on each answering model's labelled answers:
    (the raters that agree enough on every model's answers to score, every rater's measurement per model and
    over all of them, each rater's identity)."""
    spec = stage.catalog.suite(version).safety
    labelled = human_labelled(stage, spec.agreement_items, spec.seed)
    items = [(i, i.references[0].output) for found in labelled.values() for i in found]
    raters = [Recorded(REFUSAL_CLASSIFIER, CLASSIFIER)]
    raters += [
        Recorded(judge_rater(stage, j, spec.max_tokens, "safety_judge"), answering_identity(stage.client(j).describe()))
        for j in spec.judges
    ]
    measured: list[Agreement] = []
    scoring = []
    for recorded in raters:
        # every model's answers in one call (a judge's requests go out together); not recorded: they are the
        # labelled set's answers, not the evaluated model's
        labels = [r.label for r in recorded.rater.rate(items)]
        pairs = list(zip((i.metadata["human_label"] for i, _ in items), labels))
        name, start = recorded.rater.name, 0
        measured += agreement(name, pairs)
        for model, found in labelled.items():
            measured += agreement(name, pairs[start : start + len(found)], answers_of=model)
            start += len(found)
        enters = spec.classifier or name != CLASSIFIER
        if enters and qualifies(measured, name, spec.min_kappa):
            scoring.append(recorded)
    return scoring, measured, {r.rater.name: r.identity for r in raters}


def rater_summary(measured: list[Agreement], raters: list[Recorded], min_kappa: float) -> dict[str, str]:
    """Each rater's measurement against people, one line per rater (the scores step's metadata in Dagster):
    over every labelled answer, then Cohen's kappa on each answering model's."""
    scoring = {r.rater.name for r in raters}
    out: dict[str, str] = {}
    for a in measured:
        kappa = "undefined" if a.kappa is None else f"{a.kappa:.3f}"
        if a.label == "all" and a.answers_of == ALL_MODELS:
            verdict = "scores" if a.rater in scoring else "does not score (below min_kappa, or not asked to)"
            out[a.rater] = f"agreement {a.agreeing}/{a.n}, Cohen's kappa {kappa}; {verdict}"
        elif a.label == "all":
            short = "" if a.kappa is not None and a.kappa >= min_kappa else " (below min_kappa)"
            out[a.rater] += f"; on {a.answers_of}'s answers kappa {kappa}{short} ({a.agreeing}/{a.n})"
        elif a.n and a.answers_of == ALL_MODELS:
            out[a.rater] += f"; {a.label} {a.agreeing}/{a.n}"
    return out


def safety_tables(
    keys: dict[str, str], raters: list[Recorded], measured: list[Agreement], identity: dict[str, str]
) -> dict[str, pd.DataFrame]:
    """The ratings of the scenario's answers by the raters that scored, and every rater's measurement (with
    whether it scored): written with the scores, at once."""
    scored = {r.rater.name for r in raters}
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    ratings = pd.DataFrame(
        [
            {**keys, "instance_id": inst, "rater": r.rater.name, "rater_identity": r.identity, "score": rating.score,
             "label": rating.label, "judge_request_id": getattr(rating, "request_id", ""), "raw_output": rating.raw,
             "error": rating.error}
            for r in raters for inst, _, rating in r.ratings
        ],
        columns=[*keys, "instance_id", "rater", "rater_identity", "score", "label", "judge_request_id", "raw_output",
                 "error"],
    )  # fmt: skip
    agreements = pd.DataFrame(
        [
            {**keys, "rater": a.rater, "rater_identity": identity[a.rater], "answers_of": a.answers_of,
             "human_label": a.label, "n": a.n, "agreeing": a.agreeing, "agreement": a.agreement, "kappa": a.kappa,
             "scores": a.rater in scored, "measured_at": now}
            for a in measured
        ]
    )  # fmt: skip
    return {"safety_ratings": ratings, "safety_agreement": agreements}
