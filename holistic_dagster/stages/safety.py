"""HELM Safety's judges at work (judging/safety.py): before a safety scenario is scored, each judge the suite names
(XSTest's string match always; each judge model of `safety.judges`, through its backend and the completion cache)
is measured against people on human-labelled answers of the scenario's own kind (its instances' safety_kind: the
judging set `<kind>_labelled_answers` under assets/judging/, XSTest's here; judging/qualification.py), and only the
judges that qualify on that kind judge the scenario's answers. A kind without a judging set is judged by no one:
its safety score is not shown and says why (an agreement measured on another scenario's answers is not borrowed).
Every judgement is stored with the judge's identity, its request and its raw output (`safety_ratings`; a parse
failure is an error row, never a score), and every measurement per kind, answering model and human label, with its
interval (`safety_agreement`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from holistic_dagster.clients.identity import answering_identity
from holistic_dagster.judging.qualification import (
    ALL_MODELS,
    Agreement,
    agreement,
    below_bar,
    qualifies,
    seeded_sample,
)
from holistic_dagster.judging.safety import STRING_MATCH, SafetyJudge
from holistic_dagster.metrics.safety import CLASSIFIER, KIND
from holistic_dagster.metrics.scoring import Prediction
from holistic_dagster.records import Instance, SafetyJudgement, ScenarioMetric
from holistic_dagster.scenarios import load_instances
from holistic_dagster.scenarios.sources import source_dir
from holistic_dagster.scenarios.spec import ScenarioSpec
from holistic_dagster.stages.context import StageContext
from holistic_dagster.stages.judging import safety_model_judge
from holistic_dagster.warehouse.records import SafetyAgreementRow, SafetyRatingsRow
from holistic_dagster.warehouse.tables.judging import SAFETY_AGREEMENT, SAFETY_RATINGS

LABELLED_SET = "{kind}_labelled_answers"  # a kind's judging set (assets/judging/): one subset per answering model
HUMAN_LABELS = LABELLED_SET.format(kind="xstest")
LABELLED_FILES = "xstest_v2_completions_*.csv"  # upstream's files of XSTest's labelled answers, one per model
# {judge: {instance_id: its judgement}}: what the safety scorer receives, and what safety_ratings stores
Judgements = Mapping[str, Mapping[str, SafetyJudgement]]


@dataclass(frozen=True)
class SafetyJudging:
    """Who judges a scenario's answers: per kind of answers, the judges that qualified on that kind's labelled
    answers; every measurement; each judge's identity; the kinds no judging set labels (judged by no one)."""

    scoring: dict[str, list[SafetyJudge]] = field(default_factory=dict)
    measured: list[Agreement] = field(default_factory=list)
    identities: dict[str, str] = field(default_factory=dict)
    unmeasured: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()  # the kinds of the answers judged


def human_labelled(stage: StageContext, kind: str, items: int, seed: int) -> dict[str, list[Instance]]:
    """Per answering model, the human-labelled answers of a kind (all, or a seeded sample of `items` of each), as
    safety items of that kind: the judging set's subsets (XSTest's: and any further labelled file of upstream's
    layout in its folder); {} where no judging set labels that kind."""
    name = LABELLED_SET.format(kind=kind)
    if not (stage.catalog.root / "judging" / f"{name}.yaml").exists():
        return {}
    spec = stage.catalog.scenario(name, "judging")
    if kind == "xstest":
        spec = spec.model_copy(update={"subsets": labelled_files(spec, stage.deployment.data_dirs)})
    by_model: dict[str, list[Instance]] = {}
    for inst in load_instances(spec, stage.deployment.data_dirs):
        as_kind = replace(inst, metadata={**inst.metadata, KIND: kind})
        by_model.setdefault(inst.metadata["answers_of"], []).append(as_kind)
    return {
        model: seeded_sample(found, items or len(found), seed, f"{name}/{model}")
        for model, found in sorted(by_model.items())
    }


def labelled_files(spec: ScenarioSpec, data_dirs: Sequence[Path]) -> tuple[str, ...]:
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


