"""Language modeling (HELM's `language_modeling` adapter and its metrics): how probable the model finds a
document, for any scenario's input text (IMDB reviews, XSum articles) pinned to `method: language_modeling`.

The adapter method (holistic_dagster.adaptation.methods.language_modeling) scores each document in windows that fit the
context; every window is a "score" request whose continuation is its new text. Per document (one row each,
means over documents as scenario values, bootstrap CIs):
- logprob: the document's total log-probability (natural log), summed over its windows;
- num_perplexity_tokens: the tokens scored (the continuations' tokens, as the backend counted them);
- num_bytes: the document's UTF-8 bytes (the windows' continuations cover it exactly once).
For the scenario, as HELM's `compute_perplexity_metrics`, ratios over the sums across every document (a long
document weighs more than a short one; not a mean of per-document ratios):
- perplexity = exp(-sum logprob / sum num_perplexity_tokens);
- bits_per_byte = -sum logprob / (sum num_bytes * ln 2) (the main metric of such a pin; lower is better);
- logprob_per_byte = sum logprob / sum num_bytes.
Differences from HELM: HELM keeps one stat row per window (its logprob, num_perplexity_tokens and num_bytes
means are per window); here they are per document (the sums, hence the ratios, are the same). HELM counts a
window's bytes from its scored tokens; here from the window's text (the same text, without the undecodable
partial-byte tokens HELM strips). The ratios have no CI: a bootstrap of a ratio of sums is not a mean of rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from holistic_dagster.adaptation.methods.language_modeling import METHOD, METRIC_NAMES, PER_DOCUMENT
from holistic_dagster.metrics.registry import declare, scorer
from holistic_dagster.records import Completion, InstanceScore, Request, ScenarioMetric

if TYPE_CHECKING:
    from holistic_dagster.metrics.scoring import ScoringInput

RATIO = "no bootstrap: a ratio of sums over every document (HELM), not a mean of per-instance rows"
NOTHING_SCORED = "undefined: no token (or no byte) was scored"

declare("bits_per_byte", "accuracy", "bits per byte of the documents under the model: -sum logprob / (sum bytes * "
        "ln 2)", lower_is_better=True, bounds=(0.0, math.inf), ci="none", no_ci=RATIO)  # fmt: skip
declare("logprob_per_byte", "accuracy", "log-probability (natural log) per byte of the documents: sum logprob / "
        "sum bytes", bounds=(-math.inf, 0.0), ci="none", no_ci=RATIO)  # fmt: skip
declare("perplexity", "accuracy", "exp(-sum logprob / sum tokens): the effective branching factor per token",
        lower_is_better=True, bounds=(1.0, math.inf), ci="none", no_ci=RATIO)  # fmt: skip
declare("logprob", "accuracy", "the document's total log-probability (natural log) under the model",
        bounds=(-math.inf, 0.0), per_instance=True, mean_of_instances=True)  # fmt: skip
declare("num_perplexity_tokens", "accuracy", "tokens of the document scored (descriptive)", bounds=(0.0, math.inf),
        per_instance=True, mean_of_instances=True)  # fmt: skip
declare("num_bytes", "accuracy", "UTF-8 bytes of the document (descriptive)", bounds=(0.0, math.inf),
        per_instance=True, mean_of_instances=True)  # fmt: skip


def document_stats(requests: Sequence[Request], completions: Mapping[str, Completion]) -> tuple[float, int, int]:
    """(logprob, num_perplexity_tokens, num_bytes) of one document from its windows' score requests."""
    logprob = sum(completions[r.request_id].logprob for r in requests)
    tokens = sum(len(completions[r.request_id].logprobs) for r in requests)
    num_bytes = sum(len(r.continuation.encode("utf-8")) for r in requests)
    return logprob, tokens, num_bytes


def perplexity_metrics(logprob: float, tokens: int, num_bytes: int) -> dict[str, float | None]:
    """HELM's compute_perplexity_metrics over sums (None where a denominator is 0, as HELM then reports none)."""
    return {
        "bits_per_byte": -logprob / num_bytes / math.log(2) if num_bytes else None,
        "logprob_per_byte": logprob / num_bytes if num_bytes else None,
        "perplexity": math.exp(-logprob / tokens) if tokens else None,
    }


@scorer("language_modeling", "accuracy", METRIC_NAMES, methods=(METHOD,))
def language_modeling(given: ScoringInput) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    """Per document its logprob, tokens and bytes; for the scenario the ratios over their sums."""
    rows: list[InstanceScore] = []
    totals = [0.0, 0, 0]
    for p in given.predictions:
        stats = document_stats(p.requests, given.completions)
        for name, value in zip(PER_DOCUMENT, stats):
            rows.append(InstanceScore(p.instance.instance_id, name, "accuracy", float(value), p.carrier.request_id))
        totals = [t + s for t, s in zip(totals, stats)]
    n = len(given.predictions)
    out = [
        ScenarioMetric(name, "accuracy", value, n, note="" if value is not None else NOTHING_SCORED)
        for name, value in perplexity_metrics(*totals).items()
    ]
    return rows, out
