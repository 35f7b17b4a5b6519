"""The two-parameter logistic item response model (2PL), fitted by marginal maximum likelihood with EM over a
quadrature grid (Bock and Aitkin 1981), with weak priors on the item parameters.

P(model m answers item j right) = sigmoid(a_j * (theta_m - b_j)): theta is a model's ability, b an item's
difficulty, a its discrimination. Abilities are integrated out against a standard normal prior rather than
estimated jointly with the items: with the tens of models an evaluation population has, joint maximum likelihood
drives the item parameters of items every model got right (or wrong) to infinity; the marginal fit and the priors
keep them finite. Written here (about a hundred lines of numpy) rather than taken from a library: girth, the numpy
one, was last released in 2021; py-irt brings Pyro for variational inference; neither handles the missing cells a
warehouse's matrix has (a model evaluated on another draw), which this fit does by counting observed cells only.
Scores that are not right-or-wrong (F1, ROUGE, in [0, 1]) enter as fractions of a right answer: the Bernoulli
likelihood used as a quasi-likelihood, whose score equations hold for any mean in [0, 1] (Wedderburn 1974)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# scipy is imported in the functions that use it: a second of import that every command paid, which loads this
# module with the pipeline's definitions and mostly never calls it

GRID = np.linspace(-4.0, 4.0, 41)  # quadrature nodes for ability
PRIOR = np.exp(-0.5 * GRID**2) / np.exp(-0.5 * GRID**2).sum()  # standard normal weights on the nodes
LOG_A_PRIOR_SD = 0.5  # log-normal prior on discrimination, centred on a = 1
B_PRIOR_SD = 2.0  # normal prior on difficulty, centred on 0


@dataclass(frozen=True)
class ItemParameters:
    """A fitted 2PL: per item its discrimination (a) and difficulty (b), in the order of the matrix's columns."""

    discrimination: np.ndarray
    difficulty: np.ndarray
    guessing: float  # the lower asymptote every item shares (a 3PL's c, fixed): 0 for a plain 2PL
    log_likelihood: float
    iterations: int

    def probability(self, theta: np.ndarray | float) -> np.ndarray:
        """P(right) per item at each ability: shape (len(theta), items) for an array, (items,) for a scalar."""
        t = np.asarray(theta, float)
        return _curve(self.discrimination * (t[..., None] - self.difficulty), self.guessing)

    def ability(self, items: np.ndarray, answers: np.ndarray) -> float:
        """A model's expected a posteriori ability from its answers (0/1 or scores in [0, 1]) on the given items."""
        return float(np.sum(GRID * _posterior(self, items, answers)))

    def expected_score(self, items: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """P(right) on every item for a model that gave `answers` on `items`, averaged over its ability's
        posterior (not at one point estimate: with few answers the posterior is wide and the logistic curve
        is not linear)."""
        return np.asarray(_posterior(self, items, answers) @ self.probability(GRID))


def _posterior(params: ItemParameters, items: np.ndarray, answers: np.ndarray) -> np.ndarray:
    a, b = params.discrimination[items], params.difficulty[items]
    p = _curve(a * (GRID[:, None] - b), params.guessing)
    y = np.asarray(answers, float)
    log_like = (y * np.log(p) + (1 - y) * np.log1p(-p)).sum(axis=1) + np.log(PRIOR)
    w = np.exp(log_like - log_like.max())
    return np.asarray(w / w.sum())


def _expit(logits: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return np.asarray(expit(logits), dtype=float)


def _curve(logits: np.ndarray, guessing: float) -> np.ndarray:
    # kept inside (0, 1) so that log-likelihoods stay finite at the grid's ends
    return np.clip(guessing + (1 - guessing) * _expit(logits), 1e-9, 1 - 1e-9)


def fit_2pl(
    matrix: np.ndarray,
    guessing: float = 0.0,
    start: ItemParameters | None = None,
    max_iterations: int = 300,
    tolerance: float = 1e-3,
) -> ItemParameters:
    """Fits a 2PL to a models x items matrix of 0/1 (NaN where a model did not answer an item), or of scores in
    [0, 1] (F1, ROUGE), each counted as that fraction of a right answer (a Bernoulli quasi-likelihood); with
    `guessing` > 0 every item's curve starts at that floor (a 3PL with its c fixed, e.g. 1/4 for four choices).
    `start`: a fit of the same items to begin from (a fit on most of the same models converges in a few steps)."""
    y = np.asarray(matrix, float)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 1:
        raise ValueError(f"a 2PL needs a models x items matrix with at least 2 models; got shape {y.shape}")
    if not 0 <= guessing < 1:
        raise ValueError(f"the guessing floor is a probability below 1; got {guessing}")
    seen = ~np.isnan(y)
    right = np.where(seen, y, 0.0)
    if ((right < 0) | (right > 1)).any():
        raise ValueError("a 2PL is fitted to outcomes in [0, 1] (0/1, or a score such as F1); the matrix has others")
    wrong = np.where(seen, 1.0 - right, 0.0)
    rate = np.clip((right.sum(0) + 0.5) / (seen.sum(0) + 1.0), guessing + 0.02, 0.98)
    a = np.ones(y.shape[1])
    b = -np.log((rate - guessing) / (1 - rate))  # where a model of ability 0 would have this rate
    if start is not None:
        a, b = start.discrimination.copy(), start.difficulty.copy()
    for iteration in range(1, max_iterations + 1):
        # E step: each model's posterior over the ability grid
        p = _curve(a * (GRID[:, None] - b), guessing)  # nodes x items
        log_like = right @ np.log(p).T + wrong @ np.log1p(-p).T + np.log(PRIOR)  # models x nodes
        top = log_like.max(axis=1, keepdims=True)
        marginal = float(np.sum(top[:, 0] + np.log(np.exp(log_like - top).sum(axis=1))))
        post = np.exp(log_like - top)
        post /= post.sum(axis=1, keepdims=True)
        # M step: every item's (a, b) at once
        new_a, new_b = _m_step(a, b, post.T @ right, post.T @ seen.astype(float), guessing)
        change = max(np.abs(np.log(new_a / a)).max(), np.abs(new_b - b).max())
        a, b = new_a, new_b
        if change < tolerance:
            break
    return ItemParameters(a, b, guessing, marginal, iteration)


def _m_step(
    a: np.ndarray, b: np.ndarray, expected_right: np.ndarray, expected_seen: np.ndarray, guessing: float, steps: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Fisher scoring on every item's (a, b) at once (each item's expected log-likelihood is separate), with the
    log-normal prior on a and the normal prior on b; a step is halved where it would not improve an item."""
    node = GRID[:, None]

    def objective(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        p = _curve(a * (node - b), guessing)
        value = (expected_right * np.log(p) + (expected_seen - expected_right) * np.log1p(-p)).sum(0)
        return np.asarray(value - 0.5 * np.log(a) ** 2 / LOG_A_PRIOR_SD**2 - np.log(a) - 0.5 * b**2 / B_PRIOR_SD**2)

    current = objective(a, b)
    for _ in range(steps):
        s = _expit(a * (node - b))
        p = _curve(a * (node - b), guessing)
        slope = (1 - guessing) * s * (1 - s)  # dP / d logit
        residual = (expected_right - expected_seen * p) * slope / (p * (1 - p))  # d loglik / d logit
        weight = expected_seen * slope**2 / (p * (1 - p))  # its Fisher information
        centred = node - b
        grad_a = (residual * centred).sum(0) - (np.log(a) / LOG_A_PRIOR_SD**2 + 1) / a
        grad_b = -a * residual.sum(0) - b / B_PRIOR_SD**2
        info_aa = (weight * centred**2).sum(0) + 1 / (a**2 * LOG_A_PRIOR_SD**2)
        info_bb = a**2 * weight.sum(0) + 1 / B_PRIOR_SD**2
        info_ab = -a * (weight * centred).sum(0)
        det = info_aa * info_bb - info_ab**2
        step_a = (info_bb * grad_a - info_ab * grad_b) / det
        step_b = (info_aa * grad_b - info_ab * grad_a) / det
        scale = np.ones_like(a)
        for _ in range(8):  # step halving, per item
            new_a = np.clip(a + scale * step_a, 0.05, 8.0)
            new_b = np.clip(b + scale * step_b, -8.0, 8.0)
            value = objective(new_a, new_b)
            worse = value < current - 1e-9
            if not worse.any():
                break
            scale = np.where(worse, scale / 2, scale)
        keep = value >= current - 1e-9
        a, b = np.where(keep, new_a, a), np.where(keep, new_b, b)
        current = np.where(keep, value, current)
    return a, b