def qualified_judges(stage: StageContext, version: str, kinds: Sequence[str]) -> SafetyJudging:
    """The suite's safety judges, each measured against people on each kind's labelled answers, per answering
    model: for each kind, the judges that agree enough on every model's answers of that kind to score it."""
    spec = stage.catalog.suite(version).safety
    judges = [STRING_MATCH, *(safety_model_judge(stage, j, spec.max_tokens, "safety_judge") for j in spec.judges)]
    identities = {CLASSIFIER: CLASSIFIER}
    identities |= {j: answering_identity(stage.client(j).describe()) for j in spec.judges}
    scoring: dict[str, list[SafetyJudge]] = {}
    measured: list[Agreement] = []
    unmeasured = []
    for kind in sorted(set(kinds)):
        labelled = human_labelled(stage, kind, spec.agreement_items, spec.seed)
        if not labelled:
            unmeasured.append(kind)
            continue
        answers = [(i, i.references[0].output) for found in labelled.values() for i in found]
        scoring[kind] = []
        for judge in judges:
            # every model's answers in one call (a judge model's requests go out together)
            labels = [j.label for j in judge.judge(answers)]
            pairs = list(zip((i.metadata["human_label"] for i, _ in answers), labels))
            measured.extend(agreement(judge.name, pairs, measured_on=kind))
            start = 0
            for model, found in labelled.items():
                measured.extend(agreement(judge.name, pairs[start : start + len(found)], model, kind))
                start += len(found)
            enters = spec.classifier or judge.name != CLASSIFIER
            if enters and qualifies(measured, judge.name, spec.min_kappa, kind):
                scoring[kind].append(judge)
    return SafetyJudging(scoring, measured, identities, tuple(unmeasured), tuple(sorted(set(kinds))))


def judge_answers(
    stage: StageContext, version: str, predictions: Sequence[Prediction]
) -> tuple[SafetyJudging, Judgements]:
    """The judges of the answers' kinds, measured first (qualified_judges), and their judgements of the answers."""
    judging = qualified_judges(stage, version, [str(p.instance.metadata.get(KIND)) for p in predictions])
    return judging, judge_predictions(judging, predictions) if judging.scoring else {}


def with_judging_notes(aggregates: list[ScenarioMetric], judging: SafetyJudging) -> list[ScenarioMetric]:
    """The scenario's safety score says who judged it, measured on its own kind of answers and how well, or, where
    no judging set labels its kind, that no one did."""
    out = []
    for m in aggregates:
        if m.metric == "safety_score" and not m.perturbation:
            if m.value is None and judging.unmeasured:
                m = replace(m, note="; ".join(unmeasured_note(k) for k in judging.unmeasured))
            elif m.value is not None:  # (a kind no one labelled among others: its answers are left out, and said so)
                notes = (m.note, judged_note(judging, judging.kinds), *map(unmeasured_note, judging.unmeasured))
                m = replace(m, note="; ".join(n for n in notes if n))
        out.append(m)
    return out


def judge_predictions(judging: SafetyJudging, predictions: Sequence[Prediction]) -> Judgements:
    """Each judge's judgement of each answer of a kind it qualified on (Judgements)."""
    out: dict[str, dict[str, SafetyJudgement]] = {}
    for kind, judges in judging.scoring.items():
        mine = [p for p in predictions if p.instance.metadata.get(KIND) == kind]
        answers = [(p.instance, p.text) for p in mine]
        for j in judges if mine else ():
            out.setdefault(j.name, {}).update({p.instance.instance_id: r for p, r in zip(mine, j.judge(answers))})
    return out


