"""Turning instances into model requests: the prompt rendered with the scenario's sandboxed template, fitted to
the model's context window (few-shot examples dropped, last first, then the prompt truncated from the left), and
the requests the adapter method asks (adaptation.methods)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from holistic_dagster.adaptation.examples import select_examples
from holistic_dagster.adaptation.methods import adapter_method
from holistic_dagster.adaptation.methods.base import choices
from holistic_dagster.adaptation.spec import AdapterSpec
from holistic_dagster.adaptation.templating import render, render_file, string_template
from holistic_dagster.records import Instance, Request, request_id


def adapter_as_asked(adapter: AdapterSpec, method: str, conventions: str | None) -> AdapterSpec:
    """The adapter a model is asked with under `method` (the scenario's, or the suite's fallback when the model
    cannot give prompt log-probabilities): under conventions helm (and helm_draws), a method with a layout of HELM's
    own (separate multiple choice) takes it, while a fallback to joint keeps the scenario's instructions and
    prefixes; under helm, a method's decoding is HELM's (joint multiple choice: no stop sequence)."""
    adapter = adapter.model_copy(update={"method": method})
    asked = adapter_method(method)
    if conventions in ("helm", "helm_draws") and asked.helm_layout:
        adapter = adapter.model_copy(update=dict(asked.helm_layout))
    if conventions == "helm" and asked.helm_decoding:
        adapter = adapter.model_copy(update=dict(asked.helm_decoding))
    return adapter


@dataclass(frozen=True)
class TokenBudget:
    """What adaptation needs from a model: its context window and its tokenizer."""

    max_context: int
    count_tokens: Callable[[str], int]
    truncate_left: Callable[[str, int], str]  # keep the last n tokens of a text
    # lays a rendered prompt out as the model's chat (a local model with `chat: true`); None: plain text
    chat_prompt: Callable[[str], str] | None = None
    # counts many texts in one call, where that is cheaper than one call each (a model in another process)
    count_tokens_many: Callable[[list[str]], list[int]] | None = None


class Adapter:
    """Renders prompts for one scenario with the sandboxed template and builds the requests its method asks."""

    def __init__(self, spec: AdapterSpec, templates_dir: Path, budget: TokenBudget):
        self.spec, self.templates_dir = spec, templates_dir
        self.method = adapter_method(spec.method)
        self._count_once = budget.count_tokens
        self._counts: dict[str, int] = {}  # a text's count, asked once (a few-shot prompt is counted twice)
        self._primed: dict[str, str] = {}  # instance_id -> its prompt with every few-shot example (prime)
        self.budget = replace(budget, count_tokens=self._count)

    def _count(self, text: str) -> int:
        if text not in self._counts:
            self._counts[text] = self._count_once(text)
        return self._counts[text]

    def prime(self, tests: list[Instance], shots: dict[str, list[Instance]]) -> None:
        """Renders and counts, in one call to the model's tokenizer, each question's prompt as it most often
        ends up (every few-shot example kept): a model in another process then answers one call instead of one
        per prompt. Nothing to do for methods whose prompts are not fitted this way, or without count_tokens_many."""
        many = self.budget.count_tokens_many
        if many is None or not self.method.primed:
            return
        self._primed = {t.instance_id: self._render(t, shots.get(t.subset, [])) for t in tests}
        texts = [*self._primed.values(), *self.method.prime_texts(tests)]
        texts = [text for text in dict.fromkeys(texts) if text not in self._counts]
        self._counts.update(zip(texts, many(texts)))

    def _render(self, instance: Instance, train: list[Instance], passage: str | None = None) -> str:
        s = self.spec
        examples = self.method.examples(train, s)
        # instructions may name the subset, or use what the data says about it (RAFT's per-task instructions)
        named = {"subset": instance.subset.replace("_", " "), "metadata": instance.metadata}
        instructions = render(string_template(s.instructions), named)
        # templates only where they say so (LegalBench's noun per task, WMT14's source language): rendering drops
        # a final line break
        input_prefix, output_prefix = (
            render(string_template(text), named) if "{{" in text else text for text in (s.input_prefix, s.output_prefix)
        )
        variables = {
            "instructions": instructions,
            "instructions_suffix": s.instructions_suffix,
            "input_prefix": input_prefix,
            "input_suffix": s.input_suffix,
            "output_prefix": output_prefix,
            "output_suffix": s.output_suffix,
            "reference_prefix": s.reference_prefix,
            "global_suffix": s.global_suffix,
            "instance_prefix": s.instance_prefix,
            "chain_of_thought_prefix": s.chain_of_thought_prefix,
            "chain_of_thought_suffix": s.chain_of_thought_suffix,
            "train": examples,
            "instance": {"input": instance.input, "choices": choices(instance), "passage": passage},
        }
        # the prompt ends at the output prefix without trailing whitespace, as in HELM; where the instance's own
        # text ends it (HELM's separate layout), that text is kept as it is, trailing whitespace and all
        rendered = render_file(self.templates_dir, s.template_file, variables)
        body = rendered.removesuffix("\n")  # the template file's own final line break
        # HELM rstrips only the output prefix: without one, the prompt ends as the template does (IFEval's "\n")
        ends_as_is = (instance.input and body.endswith(instance.input)) or not output_prefix
        prompt = body if ends_as_is else rendered.rstrip()
        return self.budget.chat_prompt(prompt) if self.budget.chat_prompt else prompt

    def fit(
        self, instance: Instance, train: list[Instance], reserve: int, passage: str | None = None
    ) -> tuple[str, int, bool]:
        """(prompt, in-context examples kept, truncated): drop few-shot examples (last first) until the prompt
        fits beside `reserve` tokens; then truncate it from the left."""
        limit = self.budget.max_context - reserve
        for k in range(len(train), -1, -1):
            primed = self._primed.pop(instance.instance_id, None) if k == len(train) and passage is None else None
            prompt = primed or self._render(instance, train[:k], passage)
            if self.budget.count_tokens(prompt) <= limit:
                return prompt, k, False
        return self.budget.truncate_left(prompt, max(limit, 1)), 0, True

    def requests(self, instance: Instance, train: list[Instance]) -> list[Request]:
        return self.method.requests(self, instance, train)

    def request(
        self,
        instance: Instance,
        kind: str,
        prompt: str,
        continuation: str,
        k: int,
        truncated: bool,
        *,
        max_tokens: int = 0,
        choice: int | None = None,
        null: bool = False,
        sample: int = 0,
    ) -> Request:
        """One request of `instance` (kind "generate" or "score"), identified by records.request_id; `sample`: which
        of the instance's num_outputs generations it is."""
        stop = tuple(self.spec.stop_sequences) if kind == "generate" else ()
        temperature = self.spec.temperature if kind == "generate" else 0.0
        rid = request_id(
            kind=kind,
            prompt=prompt,
            continuation=continuation,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            sample=sample,
        )
        return Request(
            request_id=rid,
            instance_id=instance.instance_id,
            kind=kind,
            prompt=prompt,
            continuation=continuation,
            choice_index=choice,
            is_null_context=null,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            num_train_instances=k,
            truncated=truncated,
            num_prompt_tokens=self.budget.count_tokens(prompt),
        )


