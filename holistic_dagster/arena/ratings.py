"""Ratings fitted to pairwise battles: Bradley-Terry on the Elo scale with prompt-bootstrap intervals, the
classic online Elo for comparison, and the raw win-rate matrix.

Input: a battles frame with columns model_a, model_b, winner ("a", "b" or "tie") and prompt (the instance the
two answers were for); style control adds numeric covariate columns. A battle scores 1 for A when A wins, 0
when B wins, and 1/2 to each side on a tie.

- Bradley-Terry (as Chatbot Arena since 2023, and Arena-Hard): P(A beats B) = sigmoid(theta_A - theta_B), fitted
  by maximum likelihood with ties as soft labels of 1/2, plus choix's Gaussian penalty alpha * ||theta||^2.
  Reported on the Elo scale: 400 / ln(10) Elo points per logit, the baseline model anchored at 1000.
- Style control (LMSYS, Arena-Hard): each style column is a per-battle covariate x (e.g. the normalized length
  difference (len_a - len_b) / (len_a + len_b)), and the logit becomes theta_A - theta_B + gamma . x. The
  ratings are then what is left once the style's effect on the verdicts is accounted for.
- Bootstrap: resample prompts with replacement, each bringing all its battles, refit, take the 2.5th and
  97.5th percentiles.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

ELO_SCALE = 400.0 / math.log(10.0)  # Elo points per logit: 10^(diff/400) = e^(diff/ELO_SCALE)
ELO_ANCHOR = 1000.0
OUTCOME = {"a": 1.0, "b": 0.0, "tie": 0.5}  # the score of model_a
MAX_ITER = 100
GRAD_TOL = 1e-10  # max |gradient| per battle at convergence
N_BOOT = 1000
SEED = 0


HUMAN = "human"  # the judge name of votes cast on the vote page
ONE_PROMPT = "no interval: every battle is on one prompt, and a bootstrap over prompts needs two or more"
UNBOUNDED = (
    "unbounded: it never lost (or never won) against the baseline's group in these battles, so its maximum-"
    "likelihood rating is infinite; the value shown is held finite by a small prior and means only above (below) all"
)


@dataclass(frozen=True)
class BTFit:
    """A Bradley-Terry fit. theta: logits in the order of `models` (sorted), summing to 0. ratings: Elo, the
    baseline at exactly 1000. style: the coefficient of each style covariate, in logits per unit of it.
    unbounded[m]: the data do not bound m's rating relative to the baseline (m is not in the baseline's strongly
    connected component of the "won at least half a battle against" graph, e.g. m never lost, or never won, or
    never met the baseline's group): its maximum-likelihood gap is infinite or undetermined, so its rating is
    set by alpha (large for small alpha), not by the data."""

    models: list[str]
    theta: np.ndarray
    ratings: dict[str, float]
    style: dict[str, float]
    num_battles: int
    unbounded: dict[str, bool]
    baseline: str
    alpha: float


@dataclass(frozen=True)
class _Design:
    """Battles as index arrays: models (sorted), each battle's two model indices, its score for A, its prompt
    index, and its style covariates (battles x covariates)."""

    models: list[str]
    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    prompt: np.ndarray
    covariates: np.ndarray
    style: list[str]


def _design(battles: pd.DataFrame, style: list[str] | None, prompts: bool = False) -> _Design:
    """Checks the battles and indexes them; the prompt column is required only when `prompts` is set."""
    style = list(style or [])
    needed = ["model_a", "model_b", "winner", *(["prompt"] if prompts else []), *style]
    missing = [c for c in needed if c not in battles.columns]
    if missing:
        raise ValueError(f"battles lack the columns {missing}")
    if battles.empty:
        raise ValueError("no battles to fit")
    unknown = sorted(set(battles["winner"]) - set(OUTCOME))
    if unknown:
        raise ValueError(f"winner must be one of {sorted(OUTCOME)}, got {unknown}")
    if (battles["model_a"] == battles["model_b"]).any():
        raise ValueError("a model cannot battle itself (model_a == model_b)")
    models = sorted(set(battles["model_a"]) | set(battles["model_b"]))
    index = {m: i for i, m in enumerate(models)}
    covariates = battles[style].to_numpy(dtype=float).reshape(len(battles), len(style))
    if not np.isfinite(covariates).all():
        raise ValueError(f"style covariates {style} must be finite numbers")
    return _Design(
        models=models,
        a=battles["model_a"].map(index).to_numpy(),
        b=battles["model_b"].map(index).to_numpy(),
        score=battles["winner"].map(OUTCOME).to_numpy(dtype=float),
        prompt=pd.factorize(battles["prompt"])[0] if prompts else np.zeros(len(battles), dtype=int),
        covariates=covariates,
        style=style,
    )


@dataclass(frozen=True)
class _Rows:
    """The likelihood's rows: without style, one per unordered pair of models (battles are exchangeable within
    a pair); with style, one per battle. `row` maps each battle to its row; `flip` marks battles entered with
    the pair's order reversed (their score for the row's first model is 1 - score)."""

    a: np.ndarray
    b: np.ndarray
    covariates: np.ndarray
    row: np.ndarray
    flip: np.ndarray


def _rows(design: _Design) -> _Rows:
    if design.style:
        n = len(design.a)
        return _Rows(design.a, design.b, design.covariates, np.arange(n), np.zeros(n, dtype=bool))
    flip = design.a > design.b
    low, high = np.where(flip, design.b, design.a), np.where(flip, design.a, design.b)
    pairs, row = np.unique(np.stack([low, high], axis=1), axis=0, return_inverse=True)
    return _Rows(pairs[:, 0], pairs[:, 1], np.zeros((len(pairs), 0)), row.ravel(), flip)


def _row_totals(design: _Design, rows: _Rows, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the weighted number of battles and the weighted score of the row's first model."""
    n_rows = len(rows.a)
    count = np.bincount(rows.row, weights=weight, minlength=n_rows)
    score = np.where(rows.flip, 1.0 - design.score, design.score)
    return count, np.bincount(rows.row, weights=weight * score, minlength=n_rows)


