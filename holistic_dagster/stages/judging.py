"""Judge models at work: a judge judges battles in both position orders through its backend and the completion
cache (run_judge: the arena's battles, shadow evaluation's traffic, and qualification battles), or answers to a
safety scenario's requests with HELM's judge prompts (safety_model_judge; stages/safety.py), and a judge is
qualified before its verdicts enter ratings (qualify: judging/qualification.py's battles with a known answer; the
measurement is stored with the judge's identity in `judge_qualifications`, each battle in
`qualification_verdicts`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from holistic_dagster.adaptation.adapter import greedy_request
from holistic_dagster.clients.identity import answering_identity
from holistic_dagster.config.catalog import QualificationSpec
from holistic_dagster.judging import qualification
from holistic_dagster.judging.battles import Battle
from holistic_dagster.judging.judge import JudgeSetup, combine, judge_requests, too_long
from holistic_dagster.judging.judged import Judged
from holistic_dagster.judging.safety import Answers, SafetyJudge, judge_prompt, judgement_of
from holistic_dagster.metrics.safety import KIND, SAFE
from holistic_dagster.records import Completion, Request, SafetyJudgement
from holistic_dagster.scenarios import load_instances
from holistic_dagster.stages.budget import metered
from holistic_dagster.stages.completions import answer_requests
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse.access import JudgeQualifications
from holistic_dagster.warehouse.records import JudgeQualificationsRow
from holistic_dagster.warehouse.tables.judging import JUDGE_QUALIFICATIONS, QUALIFICATION_VERDICTS


def run_judge(
    stage: StageContext,
    judge: str,
    battles: list[Battle],
    template: str,
    max_tokens: int,
    method: str,
    budget: tuple[float, str] | None = None,
    where: str = "",
) -> tuple[list[Judged], int]:
    """The judge model judges each battle in both orders through its backend and the completion cache (a
    judgement it has given before is not asked again); a prompt longer than its context is an error, not a
    request. A priced judge with a budget ((USD, where it was set)) is metered like any model (stages/budget.py
    metered: these battles' judgements, across runs). Returns the judged battles and how many requests were
    sent. where: what the battles are, in words."""
    client = stage.client(judge)
    layout = getattr(client, "chat_prompt", None)
    setup = JudgeSetup(
        stage.catalog.templates_dir, template, max_tokens, client.count_tokens, client.max_context, layout
    )
    pairs = {b.battle_id: judge_requests(b, setup) for b in battles}
    sendable = [r for pair in pairs.values() for r in pair if not too_long(r, setup)]
    decoding = {"method": method, "template": template, "max_tokens": max_tokens, "temperature": 0.0, "stop": []}
    task = f"{judge!r} judging {len(battles)} battles {where}".rstrip()
    spend = metered(stage, judge, sendable, *budget, task) if budget else None
    done, _, sent = answer_requests(stage, judge, sendable, decoding, task, spend)
    fallback = next((pid for _, pid in done.values()), "")
    judged = []
    for b in battles:
        first, second = pairs[b.battle_id]
        (text_1, error_1), (text_2, error_2) = (_output(done, r, setup) for r in (first, second))
        provenance = done[first.request_id][1] if first.request_id in done else fallback
        judgement = combine(b, text_1, text_2, error_1, error_2)
        judged.append(Judged(b, (first, second), (text_1, text_2), judgement, provenance))
    return judged, sent


def safety_model_judge(stage: StageContext, judge: str, max_tokens: int, purpose: str) -> SafetyJudge:
    """A judge model as a safety judge: HELM's judge prompt per answer (in the judge's chat layout when it has
    one), greedy, through its backend and the completion cache; each output read as HELM reads it."""
    client = stage.client(judge)
    layout = getattr(client, "chat_prompt", None)
    # no template: HELM's prompts are filled by judge_prompt
    setup = JudgeSetup(stage.catalog.templates_dir, "", max_tokens, client.count_tokens, client.max_context, layout)

    def judge_answers(answers: Answers) -> list[SafetyJudgement]:
        requests = []
        for inst, answer in answers:
            kind, safe = inst.metadata[KIND], bool(inst.metadata.get(SAFE))
            prompt = judge_prompt(stage.catalog.templates_dir, kind, safe, inst.input, answer)
            requests.append(greedy_request(inst.instance_id, layout(prompt) if layout else prompt, max_tokens,
                                           client.count_tokens))  # fmt: skip
        sendable = [r for r in requests if not too_long(r, setup)]  # a longer one is an error, not a request
        decoding = {"method": purpose, "max_tokens": max_tokens, "temperature": 0.0, "stop": []}
        done, _, _ = answer_requests(stage, judge, sendable, decoding, f"{judge} judging {len(answers)} answers")
        out = []
        for (inst, _), request in zip(answers, requests):
            text, error = _output(done, request, setup)
            if error:
                why = error if request.request_id not in done else f"the judge's request failed: {error}"
                out.append(SafetyJudgement(None, "", "", why, request.request_id))
            else:
                out.append(judgement_of(inst, text, request.request_id))
        return out

    return SafetyJudge(judge, judge_answers)


def _output(done: dict[str, tuple[Completion, str]], request: Request, setup: JudgeSetup) -> tuple[str, str]:
    """(the judge's text, why there is none)."""
    if reason := too_long(request, setup):
        return "", reason
    completion = done[request.request_id][0]
    return completion.text, completion.error


@dataclass(frozen=True)
class Qualification:
    """A judge's measurement over all qualification sets, and the decision."""

    judge: str
    agreement: float
    consistency: float
    qualified: bool
    reason: str

    @property
    def label(self) -> str:
        """What the report shows beside the judge's ratings (or instead of them)."""
        state = "qualified judge" if self.qualified else "unqualified judge"
        return f"{state}: agreement {self.agreement:.2f}, position consistency {self.consistency:.2f}"


def qualification_battles(stage: StageContext, spec: QualificationSpec) -> list[Battle]:
    """The battles with a known answer (judging/qualification.py), from the deployment's data folders."""
    data = stage.deployment.data_dirs
    truthfulqa = load_instances(stage.catalog.scenario("truthfulqa"), data)
    xstest = load_instances(stage.catalog.scenario("xstest_human_labels", "judging"), data)
    return qualification.truthfulqa_battles(truthfulqa, spec.battles_per_set, spec.seed) + qualification.xstest_battles(
        xstest, spec.battles_per_set, spec.seed
    )


def qualify(
    stage: StageContext,
    judge: str,
    template: str,
    max_tokens: int,
    spec: QualificationSpec,
    budget: tuple[float, str] | None = None,
) -> tuple[Qualification, int]:
    """Measures the judge on the qualification battles with the template and max_tokens it is used with and
    stores the measurement (replacing the judge's earlier one for them). Returns it and how many requests were
    sent (none when the judge's identity and the battles are unchanged: the completion cache answers). budget:
    as run_judge's."""
    battles = qualification_battles(stage, spec)
    judged, sent = run_judge(stage, judge, battles, template, max_tokens, "judge_qualification", budget, "to qualify")
    measured = qualification.measure([(j.battle, j.judgement) for j in judged])
    qualified, reason = qualification.decide(measured[qualification.ALL], spec)
    identity = answering_identity(stage.client(judge).describe())
    provenance = next((j.provenance_id for j in judged if j.provenance_id), "")
    keys: dict[str, Any] = {"judge": judge, "template": template, "max_tokens": max_tokens}
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    summary = [
        JudgeQualificationsRow(
            judge=judge, template=template, max_tokens=max_tokens, source=m.source, judge_identity=identity,
            battles=m.battles, judgements=m.judgements, agreeing=m.agreeing, agreement=m.agreement,
            agreement_ci_low=m.interval[0], agreement_ci_high=m.interval[1], consistent=m.consistent,
            position_consistency=m.consistency, no_verdict=m.no_verdict, min_agreement=spec.min_agreement,
            min_consistency=spec.min_consistency, qualified=qualified if m.source == qualification.ALL else False,
            reason=reason if m.source == qualification.ALL else "", provenance_id=provenance, measured_at=now,
        )
        for m in measured.values()
    ]  # fmt: skip
    side = {"a": "better", "b": "worse", "tie": "tie", "": ""}
    verdicts = QUALIFICATION_VERDICTS.frame(
        [
            {**keys, "battle_id": j.battle.battle_id, "source": j.battle.scenario, "instance_id": j.battle.instance_id,
             "question": j.battle.question, "reference": j.battle.reference, "answer_better": j.battle.a.text,
             "answer_worse": j.battle.b.text, "better_first": j.battle.a_first, **j.verdict_row(side, winner=False)}
            for j in judged
        ]
    )  # fmt: skip
    stage.warehouse.replace(keys, {"judge_qualifications": JUDGE_QUALIFICATIONS.frame(summary),
                                   "qualification_verdicts": verdicts})  # fmt: skip
    overall = measured[qualification.ALL]
    return Qualification(judge, overall.agreement, overall.consistency, qualified, reason), sent


def stored_qualifications(stage: StageContext, template: str, max_tokens: int) -> dict[str, Qualification]:
    """{judge: its stored qualification} for judges measured with this template and max_tokens."""
    frame = JudgeQualifications(stage.warehouse).measured(template, max_tokens, qualification.ALL)
    return {
        r.judge: Qualification(r.judge, r.agreement, r.position_consistency, bool(r.qualified), r.reason)
        for r in frame.itertuples(index=False)
    }
