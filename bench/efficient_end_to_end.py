"""Evaluation sized to the decision, end to end on the project's own models: each model evaluated in full through
`holistic evaluate`, then each evaluated again, in a warehouse of its own, with `--efficient --anchors K`; is the
estimate's order against every other model's full-draw value the full draw's own, where the full draw separates
the two (the product's paired test, Holm-corrected), and how many requests did it send?

The models are those installed with the project (the demo's SmolLM2-135M-Instruct on transformers and on
llama.cpp, the demo's tuned and untrained models); the llama.cpp ladder (scripts/install-ladder) joins where it
is installed (--models). With fewer than efficient.anchors.MIN_MODELS models evaluated in full, an efficient
evaluation is the cold start: a seeded uniform random sample of K instances per scenario and its interval,
whoever else was evaluated (the item response fit needs a population), which is what each model gets here.

    .venv/bin/python bench/efficient_end_to_end.py [--anchors 20] [--models M ...] [--root DIR]

Writes bench/results/efficient_end_to_end.{json,md}."""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from end_to_end import timed  # noqa: E402
from ladder import world  # noqa: E402

VERSION = "efficient-e2e"
MODELS = ("smollm2-135m-instruct", "smollm2-135m-instruct-llamacpp", "demo-llama-tuned", "demo-gpt2-untrained")
SUITE = """version: efficient-e2e
description: Evaluation sized to the decision, end to end (bench/efficient_end_to_end.py); no perturbations.
conventions: helm
scenarios:
  mmlu:
    max_eval_instances: 40
    subsets: [high_school_geography, high_school_psychology, miscellaneous, us_foreign_policy, computer_security]
  boolq: {max_eval_instances: 150}
  openbookqa: {max_eval_instances: 150, method: multiple_choice_joint}
"""
ALPHA = 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", type=int, default=20, help="instances each scenario's efficient run asks")
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--root", type=Path, help="keep the warehouses here (a model evaluated is not again)")
    parser.add_argument("--skip-evaluation", action="store_true", help="measure the warehouses under --root again")
    parser.add_argument(
        "--skip-full", action="store_true", help="keep the full evaluations under --root, run the efficient ones anew"
    )
    args = parser.parse_args()
    out = HERE / "results"
    with tempfile.TemporaryDirectory(prefix="efficient-e2e-") as scratch:
        root = args.root or Path(scratch)
        started = time.perf_counter()
        seconds = {"full": {}, "efficient": {}}
        if args.skip_evaluation or args.skip_full:  # the times of the run that made them
            before = json.loads((out / "efficient_end_to_end.json").read_text())
            seconds, wall = before["seconds"], before["wall_s"]
        for model in [] if args.skip_evaluation else args.models:
            if not args.skip_full:
                seconds["full"][model] = _evaluate(model, root / "full", world(root / "full", VERSION, SUITE))
            shutil.rmtree(root / f"efficient-{model}", ignore_errors=True)
            env = world(root / f"efficient-{model}", VERSION, SUITE)
            seconds["efficient"][model] = _evaluate(model, root / f"efficient-{model}", env, args.anchors)
        result = measure(root, args.models, args.anchors)
        result["seconds"] = seconds
        result["wall_s"] = wall if args.skip_evaluation else round(time.perf_counter() - started, 1)
        if args.skip_full:  # the full evaluations' seconds, as before, and this run's efficient ones
            result["wall_s"] = round(sum(seconds["full"].values()) + sum(seconds["efficient"].values()), 1)
    (out / "efficient_end_to_end.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "efficient_end_to_end.md").write_text(markdown(result))
    print(markdown(result))


def _evaluate(model: str, root: Path, env: dict[str, str], anchors: int = 0) -> float:
    command = [str(REPO / ".venv" / "bin" / "holistic"), "evaluate", "--model", model, "--version", VERSION]
    command += ["--efficient", "--anchors", str(anchors)] if anchors else []
    took = timed(command, env, root / f"{model}.log")
    print(f"{model}: {'efficient' if anchors else 'full'} in {took:.0f} s", file=sys.stderr, flush=True)
    return round(took, 1)


def measure(root: Path, models: list[str], anchors: int) -> dict:
    """Per scenario: each model's full-draw value, its estimate (value, interval, method, instances), the requests
    each run sent; and for every ordered pair (estimated model, other model in full) that the full draw separates,
    whether the estimate orders them as the full draw does."""
    from holistic_dagster.alerts.gate import holm
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.results.scores import compare_models, original_scores
    from holistic_dagster.warehouse import Warehouse

    full = Warehouse(root / "full" / "warehouse.duckdb")
    main = Catalog(root / "full" / "assets").main_metrics(VERSION)
    scores = original_scores(full, VERSION, models)
    scores = scores[(scores["family"] == "accuracy") & (scores["metric"] == scores["scenario"].map(main))]
    truth = {(m, s): float(part["value"].mean()) for (m, s), part in scores.groupby(["model", "scenario"])}
    tests = []
    for a, b in itertools.combinations(models, 2):
        frame = compare_models(full, VERSION, a, b, main_metric=main)
        frame = frame[(frame["family"] == "accuracy") & (frame["perturbation"] == "")]
        tests += [{"pair": (a, b), "scenario": r.scenario, "p": r.p_value} for r in frame.itertuples()]
    for test, adjusted in zip(tests, holm([t["p"] for t in tests])):
        test["separated"] = adjusted < ALPHA
    separated = {(t["pair"], t["scenario"]): t["separated"] for t in tests}
    estimates, requests = {}, {}
    for model in models:
        store = Warehouse(root / f"efficient-{model}" / "warehouse.duckdb")
        rows = store.df(
            "SELECT scenario, metric, value, ci_low, ci_high, n_evaluated, n_full, method FROM estimates "
            "WHERE model = ? AND family = 'accuracy'",
            [model],
        )
        for r in rows.itertuples():
            if r.metric == main.get(r.scenario):
                estimates[(model, r.scenario)] = r
        requests[model] = {"efficient": _sent(store, model), "full": _sent(full, model)}
    pairs = []
    for (model, scenario), est in estimates.items():
        for other in models:
            key = (tuple(sorted((model, other), key=models.index)), scenario)
            if other == model or not separated.get(key):
                continue
            gap = truth[(model, scenario)] - truth[(other, scenario)]
            pairs.append({"estimated": model, "full": other, "scenario": scenario, "gap": round(gap, 4),
                          "ordered": (est.value - truth[(other, scenario)]) * gap > 0})  # fmt: skip
    cells = [
        {"model": m, "scenario": s, "full": round(truth[(m, s)], 4), "estimate": round(e.value, 4),
         "low": round(e.ci_low, 4), "high": round(e.ci_high, 4), "covered": e.ci_low <= truth[(m, s)] <= e.ci_high,
         "n_evaluated": int(e.n_evaluated), "n_full": int(e.n_full), "method": e.method}
        for (m, s), e in sorted(estimates.items())
    ]  # fmt: skip
    return {"version": VERSION, "anchors": anchors, "models": models, "cells": cells, "pairs": pairs,
            "requests": requests, "alpha": ALPHA}  # fmt: skip


def _sent(store, model: str) -> int:
    """The requests a run sent for the model (its completions; a failed request counts too)."""
    return int(store.df("SELECT count(*) AS n FROM completions WHERE model = ?", [model])["n"].iat[0])


def markdown(result: dict) -> str:
    pairs, cells = result["pairs"], result["cells"]
    ordered = sum(p["ordered"] for p in pairs)
    lines = [
        f"Each model evaluated in full, then alone with `--efficient --anchors {result['anchors']}` "
        f"(suite `{result['version']}`: MMLU 5 subjects x 40, BoolQ 150, OpenBookQA 150); fewer than 10 models "
        "evaluated in full, so each efficient run is the cold start, a seeded random sample and its interval.",
        "",
        "| model | scenario | full draw | estimate | interval | covers | instances | method |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        lines.append(
            f"| {c['model']} | {c['scenario']} | {c['full']:.3f} | ≈{c['estimate']:.3f} | [{c['low']:.3f}, "
            f"{c['high']:.3f}] | {'yes' if c['covered'] else 'no'} | {c['n_evaluated']}/{c['n_full']} | "
            f"{c['method']} |"
        )
    lines += [
        "",
        f"Ordered as the full draw: {ordered} of {len(pairs)} (estimated model, other model in full) pairs that the "
        f"full draw separates (paired permutation test, Holm over every pair and scenario, alpha {result['alpha']}). "
        f"Intervals covering the full-draw value: {sum(c['covered'] for c in cells)} of {len(cells)}.",
        "",
        "| model | requests, efficient | requests, full | share |",
        "|---|---|---|---|",
    ]
    for model, sent in result["requests"].items():
        share = sent["efficient"] / sent["full"] if sent["full"] else float("nan")
        lines.append(f"| {model} | {sent['efficient']} | {sent['full']} | {share:.0%} |")
    lines += ["", f"bench/efficient_end_to_end.py, {result.get('wall_s', 0):.0f} s on 2 CPU cores."]
    for p in pairs:
        if not p["ordered"]:
            lines.append(f"- out of order: {p['estimated']} (estimated) against {p['full']} on {p['scenario']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