def _newton(
    rows: _Rows, num_models: int, count: np.ndarray, score: np.ndarray, alpha: float, start: np.ndarray | None = None
) -> np.ndarray:
    """Minimizes sum_r [count_r * softplus(z_r) - score_r * z_r] + alpha * ||theta||^2, z = theta_a - theta_b +
    gamma . x, over (theta, gamma) by Newton's method with a backtracking line search. The Hessian is solved by
    least squares, so alpha = 0's free shift of theta (and a covariate that never varies) costs nothing."""
    n_rows, n_style = rows.covariates.shape
    design = np.zeros((n_rows, num_models + n_style))
    design[np.arange(n_rows), rows.a] = 1.0
    design[np.arange(n_rows), rows.b] = -1.0
    design[:, num_models:] = rows.covariates
    penalty = np.zeros(num_models + n_style)
    penalty[:num_models] = 2.0 * alpha  # the style coefficients are not penalized

    def objective(params: np.ndarray) -> float:
        z = design @ params
        return float(count @ np.logaddexp(0.0, z) - score @ z + 0.5 * penalty @ params**2)

    params = np.zeros(num_models + n_style) if start is None else start.astype(float)
    value, tol = objective(params), GRAD_TOL * max(1.0, float(count.sum()))
    for _ in range(MAX_ITER):
        z = design @ params
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid without overflow
        grad = design.T @ (count * p - score) + penalty * params
        if np.abs(grad).max() < tol:
            return params
        hessian = (design.T * (count * p * (1.0 - p))) @ design + np.diag(penalty)
        step = -np.linalg.lstsq(hessian, grad, rcond=None)[0]
        slope, t = float(grad @ step), 1.0
        for _ in range(50):
            new_value = objective(params + t * step)
            # the slack absorbs rounding once the decrease is below float precision, near the optimum
            if new_value <= value + 1e-4 * t * slope + 1e-13 * (1.0 + abs(value)):
                break
            t *= 0.5
        params, value = params + t * step, new_value
    raise ValueError(
        f"Bradley-Terry fit did not converge in {MAX_ITER} Newton iterations (max |gradient| "
        f"{np.abs(grad).max():.3g}); a style covariate that separates the verdicts has no finite coefficient"
    )


