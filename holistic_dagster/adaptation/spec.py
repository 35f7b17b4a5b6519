"""How to ask: HELM's adapter spec (the method and its decoding and prompt layout, the layout in a Jinja2 template),
and how closely a suite follows HELM's conventions where they are conventions rather than data."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from holistic_dagster.adaptation.methods import ADAPTER_METHODS, adapter_method
from holistic_dagster.records import Strict

# How closely a suite follows HELM 0.5.16 where HELM's behaviour is a convention rather than the data. helm: HELM's
# own draws of evaluated instances and in-context examples (scenarios.sampling, adaptation.examples), its separate
# multiple-choice layout (adaptation.adapter.adapter_as_asked), its decoding of joint multiple choice, and its own
# reading of a scenario where a scenario file's `helm:` section says how (BBQ's and BOLD's shuffles, IMDB asked by
# generation, HELM's synthetic reasoning generator, GSM8K's train pool), so a run compares with a HELM run instance
# by instance; helm_draws: the draws and the separate layout only, as suite v5 was released; legacy: this project's
# draws and layouts before suite v5, kept so that the versions that used them reproduce their draws.
CONVENTIONS = ("helm", "helm_draws", "legacy")


class AdapterSpec(Strict):
    """How to ask: HELM's adapter spec, with the prompt layout in a Jinja2 template."""

    # the adapter method: generation, multiple_choice_joint, multiple_choice_separate_original, ... (HELM's)
    method: Literal[ADAPTER_METHODS]  # type: ignore[valid-type]
    template: str | None = None  # file in templates/; default: the method's (adaptation.methods)
    instructions: str = ""  # itself a template over the instance's subset
    # what ends the instructions before the first block: HELM's format_instructions adds "\n"; its translation
    # adapter gives its instructions without one
    instructions_suffix: str = "\n"
    input_prefix: str = ""  # a template too where it has "{{" (WMT14's source language)
    # text after an instance's input
    input_suffix: str = "\n"
    output_prefix: str = "Answer: "  # a template too where it has "{{" (LegalBench's output noun per task)
    # text after an example's answer
    output_suffix: str = "\n"
    # the lettered choices' prefix (HELM's reference_prefix; its "A" becomes each choice's letter: GPQA's "(A) ")
    reference_prefix: str = "A. "
    # what separates the prompt's blocks (instructions, each example, the question): HELM's instance_prefix ("###\n"
    # in MATH); the instructions' own line break comes before it
    instance_prefix: str = "\n"
    global_suffix: str = ""  # text after the whole prompt (HELM's; the chain-of-thought request to reason)
    chain_of_thought_prefix: str = ""  # an example's reasoning is shown between these (HELM's)
    # text after an example's reasoning
    chain_of_thought_suffix: str = "\n"
    max_train_instances: int = Field(0, ge=0)  # in-context examples drawn from the few-shot pool
    max_tokens: int = Field(1, ge=0)  # the most tokens generated
    temperature: float = Field(0.0, ge=0.0)  # 0: greedy
    # generations per instance (HELM's num_outputs: RealToxicityPrompts samples 25 at temperature 0.9); the first is
    # the one the reference metrics score, every one enters the toxicity metrics
    num_outputs: int = Field(1, ge=1)
    stop_sequences: tuple[str, ...] = ("\n",)  # generation stops before the first of these

    @property
    def template_file(self) -> str:
        return self.template or adapter_method(self.method).template
