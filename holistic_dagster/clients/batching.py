"""How a local model's requests are batched: rows grouped so that a shared prefix (a few-shot block) runs once and
its key/value cache is reused, and batches sized so that padded tokens stay bounded."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator


def repeated(cache, n: int):
    """A copy of a one-row key/value cache for a batch of n rows (the original stays for the next batch)."""
    cache = copy.deepcopy(cache)
    cache.batch_repeat_interleave(n)
    return cache


MIN_SHARED_PREFIX = 32  # tokens; below this a prefix pass costs more than it saves


# a batch's rows x its longest row's tokens: long prompts (a review, an article) run in smaller batches, so a
# batch of short prompts is not padded to one long one and memory stays bounded
PADDED_TOKENS_PER_BATCH = 4096


def padded_batches(order: list[int], length: Callable[[int], int], batch_size: int) -> Iterator[list[int]]:
    """Consecutive chunks of `order` (longest first) of at most `batch_size` rows whose padded size (rows x the
    chunk's first, longest, row) stays within PADDED_TOKENS_PER_BATCH; a row longer than that runs alone."""
    start = 0
    while start < len(order):
        rows = max(1, min(batch_size, PADDED_TOKENS_PER_BATCH // max(length(order[start]), 1)))
        yield order[start : start + rows]
        start += rows


def clusters_by_prefix(groups: list[list[int]], encoded, min_members: int = 2) -> list[tuple[list[list[int]], int]]:
    """Groups (each: requests sharing one context) clustered by a common token prefix of their contexts, with
    that prefix's length (0: no worthwhile prefix, or fewer than `min_members` groups share it). Sorting the
    contexts puts those sharing a prefix side by side; the prefix always leaves at least one token of every
    context to run."""

    def context(group: list[int]) -> list[int]:
        ids, n_cont = encoded[group[0]]
        return ids[: len(ids) - n_cont]

    clusters: list[tuple[list[list[int]], int]] = []
    for group in sorted(groups, key=context):
        ctx = context(group)
        if clusters:
            members, prefix_len = clusters[-1]
            first = context(members[0])
            common = 0
            limit = min(len(first), len(ctx)) - 1
            while common < limit and first[common] == ctx[common]:
                common += 1
            shared = min(common, prefix_len) if len(members) > 1 else common
            if shared >= MIN_SHARED_PREFIX:
                clusters[-1] = (members + [group], shared)
                continue
        clusters.append(([group], len(ctx) - 1))
    return [(members, prefix_len if len(members) >= min_members else 0) for members, prefix_len in clusters]
