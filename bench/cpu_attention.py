"""Benchmark: the CPU's attention bound on batches (transformers_device.CPU_LIMITS.attention) on the demo's own
generation requests, with and without it, alternating, in one process: seconds per scenario, forward passes by
rows, and whether the texts are the same (log-probabilities within the batch-shape noise the tests allow, 1e-4).

The requests are the prompts `scripts/demo` wrote for SmolLM2-135M-Instruct (any cap: HOLISTIC_MAX_EVAL_INSTANCES=1
gives the docs test's demo), read from its warehouse.

usage: .venv/bin/python bench/cpu_attention.py --warehouse data/warehouse.duckdb [--repeats 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections import Counter
from pathlib import Path

import duckdb

from holistic_dagster.clients.registry import get_client
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.warehouse.rows import request_from_row

MODEL = "smollm2-135m-instruct"


def requests_by_scenario(warehouse: Path) -> dict[str, list]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.sql(
            f"SELECT * FROM prompts WHERE model = '{MODEL}' AND kind = 'generate' ORDER BY scenario, request_id"
        ).df()
    found: dict[str, list] = {}
    for row in rows.itertuples():
        found.setdefault(row.scenario, []).append(request_from_row(row))
    return found


def timed_generation(client, requests: dict[str, list]) -> dict:
    """Each scenario's requests generated in turn: seconds and outputs per scenario, forward passes by rows."""
    client.pass_rows.clear()
    seconds, outputs = {}, {}
    for scenario, batch in requests.items():
        started = time.perf_counter()
        done = client.generate(batch)
        seconds[scenario] = time.perf_counter() - started
        outputs[scenario] = [(c.text, list(c.logprobs)) for c in done]
    return {"seconds": seconds, "outputs": outputs, "passes": dict(sorted(Counter(client.pass_rows).items()))}


def warm_client(requests: dict[str, list]):
    """SmolLM2's client, its weights loaded and one request generated (the first pass pays one-off costs)."""
    client = get_client(Deployment().model(MODEL))
    client.load_model()
    client.generate(requests[next(iter(requests))][:1])
    return client


def run(client, requests: dict[str, list], attention: int | None) -> dict:
    client.limits.current = dataclasses.replace(client.limits.current, attention=attention)
    return timed_generation(client, requests)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warehouse", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    requests = requests_by_scenario(args.warehouse)
    client = warm_client(requests)
    bound = client.limits.current.attention
    sides: dict[str, list[dict]] = {"without": [], "with": []}
    for _ in range(args.repeats):
        sides["without"].append(run(client, requests, None))
        sides["with"].append(run(client, requests, bound))
    best = {k: {s: min(r["seconds"][s] for r in runs) for s in requests} for k, runs in sides.items()}
    first, other = sides["without"][0]["outputs"], sides["with"][0]["outputs"]
    texts_differ = sum(a[0] != b[0] for s in first for a, b in zip(first[s], other[s]))
    worst = max(abs(x - y) for s in first for a, b in zip(first[s], other[s]) for x, y in zip(a[1], b[1]))
    report = {
        "model": MODEL, "attention_bound": bound, "repeats": args.repeats, "requests": sum(map(len, requests.values())),
        "seconds": best, "passes": {k: runs[0]["passes"] for k, runs in sides.items()},
        "texts_differ": texts_differ, "worst_logprob_difference": worst,
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cpu-attention.json").write_text(json.dumps(report, indent=1))
    lines = [
        "# The CPU's attention bound on batches: the demo's generation requests with and without it",
        "",
        f"SmolLM2-135M-Instruct, {report['requests']} generation requests of the demo's warehouse, the best of "
        f"{args.repeats} alternating runs per side (bench/cpu_attention.py). Bound: rows x computed tokens x width "
        f"<= {bound:,}. Texts differing: {texts_differ}; largest log-probability difference {worst:.1e}.",
        "",
        "| scenario | requests | without (s) | with (s) | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for s, batch in requests.items():
        a, b = best["without"][s], best["with"][s]
        lines.append(f"| {s} | {len(batch)} | {a:.2f} | {b:.2f} | {b / a:.2f} |")
    total_a, total_b = sum(best["without"].values()), sum(best["with"].values())
    lines.append(f"| **all** | {report['requests']} | {total_a:.1f} | {total_b:.1f} | {total_b / total_a:.2f} |")
    lines += ["", f"Forward passes by rows, without: {report['passes']['without']}; with: {report['passes']['with']}."]
    (args.out / "cpu-attention.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
