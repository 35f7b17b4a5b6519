"""How a local model's requests are batched: rows grouped so that a shared prefix (a few-shot block) runs once and
its key/value cache is reused, batches bounded by rows and by padded tokens, and key/value caches shared between
batches without copying what stays the same."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

MIN_SHARED_PREFIX = 32  # tokens; below this a prefix pass costs more than it saves
# clusters a generation plan weighs one by one, largest saving first (each weighing batches the rest again: clusters x
# prompts); a suite's few-shot blocks are far fewer, and beyond these (thousands of perturbed copies, each sharing a
# question with its original) prompts run unshared
WEIGHED_CLUSTERS = 256


@dataclass(frozen=True)
class BatchLimits:
    """How much one forward pass may hold: `rows` sequences, and `tokens` padded tokens held (rows x the widest row's
    tokens, those of the key/value cache it continues included: what the pass keeps in memory). Long prompts (a
    review, an article) then run in smaller batches, so a batch of short prompts is not padded to one long one, and
    memory stays bounded. `attention` (None: no bound) bounds the attention scores a padded pass computes per head
    and layer (rows x its queries x its keys): on a CPU a padded batch of long prompts costs more than its rows one
    at a time (the attention mask takes the kernels off their fast path, and the scores grow with the square of
    the width), where a batch of short ones costs less."""

    rows: int
    tokens: int
    attention: int | None = None

    def halved(self) -> BatchLimits | None:
        """Half of each (what a device that ran out of memory tries next); None at one row, which runs whatever
        the token budget says (a row that does not fit alone cannot be helped by smaller batches)."""
        if self.rows <= 1:
            return None
        attention = None if self.attention is None else max(1, self.attention // 2)
        return BatchLimits(max(1, self.rows // 2), max(1, self.tokens // 2), attention)


def padded_batches(
    order: Sequence[int], width: Callable[[int], int], limits: BatchLimits, queries: Callable[[int], int] | None = None
) -> Iterator[list[int]]:
    """Consecutive chunks of `order` (longest first) of at most `limits.rows` rows whose padded size (rows x the
    chunk's first, widest, row) stays within `limits.tokens`, and, where the limits bound attention and `queries`
    says how many of a row's tokens the pass computes (the rest continue a cache), whose rows x queries x width
    stays within `limits.attention`; a row wider than that runs alone."""
    start = 0
    while start < len(order):
        rows = batch_rows(order[start], width, limits, queries)
        yield list(order[start : start + rows])
        start += rows


def batch_rows(
    first: int, width: Callable[[int], int], limits: BatchLimits, queries: Callable[[int], int] | None
) -> int:
    """The most rows padded_batches puts in a batch whose first (widest) row is `first`."""
    widest = max(width(first), 1)
    rows = min(limits.rows, limits.tokens // widest)
    if limits.attention is not None and queries is not None:
        rows = min(rows, limits.attention // (widest * max(queries(first), 1)))
    return max(1, rows)


def cut_where_padding_costs_more(
    order: Sequence[int], lengths: Callable[[int], int], steps: int, limits: BatchLimits, batch_cost: int
) -> list[list[int]]:
    """`order` (prompts longest first, to answer in up to `steps` tokens) cut into runs, each of which padded_batches
    runs as one batch, at the cuts that compute least: a batch costs its rows x its widest prompt's tokens (the
    padding of the shorter ones too) plus `batch_cost` (its decoding steps), so a long prompt is not followed by short
    ones padded to it where a batch of their own costs less than their padding (dynamic programming over the cuts:
    rows x candidates)."""
    n = len(order)
    width = lambda i: lengths(i) + steps  # noqa: E731 (what padded_batches holds: the prompt and the answer)
    best, cut = [0.0] * (n + 1), [n] * (n + 1)  # from each start: the least cost of the rest, and where to cut
    for start in range(n - 1, -1, -1):
        widest = lengths(order[start])
        most = batch_rows(order[start], width, limits, lengths)
        best[start] = float("inf")
        for end in range(min(n, start + most), start, -1):  # of equal costs, the fullest batch first
            cost = (end - start) * widest + batch_cost + best[end]
            if cost < best[start]:
                best[start], cut[start] = cost, end
    runs, start = [], 0
    while start < n:
        runs.append(list(order[start : cut[start]]))
        start = cut[start]
    return runs


def clusters_by_prefix(contexts: Sequence[Sequence[int]], min_members: int = 2) -> list[tuple[list[int], int]]:
    """The indices of `contexts` (token sequences) clustered by a common token prefix, with that prefix's length
    (0: no worthwhile prefix, or fewer than `min_members` contexts share it). Sorting the contexts puts those sharing
    a prefix side by side; the prefix always leaves at least one token of every context to run."""
    clusters: list[tuple[list[int], int]] = []
    for index in sorted(range(len(contexts)), key=lambda i: contexts[i]):
        ctx = contexts[index]
        if clusters:
            members, prefix_len = clusters[-1]
            first = contexts[members[0]]
            common = 0
            limit = min(len(first), len(ctx)) - 1
            while common < limit and first[common] == ctx[common]:
                common += 1
            shared = min(common, prefix_len) if len(members) > 1 else common
            if shared >= MIN_SHARED_PREFIX:
                clusters[-1] = (members + [index], shared)
                continue
        clusters.append(([index], len(ctx) - 1))
    return [(members, prefix_len if len(members) >= min_members else 0) for members, prefix_len in clusters]


def prefix_groups(contexts: Sequence[Sequence[int]], min_members: int) -> list[tuple[list[int], int]]:
    """The indices of `contexts` in the groups a model runs them in: each cluster of at least `min_members` contexts
    that share a worthwhile prefix (with its length: the prefix runs once), then every other context together
    (prefix 0), so that contexts without a shared prefix still fill whole batches."""
    clusters = clusters_by_prefix(contexts, min_members)
    rest = [i for members, prefix_len in clusters if not prefix_len for i in members]
    return [(members, prefix_len) for members, prefix_len in clusters if prefix_len] + ([(rest, 0)] if rest else [])


def _with_layers(cache, change: Callable) -> object:
    """A new cache object whose layers are shallow copies changed by `change` (which replaces their tensors): the
    original keeps its own tensors, so it can serve the next batch."""
    new = copy.copy(cache)
    new.layers = [copy.copy(layer) for layer in cache.layers]
    change(new)
    return new


def expanded(cache, n: int):
    """A one-row key/value cache as n rows, without copying it: the rows are views of the one (the model's next
    forward concatenates new keys and values onto them, which makes the batch's own copy once)."""

    def expand(new) -> None:
        for layer in new.layers:
            if getattr(layer, "keys", None) is not None and layer.keys.numel():
                layer.keys = layer.keys.expand(n, *layer.keys.shape[1:])
                layer.values = layer.values.expand(n, *layer.values.shape[1:])

    return _with_layers(cache, expand)


def gathered(cache, index):
    """A key/value cache whose rows are the given rows of `cache` (a row may be taken several times: the choices of
    one question each continue its context); `cache` itself is left as it was."""
    return _with_layers(cache, lambda new: new.reorder_cache(index))


def generation_prefix_groups(
    contexts: Sequence[Sequence[int]],
    steps: int,
    limits: BatchLimits,
    step_tokens: int,
    decode_steps: int | None = None,
) -> list[tuple[list[int], int]]:
    """prefix_groups for greedy generation of up to `steps` tokens on a device that computes in step with the work (a
    CPU), by what each plan computes: every batch padded_batches makes costs its rows x its widest row's computed tokens
    (padding is computed too), and `decode_steps` (default `steps`: answers that end sooner decode fewer; a batch holds
    room for `steps`) decoding steps of `step_tokens` prompt tokens each. Every prompt starts unshared, in one
    length-sorted run; then, largest prefix saving first, a cluster is taken out to run its prefix once (one pass, which
    costs a step like any other) where that plan costs less: it saves the prefix's tokens, and the padding its rows cost
    among wider ones, and adds batches of its own. Long prompts, which the attention bound runs a few at a time whatever
    their company, add no batch: their clusters share; many small clusters of short prompts stay together (the
    WEIGHED_CLUSTERS largest savings are weighed). What is left unshared is cut into batches where padding would cost
    more than the batch's decoding (cut_where_padding_costs_more), for answers of more than one token."""

    decode = decode_steps or steps

    def cost(rows: list[int], prefix: int) -> int:  # rows longest first
        batches = padded_batches(rows, lambda i: len(contexts[i]) + steps, limits, lambda i: len(contexts[i]) - prefix)
        return sum(len(b) * (len(contexts[b[0]]) - prefix) + step_tokens * decode for b in batches)

    longest_first = lambda rows: sorted(rows, key=lambda i: -len(contexts[i]))  # noqa: E731 (stable: ties in order)
    clusters = sorted((c for c in clusters_by_prefix(contexts, 2) if c[1]), key=lambda c: -(len(c[0]) - 1) * c[1])
    rest = longest_first(range(len(contexts)))
    shared, rest_cost = [], cost(rest, 0)
    for members, prefix_len in clusters[:WEIGHED_CLUSTERS]:
        taken = set(members)
        without = [i for i in rest if i not in taken]
        left = cost(without, 0)
        if left + prefix_len + step_tokens + cost(longest_first(members), prefix_len) < rest_cost:  # its pass too
            shared.append((members, prefix_len))
            rest, rest_cost = without, left
    if steps <= 1:  # one pass per batch, whose fixed cost on a small model is more than the plan counts: full batches
        return shared + ([(rest, 0)] if rest else [])
    runs = cut_where_padding_costs_more(rest, lambda i: len(contexts[i]), steps, limits, step_tokens * decode)
    return shared + [(run, 0) for run in runs]
