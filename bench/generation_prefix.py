"""Benchmark: greedy generation of several tokens on a CPU, a shared few-shot prefix run once where it pays
(batching.generation_prefix_groups) against the rule before it (only a cluster that fills a whole batch shares its
prefix), on the demo's own generation requests, alternating, in one process: seconds per scenario, forward passes by
rows, and whether the texts are the same (log-probabilities within the batch-shape noise the tests allow, 1e-4).

The requests are the prompts `scripts/demo` wrote for SmolLM2-135M-Instruct (any cap: HOLISTIC_MAX_EVAL_INSTANCES=1
gives the docs test's demo), read from its warehouse.

usage: .venv/bin/python bench/generation_prefix.py --warehouse data/warehouse.duckdb [--repeats 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cpu_attention import MODEL, requests_by_scenario, timed_generation, warm_client

from holistic_dagster.clients.batching import prefix_groups


def run(client, requests: dict[str, list], rule) -> dict:
    client._generation_groups = rule
    return timed_generation(client, requests)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warehouse", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    requests = requests_by_scenario(args.warehouse)
    client = warm_client(requests)
    rules = {
        "a full batch": lambda encoded, steps, decode_steps=None: prefix_groups(
            encoded, client.min_shared_prefix_members(steps)
        ),
        "where it pays": type(client)._generation_groups.__get__(client),
    }
    sides: dict[str, list[dict]] = {name: [] for name in rules}
    for _ in range(args.repeats):
        for name, rule in rules.items():
            sides[name].append(run(client, requests, rule))
    best = {k: {s: min(r["seconds"][s] for r in runs) for s in requests} for k, runs in sides.items()}
    first, other = (sides[name][0]["outputs"] for name in rules)
    texts_differ = sum(a[0] != b[0] for s in first for a, b in zip(first[s], other[s]))
    worst = max(abs(x - y) for s in first for a, b in zip(first[s], other[s]) for x, y in zip(a[1], b[1]))
    report = {
        "model": MODEL, "repeats": args.repeats, "requests": sum(map(len, requests.values())), "seconds": best,
        "passes": {k: runs[0]["passes"] for k, runs in sides.items()}, "texts_differ": texts_differ,
        "worst_logprob_difference": worst,
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "generation-prefix.json").write_text(json.dumps(report, indent=1))
    old, new = rules
    lines = [
        "# A shared few-shot prefix in greedy generation on a CPU: run once where it pays, or only in full batches",
        "",
        f"SmolLM2-135M-Instruct, {report['requests']} generation requests of the demo's warehouse, the best of "
        f"{args.repeats} alternating runs per side (bench/generation_prefix.py). Texts differing: {texts_differ}; "
        f"largest log-probability difference {worst:.1e}.",
        "",
        f"| scenario | requests | {old} (s) | {new} (s) | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for s, batch in requests.items():
        a, b = best[old][s], best[new][s]
        lines.append(f"| {s} | {len(batch)} | {a:.2f} | {b:.2f} | {b / a:.2f} |")
    total_a, total_b = sum(best[old].values()), sum(best[new].values())
    lines.append(f"| **all** | {report['requests']} | {total_a:.1f} | {total_b:.1f} | {total_b / total_a:.2f} |")
    lines += ["", f"Forward passes by rows, {old}: {report['passes'][old]}; {new}: {report['passes'][new]}."]
    (args.out / "generation-prefix.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
