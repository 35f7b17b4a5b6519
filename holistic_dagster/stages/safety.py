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
from holistic_dagster.arena.judge import JudgeSetup, too_long
from holistic_dagster.arena.qualification import seeded_sample
from holistic_dagster.clients.identity import answering_identity
from holistic_dagster.metrics.safety import (
    CLASSIFIER,
    KIND,
    REFUSAL_CLASSIFIER,
    SAFE,
    Agreement,
    Rater,
    Rating,
    agreement,
    judge_prompt,
    label_of_score,
    parse_judgement,
)
from holistic_dagster.records import Instance
from holistic_dagster.scenarios import load_instances
from holistic_dagster.stages.completions import answer_requests
from holistic_dagster.stages.context import StageContext

HUMAN_LABELS = "xstest_human_labels"  # the judging set (assets/judging/)


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
    # the arena's judge setup, for its context check (no template: HELM's prompts are filled in judge_prompt)
    setup = JudgeSetup(stage.catalog.templates_dir, "", max_tokens, client.count_tokens, client.max_context, layout)

    def rate(items: Sequence[tuple[Instance, str]]) -> list[Rating]:
        requests = []
        for inst, answer in items:
            prompt = judge_prompt(inst.metadata[KIND], bool(inst.metadata.get(SAFE)), inst.input, answer)
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


def human_labelled(stage: StageContext, items: int, seed: int) -> list[Instance]:
    """XSTest's human-labelled answers (all, or a seeded sample of `items`), as safety items of kind xstest."""
    found = load_instances(stage.catalog.scenario(HUMAN_LABELS, "judging"), stage.deployment.data_dirs)
    found = [replace(i, metadata={**i.metadata, KIND: "xstest"}) for i in found]
    return seeded_sample(found, items or len(found), seed, HUMAN_LABELS)


def measured_raters(stage: StageContext, version: str) -> tuple[list[Recorded], list[Agreement], dict[str, str]]:
    """The suite's raters, each measured against people first: (the raters that agree enough to score, every
    rater's measurement, each rater's identity)."""
    spec = stage.catalog.suite(version).safety
    labelled = human_labelled(stage, spec.agreement_items, spec.seed)
    items = [(i, i.references[0].output) for i in labelled]
    humans = [i.metadata["human_label"] for i in labelled]
    raters = [Recorded(REFUSAL_CLASSIFIER, CLASSIFIER)]
    raters += [
        Recorded(judge_rater(stage, j, spec.max_tokens, "safety_judge"), answering_identity(stage.client(j).describe()))
        for j in spec.judges
    ]
    measured: list[Agreement] = []
    scoring = []
    for recorded in raters:
        ratings = recorded.rater.rate(items)  # not recorded: these are GPT-4's answers, not the model's
        mine = agreement(recorded.rater.name, list(zip(humans, (r.label for r in ratings))))
        measured += mine
        enters = spec.classifier or recorded.rater.name != CLASSIFIER
        if enters and mine[0].kappa is not None and mine[0].kappa >= spec.min_kappa:
            scoring.append(recorded)
    return scoring, measured, {r.rater.name: r.identity for r in raters}


def rater_summary(measured: list[Agreement], raters: list[Recorded]) -> dict[str, str]:
    """Each rater's measurement against people, one line per rater (the scores step's metadata in Dagster)."""
    scoring = {r.rater.name for r in raters}
    out: dict[str, str] = {}
    for a in measured:
        if a.label == "all":
            kappa = "undefined" if a.kappa is None else f"{a.kappa:.3f}"
            verdict = "scores" if a.rater in scoring else "does not score (below min_kappa, or not asked to)"
            out[a.rater] = f"agreement {a.agreeing}/{a.n}, Cohen's kappa {kappa}; {verdict}"
        elif a.n:
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
            {**keys, "rater": a.rater, "rater_identity": identity[a.rater], "human_label": a.label, "n": a.n,
             "agreeing": a.agreeing, "agreement": a.agreement, "kappa": a.kappa, "scores": a.rater in scored,
             "measured_at": now}
            for a in measured
        ]
    )  # fmt: skip
    return {"safety_ratings": ratings, "safety_agreement": agreements}
