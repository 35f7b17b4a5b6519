"""Chain-of-thought multiple choice (HELM Capabilities' MMLU-Pro and GPQA): chain_of_thought_correctness is HELM's
GPQAChainOfThoughtMetric, 1 when the letter extracted from the reasoning names the correct choice (the adapter
method extracts it: adaptation/methods/multiple_choice_joint_chain_of_thought.py); an output without an
extractable letter is wrong. How often that happens is its own number, so a low score from unparseable answers is
told apart from a low score from wrong ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holistic_dagster.adaptation.methods.multiple_choice_joint_chain_of_thought import MultipleChoiceJointChainOfThought
from holistic_dagster.metrics.accuracy import exact_match
from holistic_dagster.metrics.registry import declare, reference_metric, scorer
from holistic_dagster.records import InstanceScore, ScenarioMetric

if TYPE_CHECKING:
    from holistic_dagster.metrics.scoring import ScoringInput


@reference_metric("chain_of_thought_correctness", "the letter extracted from the chain of thought names the correct "
                  "choice (HELM's GPQAChainOfThoughtMetric; no letter extracted: wrong)")  # fmt: skip
def chain_of_thought_correctness(gold: str, pred: str) -> float:
    return exact_match(gold, pred)  # the method maps the extracted letter to its choice ("" when none)


declare("answer_extracted", "accuracy", "an answer letter could be extracted from the chain of thought (HELM's "
        "patterns); the rest count as wrong", per_instance=True, mean_of_instances=True)  # fmt: skip


@scorer("chain_of_thought", "accuracy", ("answer_extracted",), methods=(MultipleChoiceJointChainOfThought.name,))
def chain_of_thought(given: ScoringInput) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    """Per instance, whether its output named a letter of one of its choices."""
    rows = [
        InstanceScore(
            p.instance.instance_id, "answer_extracted", "accuracy", float(bool(p.text)), p.carrier.request_id, p.text
        )  # fmt: skip
        for p in given.predictions
    ]
    return rows, []
