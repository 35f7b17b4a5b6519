"""The greedy loop's top k (clients/top_k.py) is torch.topk's, values and indices, on rows without ties, with ties
(where it hands the row to torch.topk itself), with NaN and with a width that is not a whole number of chunks; its
log-probabilities taken a block of rows at a time (the top k, or a picked token's) are the whole tensor's, bit for
bit."""

from __future__ import annotations

import pytest
import torch

from holistic_dagster.clients.top_k import (
    CHUNK,
    LOG_SOFTMAX_BYTES,
    picked_log_probabilities,
    top_k,
    top_log_probabilities,
)


@pytest.mark.parametrize("seed", range(20))
def test_top_k_is_torch_topk(seed):
    g = torch.Generator().manual_seed(seed)
    cases = [
        torch.randn(16, 49152, generator=g).log_softmax(-1),  # a vocabulary's log-probabilities
        torch.randn(3, 50257, generator=g),  # a width that leaves a partial chunk
        torch.randint(0, 40, (8, 5000), generator=g).float(),  # ties everywhere: torch.topk decides them
    ]
    for values in cases:
        want, got = values.topk(5, dim=-1), top_k(values, 5)
        assert torch.equal(want.values, got[0]) and torch.equal(want.indices, got[1])


def test_a_tie_outside_the_chunks_searched_and_nan_go_to_torch_topk():
    values = torch.full((2, 8 * CHUNK * 6), -10.0)
    values[:, 3] = 1.0
    values[:, [CHUNK * 7 + 1, CHUNK * 30 + 5]] = 0.5  # equal, in two chunks
    values[1, 9] = float("nan")
    want, got = values.topk(2, dim=-1), top_k(values, 2)
    assert torch.equal(want.indices, got[1]) and torch.equal(want.values.nan_to_num(), got[0].nan_to_num())


PER_BLOCK = LOG_SOFTMAX_BYTES // (49152 * 4)  # rows of a 49,152-token vocabulary's float32 log-probabilities


@pytest.mark.parametrize(("rows", "width"), [(1, 49152), (PER_BLOCK, 49152), (PER_BLOCK + 1, 49152),
                                             (5 * PER_BLOCK - 3, 49152), (7, 262144)])  # fmt: skip
def test_top_log_probabilities_by_blocks_are_the_whole_tensors(rows, width):
    g = torch.Generator().manual_seed(rows)
    logits = torch.randn(rows, width, generator=g) * 4
    logits[0, :7] = logits[0].max()  # ties at the top of one row: torch.topk decides its block
    want = logits.log_softmax(-1).topk(5, dim=-1)
    values, indices = top_log_probabilities(logits, 5)
    assert torch.equal(want.values, values) and torch.equal(want.indices, indices)


@pytest.mark.parametrize("rows", [0, 3, PER_BLOCK, 7 * PER_BLOCK + 5])
def test_picked_log_probabilities_by_blocks_are_the_whole_tensors(rows):
    g = torch.Generator().manual_seed(100 + rows)
    logits = torch.randn(rows, 49152, generator=g) * 4
    picked = torch.randint(0, 49152, (rows,), generator=g)
    want = logits.log_softmax(-1).gather(1, picked[:, None])[:, 0]
    assert torch.equal(want, picked_log_probabilities(logits, picked))
