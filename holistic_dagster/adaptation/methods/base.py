"""What an adapter method is (HELM's adapter classes, behind one lookup: adaptation/methods/__init__.py): how it
asks a model about one instance (its requests, its few-shot examples, its default prompt template) and how the
model's answers become the instance's prediction. Everything else that depends on the method reads these facts;
no other module switches on a method's name."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from holistic_dagster.records import CHOICE_LABELS, Completion, Instance, Request, request_id

if TYPE_CHECKING:
    from holistic_dagster.adaptation.adapter import Adapter
    from holistic_dagster.adaptation.spec import AdapterSpec

Prediction = tuple[str, float, Request]  # (prediction text, the model's probability for it, the request carrying it)


class AdapterMethod:
    """One adapter method. Subclasses set the facts and implement `requests` and `predict`."""

    name: ClassVar[str]
    template: ClassVar[str] = "generation.j2"  # the prompt template a scenario's adapter uses unless it names one
    # asks for the log-probability of given continuations (prompt log-probabilities), which not every model gives
    scores_continuations: ClassVar[bool] = False
    # a suite's `fallback_method` may stand in for it on a model that cannot give prompt log-probabilities
    fallback_allowed: ClassVar[bool] = True
    needs_references: ClassVar[bool] = True  # every evaluated instance has a correct reference
    open_ended: ClassVar[bool] = False  # free-text answers (what arena battles compare)
    primed: ClassVar[bool] = True  # its prompts are counted ahead, in one call to the tokenizer (Adapter.prime)
    # under conventions helm: the prompt layout HELM's run specs give the method (None: the scenario's own)
    helm_layout: ClassVar[Mapping[str, Any] | None] = None
    # under conventions helm: the decoding HELM's run specs give the method, where it differs (None: the scenario's)
    helm_decoding: ClassVar[Mapping[str, Any] | None] = None
    # what the method sets of the scenario it is pinned to (language modeling: its own metrics and families)
    scenario_pins: ClassVar[Mapping[str, Any]] = {}
    adapter_pins: ClassVar[Mapping[str, Any]] = {}

    def max_tokens(self, spec: AdapterSpec) -> int:
        """Tokens a generated answer may take (0: nothing is generated)."""
        return spec.max_tokens

    def num_train_draws(self, spec: AdapterSpec) -> int:
        """How many training instances the few-shot draw takes."""
        return spec.max_train_instances

    def examples(self, train: Sequence[Instance], spec: AdapterSpec) -> list[dict[str, Any]]:
        """The in-context examples the template shows for these training instances."""
        return [{"input": t.input, "choices": choices(t), "output": self.example_output(t)} for t in train]

    def example_output(self, inst: Instance) -> str:
        return inst.correct_references[0].output if inst.correct_references else ""

    def prime_texts(self, tests: Sequence[Instance]) -> list[str]:
        """Texts besides the prompts whose token counts the requests need (counted with the prompts)."""
        return []

    def requests(self, adapter: Adapter, instance: Instance, train: list[Instance]) -> list[Request]:
        raise NotImplementedError

    def predict(
        self, instance: Instance, requests: Sequence[Request], completions: Mapping[str, Completion]
    ) -> Prediction:
        raise NotImplementedError


def choices(inst: Instance) -> list[dict[str, str]]:
    """An instance's references as the templates list them: {label: A, B, ..., text}."""
    return [{"label": CHOICE_LABELS[i], "text": r.output} for i, r in enumerate(inst.references)]


def is_first_sample(request: Request) -> bool:
    """Whether a generation request is its instance's first sample: the one whose identity names no sample."""
    return request.request_id == request_id(
        kind=request.kind,
        prompt=request.prompt,
        continuation=request.continuation,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        stop=request.stop,
    )


def generated(requests: Sequence[Request], completions: Mapping[str, Completion]) -> tuple[Request, Completion, float]:
    """An instance's generation request (its first sample, when it has several), its completion and the probability
    of the generated text (HELM: exp of the sum of the generated tokens' log-probabilities)."""
    request = next((r for r in requests if is_first_sample(r)), requests[0])
    completion = completions[request.request_id]
    return request, completion, math.exp(completion.logprob)
