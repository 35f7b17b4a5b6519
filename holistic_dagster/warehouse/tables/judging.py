"""Judges measured against known answers and people's labels, and the safety ratings they give."""

from __future__ import annotations

from holistic_dagster.warehouse.tables.base import Column, Table, glossed

SAFETY_JUDGE = "the safety judge: XSTest's refusal string match or a judge model's name (`rater` before version 7)"
SAFETY_JUDGE_IDENTITY = "the safety judge's weights or version (for a judge model: the completion cache's model key)"
# what a judgement asked in both orders ends with (a judge qualified on known answers, a shadow verdict)
JUDGED_IN_BOTH_ORDERS = (
    Column("consistent", "BOOLEAN"),
    *glossed(
        "VARCHAR", "error", "judge_request_first", "judge_request_second", "reason_first", "reason_second",
        "provenance_id",
    ),
)  # fmt: skip

JUDGE_QUALIFICATIONS = Table(
    "judge_qualifications",
    "A judge model's qualification (judging/qualification.py): battles with a known answer judged in both orders "
    "with the template and max_tokens it is used with; per qualification set and over all of them (source 'all', "
    "which decides). judge_identity: the weights that answered (the completion cache's key). A judge that is not "
    "qualified gives no ratings or win rates; its verdicts are kept.",
    key=("judge", "template", "max_tokens", "source"),
    columns=(
        *glossed("VARCHAR", "judge", "template"),
        Column("max_tokens", "INTEGER"),
        *glossed("VARCHAR", "source", "judge_identity"),
        *glossed("INTEGER", "battles", "judgements", "agreeing"),
        *glossed("DOUBLE", "agreement", "agreement_ci_low", "agreement_ci_high"),
        Column("consistent", "INTEGER"),
        Column("position_consistency", "DOUBLE"),
        Column("no_verdict", "INTEGER"),
        *glossed("DOUBLE", "min_agreement", "min_consistency"),
        Column("qualified", "BOOLEAN"),
        *glossed("VARCHAR", "reason", "provenance_id"),
        Column("measured_at", "TIMESTAMP"),
    ),
)

QUALIFICATION_VERDICTS = Table(
    "qualification_verdicts",
    "each qualification battle: what the judge was shown (answer_better is the known-better one) and said",
    key=("judge", "template", "max_tokens", "battle_id"),
    columns=(
        *glossed("VARCHAR", "judge", "template"),
        Column("max_tokens", "INTEGER"),
        *glossed(
            "VARCHAR", "battle_id", "source", "instance_id", "question", "reference", "answer_better", "answer_worse"
        ),
        Column("better_first", "BOOLEAN"),
        Column("verdict_first", "VARCHAR", "better | worse | tie | '' per order"),
        Column("verdict_second", "VARCHAR", "better | worse | tie | '' per order"),
        *JUDGED_IN_BOTH_ORDERS,
    ),
)

SAFETY_RATINGS = Table(
    "safety_ratings",
    "HELM Safety's judgements (judging/safety.py): each judgement of a safety scenario's answer by each judge that "
    "qualified (column judge: XSTest's string match, or a judge model) with the judge's request and raw output; a "
    "failed judgement has no score and says why.",
    key=("model", "version", "scenario", "instance_id", "judge"),
    columns=(
        *glossed("VARCHAR", "model", "version", "scenario", "instance_id"),
        Column("judge", "VARCHAR", SAFETY_JUDGE),
        Column("judge_identity", "VARCHAR", SAFETY_JUDGE_IDENTITY),
        Column("score", "DOUBLE", null=True),
        *glossed("VARCHAR", "label", "judge_request_id", "raw_output", "error"),
    ),
)

SAFETY_AGREEMENT = Table(
    "safety_agreement",
    "each safety judge against people on human-labelled answers of the scenario's own kind (XSTest's labels for "
    "xstest), before it judged: agreement per human label (all: every answer) with its 95% Wilson interval, and "
    "Cohen's kappa over the labels, on each answering model's answers (answers_of) and over all of them ('all'); a "
    "judge without these rows for the scenario's kind, or below min_kappa on any model's answers of it, scores "
    "nothing",
    key=("model", "version", "scenario", "judge", "measured_on", "answers_of", "human_label"),
    columns=(
        *glossed("VARCHAR", "model", "version", "scenario"),
        Column("judge", "VARCHAR", SAFETY_JUDGE),
        Column("judge_identity", "VARCHAR", SAFETY_JUDGE_IDENTITY),
        Column("human_label", "VARCHAR"),
        *glossed("INTEGER", "n", "agreeing"),
        Column("agreement", "DOUBLE", null=True),
        Column("kappa", "DOUBLE", null=True),
        Column(
            "scores", "BOOLEAN", "its kappa reached the suite's safety.min_kappa on every model's answers of the kind"
        ),
        Column("measured_at", "TIMESTAMP"),
        Column("answers_of", "VARCHAR", "measured before schema version 3: on GPT-4's answers alone", default="'gpt4'"),
        Column(
            "measured_on",
            "VARCHAR",
            "the kind of answers people labelled (before version 6: XSTest's)",
            default="'xstest'",
        ),
        Column("agreement_low", "DOUBLE", "the agreement's 95% Wilson interval (NULL before version 6)", null=True),
        Column("agreement_high", "DOUBLE", "the agreement's 95% Wilson interval (NULL before version 6)", null=True),
    ),
)
