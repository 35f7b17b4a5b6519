"""Benchmark: greedy generation on a CPU, this checkout against another revision, on the demo's own generation
requests: each side in a fresh process of its own (its code first on PYTHONPATH), alternating run by run, so both see
the same machine. Seconds per scenario (best of the runs), and whether the answers are the same: texts equal and
log-probabilities within the batch-shape noise the tests allow (1e-4), and each side's runs identical to each other.

What changes between revisions is how a generation is planned (which prompts run a shared prefix once, where
batches are cut), so the work is the one the plan decides on: SmolLM2-135M-Instruct's requests as `scripts/demo`
wrote them (any cap: HOLISTIC_MAX_EVAL_INSTANCES=1 gives the docs test's demo), read from its warehouse.

usage: .venv/bin/python bench/generation_plan.py --warehouse data/warehouse.duckdb --before REV [--runs 2]
                                                 [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from peers import BENCH, checkouts

HERE = Path(__file__).resolve().parent


def inner(warehouse: Path, out: Path) -> None:
    """One side's run, in this process: every scenario's requests generated in turn."""
    sys.path.insert(0, str(HERE))
    from cpu_attention import requests_by_scenario, warm_client

    requests = requests_by_scenario(warehouse)
    client = warm_client(requests)
    found = {}
    for scenario, batch in requests.items():
        started = time.perf_counter()
        done = client.generate(batch)
        found[scenario] = {"seconds": time.perf_counter() - started, "texts": [c.text for c in done],
                           "logprobs": [list(c.logprobs) for c in done]}  # fmt: skip
    import torch

    out.write_text(json.dumps({"threads": torch.get_num_threads(), "scenarios": found}))


def compare(sides: dict[str, list[dict]]) -> dict:
    """Best seconds per scenario and side, and how the answers compare (the first run of each side)."""
    (a_name, a_runs), (b_name, b_runs) = sides.items()
    scenarios = list(a_runs[0])
    best = {name: {s: min(r[s]["seconds"] for r in runs) for s in scenarios} for name, runs in sides.items()}
    answers = lambda run, s: list(zip(run[s]["texts"], run[s]["logprobs"]))  # noqa: E731
    pairs = [(x, y) for s in scenarios for x, y in zip(answers(a_runs[0], s), answers(b_runs[0], s))]
    same = [(x, y) for x, y in pairs if x[0] == y[0]]
    repeat = {name: all(answers(r, s) == answers(runs[0], s) for r in runs for s in scenarios)
              for name, runs in sides.items()}  # fmt: skip
    return {
        "seconds": best,
        "total": {name: sum(b.values()) for name, b in best.items()},
        "same_texts": f"{len(same)}/{len(pairs)}",
        "max_logprob_difference": max((abs(p - q) for x, y in same for p, q in zip(x[1], y[1])), default=0.0),
        "runs_identical": repeat,
    }


def markdown(result: dict, runs: int) -> str:
    names = list(result["seconds"])
    lines = [
        "# Greedy generation on a CPU, this checkout against another revision (the demo's requests, SmolLM2)",
        "",
        f"Best of {runs} runs per side, alternating, each in a fresh process on {result['torch_threads']} torch "
        "thread(s) (bench/generation_plan.py; OMP_NUM_THREADS=1 is the tests' setting). Texts the "
        f"same: {result['same_texts']}; largest log-probability difference {result['max_logprob_difference']:.1e}; "
        f"each side's runs identical: {result['runs_identical']}.",
        "",
        "| scenario | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
        "| **all** | " + " | ".join(f"**{result['total'][n]:.1f}**" for n in names) + " |",
    ]
    for scenario in result["seconds"][names[0]]:
        lines.append(f"| {scenario} | " + " | ".join(f"{result['seconds'][n][scenario]:.2f}" for n in names) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warehouse", type=Path, required=True)
    parser.add_argument("--before", required=True, help="the git revision to time alongside this checkout")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    out = BENCH / "generation_plan_run.json"
    with checkouts(args.before, "generation_plan_before") as code:
        sides: dict[str, list[dict]] = {name: [] for name in code}
        for n in range(args.runs):
            for name, checkout in code.items():
                subprocess.run([sys.executable, str(Path(__file__).resolve()), "--inner", str(args.warehouse),
                                str(out)], env={**os.environ, "PYTHONPATH": str(checkout)}, check=True)  # fmt: skip
                run = json.loads(out.read_text())
                threads = run["threads"]
                sides[name].append(run["scenarios"])
                print(f"run {n + 1} {name}: {sum(v['seconds'] for v in sides[name][-1].values()):.1f} s",
                      file=sys.stderr)  # fmt: skip
    result = {**compare(sides), "torch_threads": threads}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "generation-plan.json").write_text(json.dumps(result, indent=2))
    (args.out / "generation-plan.md").write_text(markdown(result, args.runs))
    print(markdown(result, args.runs))


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--inner":
        inner(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()