def _unbounded(design: _Design, baseline: int) -> np.ndarray:
    """Models outside the baseline's strongly connected component of the graph i -> j "i scored above 0 against
    j": only within it are the maximum-likelihood gaps finite (Ford 1957). A separating covariate cannot make
    them finite either: shifting a whole separated group improves every cross-group term and nothing else."""
    m = len(design.models)
    beat = np.zeros((m, m), dtype=bool)
    beat[design.a[design.score > 0], design.b[design.score > 0]] = True
    beat[design.b[design.score < 1], design.a[design.score < 1]] = True
    reach = beat | np.eye(m, dtype=bool)
    while True:  # transitive closure by squaring
        closer = reach | ((reach.astype(int) @ reach.astype(int)) > 0)
        if (closer == reach).all():
            break
        reach = closer
    return ~(reach[baseline] & reach[:, baseline])


def _baseline_index(models: list[str], baseline: str) -> int:
    if baseline not in models:
        raise ValueError(f"baseline {baseline!r} is not in the battles; the models are {models}")
    return models.index(baseline)


def _fit(design: _Design, rows: _Rows, weight: np.ndarray, alpha: float, start: np.ndarray | None = None) -> np.ndarray:
    count, score = _row_totals(design, rows, weight)
    params = _newton(rows, len(design.models), count, score, alpha, start)
    if alpha == 0:  # the maximum likelihood leaves theta's shift free: choose mean 0, as the MAP has
        params[: len(design.models)] -= params[: len(design.models)].mean()
    return params


def _elo(theta: np.ndarray, baseline: int) -> np.ndarray:
    return ELO_ANCHOR + ELO_SCALE * (theta - theta[baseline])


def bradley_terry(battles: pd.DataFrame, baseline: str, alpha: float = 1e-6, style: list[str] | None = None) -> BTFit:
    """Bradley-Terry ratings of the models in `battles`, on the Elo scale with `baseline` at 1000.

    The penalty is choix's (opt_pairwise): alpha * ||theta||^2 over all models' theta (a Gaussian prior of
    variance 1 / (2 alpha)), so on battles without ties theta equals choix.opt_pairwise's with the same alpha.
    It keeps a rating finite when a model never lost or never won; alpha = 0 gives the maximum-likelihood
    estimate, which exists when every model is in one strongly connected component (see BTFit.unbounded).
    `style` names covariate columns, each with an unpenalized coefficient; the ratings are then style-controlled.
    """
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    design = _design(battles, style)
    base = _baseline_index(design.models, baseline)
    params = _fit(design, _rows(design), np.ones(len(design.a)), alpha)
    m = len(design.models)
    theta = params[:m]
    return BTFit(
        models=design.models,
        theta=theta,
        ratings=dict(zip(design.models, _elo(theta, base).tolist())),
        style=dict(zip(design.style, params[m:].tolist())),
        num_battles=len(design.a),
        unbounded=dict(zip(design.models, _unbounded(design, base).tolist())),
        baseline=baseline,
        alpha=alpha,
    )


