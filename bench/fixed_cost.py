"""Benchmark: where a cold `holistic evaluate` spends its time before its first request to the model and after its
last, on ../shared/peerbench's work (the 5.5M-parameter peer model, 639 MMLU questions, 0-shot).

Each run is a fresh world (empty warehouse and Dagster home, bench/end_to_end.py's our_world) and a fresh process.
A sampler thread in the command's process reads its main thread's stack every 5 ms and puts each sample in one
category, the first of CATEGORIES whose function is on the stack (waiting on the model first, then Great
Expectations, imports, Dagster's storage, ...). Wall time per category, and the time before the first model request
and after the last, are what a user pays; the helper processes (the model's, Great Expectations', the plots') run
on the other core and show here only where the command waits on them.

--before REV also times that revision (a git worktree of it, imported first through PYTHONPATH), alternating with
this checkout run by run, so both sides see the same machine.

usage: .venv/bin/python bench/fixed_cost.py [--runs 3] [--shots 0] [--before REV] [--json FILE] [--md FILE]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from end_to_end import BENCH, our_world  # noqa: E402
from peers import PEER_MODEL, checkouts, require  # noqa: E402

# (label, file suffix, function): a sample counts for the first one on its stack
CATEGORIES = [
    ("waiting on the model process", "clients/model_process.py", "_call"),
    ("Great Expectations validations", "quality/gx.py", "validate"),
    ("imports", "<frozen importlib._bootstrap>", "_find_and_load"),
    ("Dagster: event log writes", "sqlite_event_log.py", "store_event"),
    ("Dagster: run creation", "run_domain.py", "create_run_for_job"),
    ("Dagster: instance (DAGSTER_HOME)", "defs/local.py", "instance"),
    ("definitions", "defs/definitions.py", "build_definitions"),
    ("dataset step", "stages/dataset.py", "build_dataset"),
    ("prompts step", "stages/prompts.py", "build_prompts"),
    ("completions step (ours)", "stages/completions.py", "run_completions"),
    ("scores step", "stages/scores.py", "compute_scores"),
    ("checks (reading the tables)", "quality/__init__.py", "check_stage"),
    ("summaries step", "stages/summaries.py", "summarize"),
    ("report", "report/__init__.py", "build_report"),
    ("leaderboard printed", "cli/evaluate.py", "_finish"),
    ("Dagster: step execution", "dagster/_core/execution/plan/execute_step.py", "core_dagster_event_sequence_for_step"),
    ("Dagster: run around the steps", "job_definition.py", "execute_in_process"),
]
MODEL = CATEGORIES[0][0]


def _category(frame) -> str:
    on_stack = set()
    while frame is not None:
        on_stack.add((frame.f_code.co_filename, frame.f_code.co_name))
        frame = frame.f_back
    for label, suffix, function in CATEGORIES:
        if any(name == function and path.endswith(suffix) for path, name in on_stack):
            return label
    return "other (start-up, configuration, freshness)"


def inner(out: Path, argv: list[str]) -> None:
    """Runs the CLI in this process with the sampler on, then writes the samples to `out`."""
    main_thread, samples, started, done = threading.main_thread().ident, [], time.perf_counter(), threading.Event()

    def sample():
        while not done.wait(0.005):
            frame = sys._current_frames().get(main_thread)
            if frame is not None:
                samples.append((time.perf_counter() - started, _category(frame)))

    def write():  # at exit: the CLI ends the process itself (os._exit after the exit handlers)
        done.set()
        out.write_text(json.dumps({"wall": time.perf_counter() - started, "samples": samples}))

    atexit.register(write)
    threading.Thread(target=sample, daemon=True).start()
    from holistic_dagster.cli import main

    sys.argv = ["holistic", *argv]
    main()


def breakdown(samples: list, wall: float) -> dict:
    """Seconds per category (each sample stands for the time since the one before), and before/after the model."""
    seconds, previous = {}, 0.0
    for at, label in samples:
        seconds[label] = seconds.get(label, 0.0) + at - previous
        previous = at
    model_at = [at for at, label in samples if label == MODEL]
    first, last = (model_at[0], model_at[-1]) if model_at else (wall, wall)
    return {"wall": wall, "before_first_request": first, "after_last_request": wall - last, "seconds": seconds}


def one_run(checkout: Path, root: Path, shots: int) -> dict:
    env, version = our_world(root, shots, BENCH)
    env = {**os.environ, **env, "PYTHONPATH": str(checkout)}
    out = root / "samples.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--inner", str(out), "evaluate", "--model", "peer",
               "--version", version]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, env=env, cwd=checkout, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process_wall = time.perf_counter() - started
    data = json.loads(out.read_text())
    return {"process_wall": process_wall, **breakdown(data["samples"], data["wall"])}


def summarize(runs: list[dict]) -> dict:
    labels = sorted({label for r in runs for label in r["seconds"]})
    median = lambda values: round(statistics.median(values), 2)  # noqa: E731
    return {
        "runs": len(runs),
        "process_wall": median([r["process_wall"] for r in runs]),
        "before_first_request": median([r["before_first_request"] for r in runs]),
        "after_last_request": median([r["after_last_request"] for r in runs]),
        "seconds": {label: median([r["seconds"].get(label, 0.0) for r in runs]) for label in labels},
    }


def markdown(sides: dict[str, dict], shots: int) -> str:
    names = list(sides)
    lines = [
        f"# A cold `holistic evaluate` on peerbench's work ({shots}-shot, 639 questions): where the time goes",
        "",
        f"Median of {sides[names[0]]['runs']} runs per side, alternating, in one sitting; seconds of the command's "
        "main thread, each 5 ms sample put in its first category (bench/fixed_cost.py).",
        "",
        "| | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for key, title in [("process_wall", "whole command (process start to exit)"),
                       ("before_first_request", "before the first model request"),
                       ("after_last_request", "after the last model request")]:  # fmt: skip
        lines.append(f"| **{title}** | " + " | ".join(f"{sides[n][key]:.2f}" for n in names) + " |")
    labels = sorted({label for side in sides.values() for label in side["seconds"]},
                    key=lambda label: -sides[names[-1]]["seconds"].get(label, 0.0))  # fmt: skip
    for label in labels:
        lines.append(f"| {label} | " + " | ".join(f"{sides[n]['seconds'].get(label, 0.0):.2f}" for n in names) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shots", type=int, default=0)
    parser.add_argument("--before", default=None, help="a git revision to time alongside this checkout")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "fixed_cost.json")
    parser.add_argument("--md", type=Path, default=HERE / "results" / "fixed_cost.md")
    args = parser.parse_args()
    require(PEER_MODEL, "peer model")
    with checkouts(args.before, "fixed_cost_before") as code:
        runs = {name: [] for name in code}
        for n in range(args.runs):
            for name, checkout in code.items():
                runs[name].append(one_run(checkout, BENCH / "fixed_cost_world", args.shots))
                print(f"run {n + 1} {name}: {runs[name][-1]['process_wall']:.1f} s", file=sys.stderr)
    sides = {name: summarize(r) for name, r in runs.items()}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"shots": args.shots, "sides": sides, "runs": runs}, indent=2))
    args.md.write_text(markdown(sides, args.shots))
    print(markdown(sides, args.shots))
    print(f"written: {args.json}, {args.md}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--inner":
        inner(Path(sys.argv[2]), sys.argv[3:])
    else:
        main()
