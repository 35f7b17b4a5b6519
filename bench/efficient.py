"""Evaluation sized to the decision, measured on real HELM Classic results (../shared/data/helm_classic_responses:
20 models x 567 MMLU items): anchor estimates against uniform random sampling of as many items, with models held
out in turn (and in groups of five, and the four strongest held out together: an extrapolation), and the
sequential gate over every ordered pair of models against the full-draw verdict. Then the same for scores that are
not right-or-wrong: a population of F1-like scores generated from the 2PL fitted on those results (each model's
fitted ability, each item's fitted parameters; a score is the share of 6 reference tokens matched), as no file here
holds per-instance F1 of many models.

    .venv/bin/python bench/efficient.py [--seeds 20] [--anchors 100]

Writes bench/results/efficient.{json,md} (the docs' benchmarks page and the how-to page include the table)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from holistic_dagster.efficient.irt import fit_2pl
from holistic_dagster.efficient.validation import Matrix, read_matrix, validate_estimates, validate_gate
from holistic_dagster.settings import REPO_ROOT

MATRIX = REPO_ROOT.parent / "shared" / "data" / "helm_classic_responses" / "mmlu.json"
OUT = REPO_ROOT / "bench" / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", type=Path, default=MATRIX)
    parser.add_argument("--seeds", type=int, default=50)  # 20 left Kendall tau 0.02 from its mean
    parser.add_argument("--anchors", type=int, default=100)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    matrix = read_matrix(args.matrix)
    runs, started = {}, time.perf_counter()
    runs["one held out in turn (fit on 19)"] = validate_estimates(matrix, None, args.anchors, args.seeds).as_json()
    order = list(np.random.default_rng(0).permutation(matrix.models))
    groups = [order[i::4] for i in range(4)]
    fives = [validate_estimates(matrix, g, args.anchors, args.seeds).as_json() for g in groups]
    runs["five held out together, 4 folds (fit on 15)"] = _pooled(fives)
    strongest = sorted(matrix.models, key=lambda m: -np.nanmean(matrix.rows([m])[0]))[:4]
    runs["the 4 strongest held out (fit on the 16 weaker)"] = validate_estimates(
        matrix, strongest, args.anchors, args.seeds
    ).as_json()
    gate = {f"tolerance {t}": validate_gate(matrix, 0.05, t) for t in (0.0, 0.02)}
    scores = scores_like(matrix)
    scored = {
        "estimates, one held out in turn (fit on 19)": validate_estimates(
            scores, None, args.anchors, args.seeds
        ).as_json(),
        "gate": validate_gate(scores, 0.05, 0.0),
    }
    seconds = time.perf_counter() - started
    result = {"matrix": str(args.matrix.name), "anchors": args.anchors, "seeds": args.seeds, "estimates": runs,
              "gate": gate, "scores": scored, "seconds": round(seconds, 1)}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "efficient.json").write_text(json.dumps(result, indent=2, default=_plain) + "\n")
    (args.out / "efficient.md").write_text(markdown(result))
    print(markdown(result))


def scores_like(matrix: Matrix, seed: int = 0) -> Matrix:
    """F1-like scores of the matrix's models on its items, generated from the 2PL fitted on their 0/1 results."""
    params = fit_2pl(matrix.correct)
    every = np.arange(len(matrix.items))
    abilities = np.array([params.ability(every, row) for row in matrix.correct])
    p = params.probability(abilities)
    values = np.random.default_rng(seed).binomial(6, p) / 6
    return Matrix(matrix.models, matrix.items, values, f"F1-like scores generated from {matrix.source}'s 2PL")


def _pooled(runs: list[dict]) -> dict:
    """Folds' figures pooled, each weighted by its held-out models (tau and pair shares: by fold)."""
    sizes = np.array([len(r["per_model"]) for r in runs], float)
    pooled = dict(runs[0])
    for key in ("mae", "mae_random", "max_error", "interval_coverage", "interval_width"):
        pooled[key] = float(np.average([r[key] for r in runs], weights=sizes))
    for key in ("kendall_tau", "kendall_tau_random", "kendall_tau_random_common", "pairs_ordered",
                "pairs_ordered_random"):  # fmt: skip
        pooled[key] = float(np.nanmean([r[key] for r in runs]))
    pooled["max_error"] = max(r["max_error"] for r in runs)
    pooled["mae_ratio"] = pooled["mae"] / pooled["mae_random"]
    pooled["separated_pairs"] = sum(r["separated_pairs"] for r in runs)
    pooled["folds"] = [f for r in runs for f in r["folds"]]
    pooled["per_model"] = {m: v for r in runs for m, v in r["per_model"].items()}
    return pooled


