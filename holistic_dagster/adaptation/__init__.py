"""Adaptation: turning instances into model requests, as HELM defines its adapter methods.

- generation: the model continues the prompt; its text is the prediction.
- multiple_choice_joint: all choices are listed with letters; the model generates the letter.
- multiple_choice_separate_original: each choice is scored separately as a continuation of the prompt;
  the choice with the highest total log-probability wins.
- multiple_choice_separate_calibrated: as original, but each choice's log-probability is divided by
  its probability after the null prompt "Answer:" (log p(c | prompt) - log p(c | "Answer:")).
- ranking_binary: one generation per candidate passage of a query, asking whether the passage answers it;
  the candidates are then ordered by the answers ("Yes" by its probability first). In-context examples are a
  relevant and an irrelevant passage of each held-out query, answered "Yes" and "No".
- language_modeling: the instance's input (the document) alone, no template and no examples, scored in
  windows that fit the context (see document_windows); the metrics are its log-likelihood per byte and per
  token (metrics.language_modeling).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from holistic_dagster.catalog import AdapterSpec
from holistic_dagster.hashing import request_id
from holistic_dagster.records import Instance, Request
from holistic_dagster.scenarios.loaders import CHOICE_LABELS
from holistic_dagster.scenarios.sampling import select_examples
from holistic_dagster.templating import render, render_file, string_template

NULL_PROMPT = "Answer:"  # HELM's calibration context for multiple_choice_separate_calibrated
# HELM's get_multiple_choice_separate_adapter_spec: our continuation " <choice>" supplies its output_prefix " "
HELM_SEPARATE_LAYOUT = {
    "instructions": "",
    "input_prefix": "",
    "input_suffix": "",
    "output_prefix": "",
    "output_suffix": "",
    "max_train_instances": 0,
}


def adapter_as_asked(adapter: AdapterSpec, method: str, conventions: str | None) -> AdapterSpec:
    """The adapter a model is asked with under `method` (the scenario's, or the suite's fallback when the model
    cannot give prompt log-probabilities): under conventions helm, separate multiple choice takes HELM's separate
    layout, while a fallback to joint keeps the scenario's instructions and prefixes."""
    adapter = adapter.model_copy(update={"method": method})
    if conventions == "helm" and method.startswith("multiple_choice_separate"):
        adapter = adapter.model_copy(update=HELM_SEPARATE_LAYOUT)
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


_WORD_ENDS = re.compile(r"\S(?=\s)")  # a non-space character followed by whitespace


def document_windows(text: str, budget: TokenBudget) -> list[tuple[str, str]]:
    """(prompt, continuation) per window of a document scored for language modeling; the continuations are
    consecutive pieces of the text that together are the text, exactly once.

    As HELM's LanguageModelingAdapter: every window scores at most max_context - 1 new tokens (one position is
    left for context); the first window is scored after the model's start token (an empty prompt: the client puts
    its BOS token there, or end-of-text where there is no BOS, as HELM's prefix token), each later one after as
    much of the preceding text as fits beside it (HELM's conditioning tokens: one token behind a full window,
    more behind a short last one). Unlike HELM, which cuts the token sequence itself, the budget here only
    counts tokens and keeps a text's last n: a window ends where a run of whitespace starts (the whitespace opens
    the next window, so a byte-level BPE tokenizes the windows as it tokenizes the whole text), the longest such
    piece whose tokens fit, found by bisection; a single word longer than a window is cut between characters.
    A window may therefore hold a few tokens fewer than HELM's."""
    limit = max(budget.max_context - 1, 1)
    windows: list[tuple[str, str]] = []
    start = 0
    while start < len(text) or not windows:
        end = _window_end(text, start, limit, budget.count_tokens)
        continuation = text[start:end]
        prompt = "" if start == 0 else _context(text[:start], continuation, budget)
        windows.append((prompt, continuation))
        start = end
    return windows


def _window_end(text: str, start: int, limit: int, count: Callable[[str], int]) -> int:
    """The end of the longest piece of text[start:] that ends before whitespace (or at the end) and has at most
    `limit` tokens; a piece of one word cut between characters when even that word does not fit."""
    span = 4 * limit  # characters: grown until the piece no longer fits, so that no step tokenizes the whole rest
    while start + span < len(text) and count(text[start : start + span]) <= limit:
        span *= 2
    if start + span >= len(text) and count(text[start:]) <= limit:
        return len(text)
    stop = min(start + span, len(text))
    ends = [m.end() for m in _WORD_ENDS.finditer(text, start, stop) if m.end() > start]
    fits = _last_fitting(ends, lambda e: count(text[start:e]) <= limit)
    if fits is not None:
        return fits
    # no word boundary fits: cut the first word between characters (at least one character, always progress)
    first_word = ends[0] if ends else stop
    return _last_fitting(list(range(start + 2, first_word)), lambda e: count(text[start:e]) <= limit) or start + 1