def bootstrap_ratings(
    battles: pd.DataFrame,
    baseline: str,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    alpha: float = 1e-6,
    style: list[str] | None = None,
) -> pd.DataFrame:
    """Bradley-Terry ratings with percentile bootstrap 95% CIs: model, rating (the fit on all battles), ci_low,
    ci_high, num_battles (the battles the model took part in), unbounded (see BTFit); sorted by rating,
    highest first.

    Each resample draws the prompts with replacement (numpy Generator seeded with `seed`), every drawn prompt
    bringing all its battles, since battles on one prompt share its difficulty and are not independent. The
    ratings are relative to the baseline, so the baseline's CI is [1000, 1000] by construction: a CI is the
    uncertainty of the model's gap to the baseline. A resample in which a model or the baseline has no battle
    says nothing about that gap and is left out of that model's percentiles. Battles on a single prompt give
    no interval (NaN bounds).
    """
    if alpha < 0 or n_boot < 1:
        raise ValueError(f"alpha must be >= 0 and n_boot >= 1, got alpha={alpha}, n_boot={n_boot}")
    design = _design(battles, style, prompts=True)
    base = _baseline_index(design.models, baseline)
    rows = _rows(design)
    m = len(design.models)
    full = _fit(design, rows, np.ones(len(design.a)), alpha)
    rng = np.random.default_rng(seed)
    num_prompts = int(design.prompt.max()) + 1
    boot = np.full((n_boot, m), np.nan)
    # one prompt: every resample is the same battles, and a zero-width "interval" would claim a certainty that
    # one prompt cannot give: no interval (NaN bounds)
    for k in range(n_boot if num_prompts > 1 else 0):
        drawn = np.bincount(rng.integers(0, num_prompts, size=num_prompts), minlength=num_prompts)
        weight = drawn[design.prompt].astype(float)
        present = np.bincount(design.a, weight, m) + np.bincount(design.b, weight, m) > 0
        if not present[base]:
            continue
        params = _fit(design, rows, weight, alpha, start=full)
        boot[k] = np.where(present, _elo(params[:m], base), np.nan)
    with warnings.catch_warnings():  # a model absent from every resample: NaN bounds, without a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(boot, [2.5, 97.5], axis=0)
    out = pd.DataFrame(
        {
            "model": design.models,
            "rating": _elo(full[:m], base),
            "ci_low": low,
            "ci_high": high,
            "num_battles": np.bincount(design.a, minlength=m) + np.bincount(design.b, minlength=m),
            "unbounded": _unbounded(design, base),
        }
    )
    return out.sort_values("rating", ascending=False, kind="stable").reset_index(drop=True)


def online_elo(battles: pd.DataFrame, k: float = 4.0, baseline: str | None = None) -> dict[str, float]:
    """The classic sequential Elo (LMSYS's compute_online_elo: K=4, scale 400, base 10, everyone starting at
    1000), updating both models after each battle in the order of the rows; with `baseline`, all ratings are
    shifted so that it has 1000. For comparison only: the result depends on the order of the battles and
    weighs recent ones more, whereas Bradley-Terry's maximum likelihood treats every battle alike and does not
    depend on their order, which is why the Arena moved to it. Returns model -> rating, models sorted."""
    rating: dict[str, float] = {}
    for model_a, model_b, winner in battles[["model_a", "model_b", "winner"]].itertuples(index=False):
        if winner not in OUTCOME:
            raise ValueError(f"winner must be one of {sorted(OUTCOME)}, got {winner!r}")
        ra, rb = rating.get(model_a, ELO_ANCHOR), rating.get(model_b, ELO_ANCHOR)
        expected_a = predicted_win_rate(ra, rb)
        score_a = OUTCOME[winner]
        rating[model_a] = ra + k * (score_a - expected_a)
        rating[model_b] = rb + k * ((1.0 - score_a) - (1.0 - expected_a))
    if baseline is not None:
        if baseline not in rating:
            raise ValueError(f"baseline {baseline!r} is not in the battles; the models are {sorted(rating)}")
        shift = ELO_ANCHOR - rating[baseline]
        rating = {m: r + shift for m, r in rating.items()}
    return {m: rating[m] for m in sorted(rating)}


def win_rate_matrix(battles: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rates, counts), both models x models (sorted): rates[i][j] is the share of i's battles against j that i
    won, a tie counting 1/2 (NaN on the diagonal and where i and j never met); counts[i][j] is the number of
    those battles (symmetric, 0 on the diagonal). Rows are the model, columns its opponent."""
    design = _design(battles, None)
    m = len(design.models)
    counts = np.zeros((m, m))
    wins = np.zeros((m, m))
    np.add.at(counts, (design.a, design.b), 1.0)
    np.add.at(counts, (design.b, design.a), 1.0)
    np.add.at(wins, (design.a, design.b), design.score)
    np.add.at(wins, (design.b, design.a), 1.0 - design.score)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(counts > 0, wins / counts, np.nan)
    return (
        pd.DataFrame(rates, index=design.models, columns=design.models),
        pd.DataFrame(counts.astype(int), index=design.models, columns=design.models),
    )


def predicted_win_rate(rating_a: float, rating_b: float) -> float:
    """The expected score of A against B from their Elo ratings: 1 / (1 + 10^((rating_b - rating_a) / 400))."""
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))