def _plain(value):
    return value.item() if hasattr(value, "item") else str(value)


def markdown(result: dict) -> str:
    k, seeds = result["anchors"], result["seeds"]
    lines = [
        f"Anchor estimates at {k} of 567 items (HELM Classic MMLU, 20 models), {seeds} seeds per held-out model, "
        "against uniform random samples of the same size; 90% intervals:",
        "",
        "| held out | MAE (points) | random | ratio | worst error | Kendall tau | random | random, one sample | "
        "pairs ≥5 pts ordered | random | 90% interval coverage | mean width |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result["estimates"].items():
        lines.append(
            f"| {name} | {r['mae'] * 100:.2f} | {r['mae_random'] * 100:.2f} | {r['mae_ratio']:.2f}x | "
            f"{r['max_error'] * 100:.1f} | {_f(r['kendall_tau'])} | {_f(r['kendall_tau_random'])} | "
            f"{_f(r['kendall_tau_random_common'])} | "
            f"{_p(r['pairs_ordered'])} ({r['separated_pairs']}) | {_p(r['pairs_ordered_random'])} | "
            f"{_p(r['interval_coverage'])} | {r['interval_width'] * 100:.1f} pts |"
        )
    lines += [
        "",
        "Random samples are drawn as the anchors are: one per held-out fold and seed, shared by that fold's models "
        '("random"); "random, one sample" ranks every model on one sample per seed, shared by all, which '
        "favours a ranking (every difference measured on the same items) where held out one at a time each model "
        "has anchors of its own.",
        "",
        "The sequential gate (exact McNemar, a look every 25 items, O'Brien-Fleming alpha spending, futility at 2%) "
        "on every ordered pair of the 20 models, against the full-draw verdict (exact McNemar at alpha 0.05):",
        "",
        "| tolerance | pairs | verdict reproduced | false alarms | missed regressions | mean share of instances |",
        "|---|---|---|---|---|---|",
    ]
    for name, g in result["gate"].items():
        lines.append(
            f"| {name.split()[-1]} | {g['pairs']} | {_p(g['verdict_agreement'])} | {_p(g['false_alarm_rate'])} | "
            f"{_p(g['missed_regression_rate'])} | {_p(g['mean_fraction_used'])} |"
        )
    r, g = result["scores"]["estimates, one held out in turn (fit on 19)"], result["scores"]["gate"]
    lines += [
        "",
        "Scores that are not right-or-wrong (generated: F1-like shares of 6 tokens from the 2PL fitted on the matrix "
        "above, its models' abilities and its items' parameters), one model held out in turn, and the sequential "
        "sign-flip gate on every ordered pair:",
        "",
        "| MAE (points) | random | ratio | Kendall tau | random | pairs ≥5 pts ordered | random | 90% coverage | "
        "gate: verdict reproduced | false alarms | mean share of instances |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {r['mae'] * 100:.2f} | {r['mae_random'] * 100:.2f} | {r['mae_ratio']:.2f}x | {_f(r['kendall_tau'])} | "
        f"{_f(r['kendall_tau_random'])} | {_p(r['pairs_ordered'])} | {_p(r['pairs_ordered_random'])} | "
        f"{_p(r['interval_coverage'])} | {_p(g['verdict_agreement'])} | {_p(g['false_alarm_rate'])} | "
        f"{_p(g['mean_fraction_used'])} |",
    ]
    lines += ["", f"bench/efficient.py, {result['seconds']} s on 2 CPU cores."]
    return "\n".join(lines) + "\n"


def _f(v) -> str:
    return "n/a" if v is None or v != v else f"{v:.3f}"


def _p(v) -> str:
    return "n/a" if v is None or v != v else f"{v:.1%}"


if __name__ == "__main__":
    main()