def _last_fitting(ends: list[int], fits: Callable[[int], bool]) -> int | None:
    """The last of the ascending ends that fits (token counts grow with the piece), by bisection; None: none."""
    lo, hi, best = 0, len(ends) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(ends[mid]):
            best, lo = ends[mid], mid + 1
        else:
            hi = mid - 1
    return best


def _context(preceding: str, continuation: str, budget: TokenBudget) -> str:
    """As much of the end of the preceding text as fits in the window beside the continuation (a token cut
    through a character leaves U+FFFD at the start: stripped, as HELM does); re-counted, since a decoded text
    may tokenize longer, until prompt and continuation fit together."""
    room = budget.max_context - budget.count_tokens(continuation)
    tail = 4 * room  # characters: only the end of a long document is tokenized, grown until it holds `room` tokens
    while tail < len(preceding) and budget.count_tokens(preceding[-tail:]) <= room:
        tail *= 2
    preceding = preceding[-tail:]
    while room > 0:
        prompt = budget.truncate_left(preceding, room).lstrip("\ufffd")
        over = budget.count_tokens(prompt) + budget.count_tokens(continuation) - budget.max_context
        if over <= 0:
            return prompt
        room -= over
    return ""


def _label(inst: Instance) -> str:
    return inst.correct_references[0].output if inst.correct_references else ""


def _choices(inst: Instance) -> list[dict[str, str]]:
    return [{"label": CHOICE_LABELS[i], "text": r.output} for i, r in enumerate(inst.references)]


def _correct_index(inst: Instance) -> int:
    return next(i for i, r in enumerate(inst.references) if r.correct)


RANKING_YES, RANKING_NO = "Yes", "No"  # HELM's BinaryRankingAdapter labels


def _ranking_examples(inst: Instance) -> list[dict[str, Any]]:
    """A held-out query's relevant candidate (first-stage order) answered Yes, then an irrelevant one answered No."""
    relevant = [r.output for r in inst.references if r.correct][:1]
    irrelevant = [r.output for r in inst.references if not r.correct][:1]
    return [{"input": inst.input, "passage": p, "output": RANKING_YES} for p in relevant] + [
        {"input": inst.input, "passage": p, "output": RANKING_NO} for p in irrelevant
    ]


def _example(inst: Instance, method: str) -> dict[str, Any]:
    if method == "multiple_choice_joint":
        output = CHOICE_LABELS[_correct_index(inst)]
    else:
        output = _label(inst)
    return {"input": inst.input, "choices": _choices(inst), "output": output}


