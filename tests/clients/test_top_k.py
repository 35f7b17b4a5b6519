"""The greedy loop's top k (clients/top_k.py) is torch.topk's, values and indices, on rows without ties, with ties
(where it hands the row to torch.topk itself), with NaN and with a width that is not a whole number of chunks."""

from __future__ import annotations

import pytest
import torch

from holistic_dagster.clients.top_k import CHUNK, top_k


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
