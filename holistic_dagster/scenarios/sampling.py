"""Seeded draws from a scenario's data: which test instances a suite evaluates (its in-context examples are drawn
by adaptation.examples). Two conventions (adaptation.spec.CONVENTIONS): `helm`, HELM 0.5.16's own draw, reproduced
step for step so that the same seed picks the same instances in the same order as HELM's code; and `legacy`, this
project's draw before suite v5 (scenarios.sample_instances)."""

from __future__ import annotations

import numpy as np


def helm_eval_indices(n: int, k: int, seed: int) -> list[int]:
    """Which of n evaluation instances (in file order) HELM's runner keeps when there are more than k
    (`downsample_eval_instances`: np.random.seed(seed); np.random.choice(instances, k, replace=False)), in its
    draw order; all of them, in order, when there are at most k. The legacy RandomState is NumPy's global
    generator, so the same seed gives the same indices without touching global state."""
    if n <= k:
        return list(range(n))
    return [int(i) for i in np.random.RandomState(seed).choice(n, k, replace=False)]