class Adapter:
    """Renders prompts for one scenario with the sandboxed template and builds the requests."""

    def __init__(self, spec: AdapterSpec, templates_dir: Path, budget: TokenBudget):
        self.spec, self.templates_dir = spec, templates_dir
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
        if many is None or self.spec.method in ("language_modeling", "ranking_binary"):
            return
        self._primed = {t.instance_id: self._render(t, shots.get(t.subset, [])) for t in tests}
        texts = list(self._primed.values())
        if self.spec.method.startswith("multiple_choice_separate"):  # each choice's length is counted too
            texts += [" " + r.output for t in tests for r in t.references]
        texts = [text for text in dict.fromkeys(texts) if text not in self._counts]
        self._counts.update(zip(texts, many(texts)))

    def _render(self, instance: Instance, train: list[Instance], passage: str | None = None) -> str:
        s = self.spec
        if s.method == "ranking_binary":
            examples = [e for t in train for e in _ranking_examples(t)][: s.max_train_instances]
        else:
            examples = [_example(t, s.method) for t in train]
        # instructions may name the subset, or use what the data says about it (RAFT's per-task instructions)
        named = {"subset": instance.subset.replace("_", " "), "metadata": instance.metadata}
        instructions = render(string_template(s.instructions), named)
        variables = {
            "instructions": instructions,
            "input_prefix": s.input_prefix,
            "input_suffix": s.input_suffix,
            "output_prefix": s.output_prefix,
            "output_suffix": s.output_suffix,
            "train": examples,
            "instance": {"input": instance.input, "choices": _choices(instance), "passage": passage},
        }
        # the prompt ends at the output prefix without trailing whitespace, as in HELM; where the instance's own
        # text ends it (HELM's separate layout), that text is kept as it is, trailing whitespace and all
        rendered = render_file(self.templates_dir, s.template_file, variables)
        body = rendered.removesuffix("\n")  # the template file's own final line break
        prompt = body if instance.input and body.endswith(instance.input) else rendered.rstrip()
        return self.budget.chat_prompt(prompt) if self.budget.chat_prompt else prompt

    def _fit(
        self, instance: Instance, train: list[Instance], reserve: int, passage: str | None = None
    ) -> tuple[str, int, bool]:
        """Drop few-shot examples (last first) until the prompt fits; then truncate it from the left."""
        limit = self.budget.max_context - reserve
        for k in range(len(train), -1, -1):
            primed = self._primed.pop(instance.instance_id, None) if k == len(train) and passage is None else None
            prompt = primed or self._render(instance, train[:k], passage)
            if self.budget.count_tokens(prompt) <= limit:
                return prompt, k, False
        return self.budget.truncate_left(prompt, max(limit, 1)), 0, True

    def requests(self, instance: Instance, train: list[Instance]) -> list[Request]:
        s = self.spec
        if s.method == "language_modeling":  # the document itself, window by window: no template, no examples
            return [
                self._request(instance, "score", prompt, continuation, 0, False)
                for prompt, continuation in document_windows(instance.input, self.budget)
            ]
        if s.method == "ranking_binary":  # one question per candidate passage
            out = []
            for i, candidate in enumerate(instance.references):
                prompt, k, truncated = self._fit(instance, train, reserve=s.max_tokens, passage=candidate.output)
                examples = len([e for t in train[:k] for e in _ranking_examples(t)][: s.max_train_instances])
                out.append(
                    self._request(
                        instance, "generate", prompt, "", examples, truncated, max_tokens=s.max_tokens, choice=i
                    )
                )
            return out
        if s.method in ("generation", "multiple_choice_joint"):
            max_tokens = 1 if s.method == "multiple_choice_joint" else s.max_tokens
            prompt, k, truncated = self._fit(instance, train, reserve=max_tokens)
            return [self._request(instance, "generate", prompt, "", k, truncated, max_tokens=max_tokens)]
        # separate methods: one scoring request per choice (plus the null-context ones when calibrated)
        longest = max(self.budget.count_tokens(" " + r.output) for r in instance.references)
        prompt, k, truncated = self._fit(instance, train, reserve=longest)
        out = [
            self._request(instance, "score", prompt, " " + r.output, k, truncated, choice=i)
            for i, r in enumerate(instance.references)
        ]
        if s.method == "multiple_choice_separate_calibrated":
            out += [
                self._request(instance, "score", NULL_PROMPT, " " + r.output, 0, False, choice=i, null=True)
                for i, r in enumerate(instance.references)
            ]
        return out

    def _request(
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
    ) -> Request:
        stop = tuple(self.spec.stop_sequences) if kind == "generate" else ()
        temperature = self.spec.temperature if kind == "generate" else 0.0
        rid = request_id(
            kind=kind,
            prompt=prompt,
            continuation=continuation,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
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
    `conventions` say (scenarios.sampling), and are the same for every instance of that subset (one shared
    prefix)."""
    adapter = Adapter(spec, templates_dir, budget)
    pools: dict[str, list[Instance]] = defaultdict(list)
    for inst in instances:
        if inst.split == "train":
            pools[inst.subset].append(inst)
    # ranking: each held-out query gives two examples (a relevant and an irrelevant passage), as in HELM
    k = -(-spec.max_train_instances // 2) if spec.method == "ranking_binary" else spec.max_train_instances
    shots = {subset: select_examples(pool, k, seed, conventions) for subset, pool in pools.items()}
    tests = [inst for inst in instances if inst.split == "test"]
    adapter.prime(tests, shots)
    return [request for inst in tests for request in adapter.requests(inst, shots.get(inst.subset, []))]


def greedy_request(instance_id: str, prompt: str, max_tokens: int, count_tokens: Callable[[str], int]) -> Request:
    """A free-text request outside a scenario's adapter (a judge's question, a logged user message): greedy, no
    stop sequence, identified like every request (hashing.request_id)."""
    rid = request_id(kind="generate", prompt=prompt, continuation="", max_tokens=max_tokens, temperature=0.0, stop=())
    return Request(rid, instance_id, "generate", prompt, max_tokens=max_tokens, num_prompt_tokens=count_tokens(prompt))
