"""ranking_binary (HELM's BinaryRankingAdapter): one generation per candidate passage of a query, asking whether
the passage answers it; the candidates are then ordered by the answers ("Yes" by its probability first). The
in-context examples are a relevant and an irrelevant passage of each held-out query, answered "Yes" and "No"."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from holistic_dagster.adaptation.methods.base import AdapterMethod, Prediction
from holistic_dagster.records import Completion, Instance, Request

if TYPE_CHECKING:
    from holistic_dagster.adaptation.adapter import Adapter
    from holistic_dagster.adaptation.spec import AdapterSpec

METHOD = "ranking_binary"
RANKING_YES, RANKING_NO = "Yes", "No"  # HELM's BinaryRankingAdapter labels
CORRECT_OUTPUT = "yes"  # HELM's BinaryRankingAdapter.RANKING_CORRECT_LABEL, standardized
WRONG_OUTPUT = "no"  # RANKING_WRONG_LABEL, standardized


class RankingBinary(AdapterMethod):
    name = METHOD
    template = "ranking_binary.j2"
    # a query's candidates may hold no relevant passage (the first stage missed them all: its RR and NDCG are 0)
    needs_references = False
    primed = False  # each candidate's prompt is fitted on its own

    def num_train_draws(self, spec: AdapterSpec) -> int:
        return -(-spec.max_train_instances // 2)  # each held-out query gives two examples, as in HELM

    def examples(self, train: Sequence[Instance], spec: AdapterSpec) -> list[dict[str, Any]]:
        return [e for t in train for e in _ranking_examples(t)][: spec.max_train_instances]

    def requests(self, adapter: Adapter, instance: Instance, train: list[Instance]) -> list[Request]:
        s, out = adapter.spec, []
        for i, candidate in enumerate(instance.references):  # one question per candidate passage
            prompt, k, truncated = adapter.fit(instance, train, reserve=s.max_tokens, passage=candidate.output)
            examples = len(self.examples(train[:k], s))
            out.append(
                adapter.request(
                    instance, "generate", prompt, "", examples, truncated, max_tokens=s.max_tokens, choice=i
                )
            )
        return out

    def predict(
        self, instance: Instance, requests: Sequence[Request], completions: Mapping[str, Completion]
    ) -> Prediction:
        # the top-ranked candidate (HELM's order: "Yes" by confidence, then the rest)
        best = model_order(requests, completions)[0]
        carrier = next(r for r in requests if r.choice_index == best)
        return candidate_name(instance, best), math.exp(completions[carrier.request_id].logprob), carrier


def _ranking_examples(inst: Instance) -> list[dict[str, Any]]:
    """A held-out query's relevant candidate (first-stage order) answered Yes, then an irrelevant one answered No."""
    relevant = [r.output for r in inst.references if r.correct][:1]
    irrelevant = [r.output for r in inst.references if not r.correct][:1]
    return [{"input": inst.input, "passage": p, "output": RANKING_YES} for p in relevant] + [
        {"input": inst.input, "passage": p, "output": RANKING_NO} for p in irrelevant
    ]


def binary_ranking_key(text: str, logprob: float) -> tuple[int, float]:
    """HELM's sort key for one candidate's answer (sorted descending, best first): (2, logprob) when the
    stripped, lower-cased answer is "yes" (the most probable Yes first), (1, -logprob) when it is "no" (the
    least probable No first: the model was least sure the passage does not answer), (0, -logprob) for any other
    answer. `logprob` is the sum of the generated tokens' log-probabilities."""
    answer = text.strip().lower()
    if answer == CORRECT_OUTPUT:
        return 2, logprob
    if answer == WRONG_OUTPUT:
        return 1, -logprob
    return 0, -logprob


def model_order(requests: Iterable[Request], completions: Mapping[str, Completion]) -> list[int]:
    """The reference indices (`choice_index`) of a query's candidates, best first: descending
    `binary_ranking_key` of each candidate's completion, a failed completion (`error` set) after every answered
    one, ties broken by the lower reference index (deterministic; as HELM's stable sort of the candidates in
    reference order)."""
    keyed = {}
    for r in requests:
        if r.choice_index is None or r.is_null_context:
            continue
        if r.choice_index in keyed:
            raise ValueError(f"instance {r.instance_id}: two requests for candidate {r.choice_index}")
        c = completions[r.request_id]
        failed = bool(c.error)
        label, score = (0, 0.0) if failed else binary_ranking_key(c.text, c.logprob)
        keyed[r.choice_index] = (failed, -label, -score, r.choice_index)
    return sorted(keyed, key=keyed.__getitem__)


def candidate_name(instance: Instance, index: int) -> str:
    """A short name for a candidate: its docid where the instance has metadata["docids"], else its index."""
    docids = instance.metadata.get("docids")
    if docids is not None and index < len(docids):
        return f"docid {docids[index]}"
    return f"reference {index}"
