"""The checks of shadow evaluation: no personal data in the stored traffic, and judge verdicts that parse."""

from __future__ import annotations

from dataclasses import replace

from holistic_dagster.config.redaction import redact
from holistic_dagster.quality.base import CheckOutcome, declare
from holistic_dagster.quality.gx import expect
from holistic_dagster.shadow.masking import MASK
from holistic_dagster.shadow.pii_check import TRAFFIC_TEXTS, found_per_row
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import ShadowVerdicts, Traffic

PII_REMOVED = declare(
    "shadow_traffic",
    "pii_removed",
    "An independent PII detector (Presidio's recognizers and spaCy names, and under the mask policy anything "
    "the policy would mask: digit runs, e-mail-like strings, name-like words, streets, possible birth dates) "
    "finds no personal data in any stored text of the traffic log: messages, prompts, production's answers, "
    "record ids, slices and times. The same detector read every text before it was stored, and what it found "
    "was masked; this re-reads what was stored. A detector that cannot run fails the check.",
    blocking=True,
)
SHADOW_VERDICTS_PARSE = declare(
    "shadow_verdicts",
    "verdicts_parse",
    "Judgements without a verdict stay within shadow.yaml's max_failure_rate; they are never votes.",
    blocking=True,
)


def check_traffic(warehouse: ResultStore, log: str, policy: str = MASK) -> list[CheckOutcome]:
    """Every stored text of the log run through an independent PII detector (shadow.pii_check, not the remover's
    patterns). Fails closed: a detector that cannot run fails the check. Details name the column, line and kind
    of what was found, never the value."""
    frame = Traffic(warehouse).texts(log)
    try:
        found = frame[["line"]].assign(pii=found_per_row(frame, TRAFFIC_TEXTS, policy))
    except Exception as e:  # fail closed: unchecked text is never passed as clean
        return [PII_REMOVED.result(False, f"{PII_REMOVED.description} The detector could not run: {redact(str(e))}")]
    expectations = [
        expect.ExpectTableRowCountToBeBetween(min_value=1),
        expect.ExpectColumnValuesToBeInSet(column="pii", value_set=[""]),
    ]
    outcome = PII_REMOVED.outcome(found, expectations, examples=False)
    left = {int(r.line): r.pii for r in found.itertuples() if r.pii}
    if not left:
        return [outcome]
    return [replace(outcome, description=f"{outcome.description} Found on lines: {left}",
                    details={**outcome.details, "found": left})]  # fmt: skip


def check_shadow_verdicts(warehouse: ResultStore, log: str, max_failure_rate: float) -> list[CheckOutcome]:
    frame = ShadowVerdicts(warehouse).of_log(log)
    expectations = [
        expect.ExpectTableRowCountToBeBetween(min_value=1),
        expect.ExpectColumnValuesToBeInSet(
            column="winner", value_set=["candidate", "production", "tie"], mostly=1.0 - max_failure_rate
        ),
    ]
    return [SHADOW_VERDICTS_PARSE.outcome(frame, expectations)]