def build_requests(
    instances: list[Instance],
    spec: AdapterSpec,
    templates_dir: Path,
    budget: TokenBudget,
    seed: int,
    conventions: str | None = "helm",
) -> list[Request]:
    """Requests for every test instance; few-shot examples come from the train pool of the same subset, drawn as
    `conventions` say (adaptation.examples), and are the same for every instance of that subset (one shared
    prefix)."""
    adapter = Adapter(spec, templates_dir, budget)
    pools: dict[str, list[Instance]] = defaultdict(list)
    for inst in instances:
        if inst.split == "train":
            pools[inst.subset].append(inst)
    k = adapter.method.num_train_draws(spec)
    shots = {subset: select_examples(pool, k, seed, conventions) for subset, pool in pools.items()}
    tests = [inst for inst in instances if inst.split == "test"]
    adapter.prime(tests, shots)
    return [request for inst in tests for request in adapter.requests(inst, shots.get(inst.subset, []))]


def greedy_request(instance_id: str, prompt: str, max_tokens: int, count_tokens: Callable[[str], int]) -> Request:
    """A free-text request outside a scenario's adapter (a judge's question, a logged user message): greedy, no
    stop sequence, identified like every request (records.request_id)."""
    rid = request_id(kind="generate", prompt=prompt, continuation="", max_tokens=max_tokens, temperature=0.0, stop=())
    return Request(rid, instance_id, "generate", prompt, max_tokens=max_tokens, num_prompt_tokens=count_tokens(prompt))