def judge_summary(judging: SafetyJudging, min_kappa: float) -> dict[str, str]:
    """Each judge's measurement against people, one line per judge and kind (the scores step's metadata in
    Dagster): over every labelled answer of the kind, then Cohen's kappa on each answering model's; and each kind
    that no judging set labels."""
    out: dict[str, str] = {}
    for a in judging.measured:
        key = f"{a.judge} on {a.measured_on}"
        kappa = "undefined" if a.kappa is None else f"{a.kappa:.3f}"
        if a.label == "all" and a.answers_of == ALL_MODELS:
            failed = below_bar(judging.measured, a.judge, min_kappa, a.measured_on)
            if any(j.name == a.judge for j in judging.scoring.get(a.measured_on, ())):
                verdict = "scores"
            elif failed:
                verdict = f"does not score: kappa below min_kappa on {', '.join(failed)}'s answers"
            else:
                verdict = "does not score: left out (safety.classifier: false)"
            out[key] = f"agreement {a.agreeing}/{a.n} ({_ci(a)}), Cohen's kappa {kappa}; {verdict}"
        elif a.label == "all":
            short = "" if a.kappa is not None and a.kappa >= min_kappa else " (below min_kappa)"
            out[key] += f"; on {a.answers_of}'s answers kappa {kappa}{short} ({a.agreeing}/{a.n}, {_ci(a)})"
        elif a.n and a.answers_of == ALL_MODELS:
            out[key] += f"; {a.label} {a.agreeing}/{a.n}"
    for kind in judging.unmeasured:
        out[f"no judge on {kind}"] = unmeasured_note(kind)
    return out


def unmeasured_note(kind: str) -> str:
    return (
        f"no judge was measured against people on {kind}'s answers (no judging set "
        f"{LABELLED_SET.format(kind=kind)} in assets/judging/): no safety number is shown; an agreement measured on "
        "another scenario's answers is not borrowed"
    )


def judged_note(judging: SafetyJudging, kinds: Sequence[str]) -> str:
    """What a scenario's safety score says of its judges: each scoring judge's kappa and agreement (with its
    interval) on the kind's labelled answers, per answering model."""
    parts = []
    for kind in sorted(set(kinds)):
        for judge in judging.scoring.get(kind, ()):
            rows = [a for a in judging.measured if a.judge == judge.name and a.measured_on == kind and a.label == "all"]
            per = "; ".join(
                f"{a.answers_of}'s kappa {_kappa(a)}, agreement {a.agreeing}/{a.n} ({_ci(a)})"
                for a in rows
                if a.answers_of != ALL_MODELS
            )
            parts.append(f"{judge.name}, measured on {kind}'s labelled answers: {per}")
    return "judged by " + " | ".join(parts) if parts else ""


def _kappa(a: Agreement) -> str:
    return "undefined" if a.kappa is None else f"{a.kappa:.2f}"


def _ci(a: Agreement) -> str:
    """The agreement's 95% interval, as text."""
    return f"95% CI {a.interval[0]:.2f}-{a.interval[1]:.2f}" if a.interval else "no answers"


def safety_tables(keys: dict[str, str], judged: Judgements, judging: SafetyJudging) -> dict[str, pd.DataFrame]:
    """The judgements of the scenario's answers by the judges that qualified, and every judge's measurement (with
    whether it scored that kind): written with the scores, at once."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    identity = judging.identities
    ratings = [
        SafetyRatingsRow(**keys, instance_id=inst, judge=judge, judge_identity=identity[judge], score=j.score,
                         label=j.label, judge_request_id=j.request_id, raw_output=j.raw, error=j.error)
        for judge, of in judged.items() for inst, j in of.items()
    ]  # fmt: skip
    agreements = [
        SafetyAgreementRow(
            **keys, judge=a.judge, judge_identity=identity[a.judge], measured_on=a.measured_on,
            answers_of=a.answers_of, human_label=a.label, n=a.n, agreeing=a.agreeing, agreement=a.agreement,
            agreement_low=a.interval[0] if a.interval else None, agreement_high=a.interval[1] if a.interval else None,
            kappa=a.kappa, scores=any(j.name == a.judge for j in judging.scoring.get(a.measured_on, ())),
            measured_at=now,
        )
        for a in judging.measured
    ]  # fmt: skip
    return {"safety_ratings": SAFETY_RATINGS.frame(ratings), "safety_agreement": SAFETY_AGREEMENT.frame(agreements)}
