"""Benchmark: the user's whole command, ours against lm-evaluation-harness and HELM, side by side in one run.

The work is ../shared/peerbench's: the same 5.5M-parameter GPT-2-shaped random model and the same 639 MMLU test
questions (5 subjects), each tool in its default MMLU setup (ours and HELM: multiple_choice_joint, one generated
token per question; lm-eval: four log-likelihoods per question), 0-shot and 5-shot. Measured for each: the wall
time of the whole command (process start to exit); ours cold (empty warehouse and Dagster home) and warm (the
same command again, nothing changed), with where our time went (Dagster step durations); and the compute floor
(one forward pass per full prompt, no prefix reuse: peerbench's floor.py). Ratios are ours / theirs.

--model smollm2 runs the same work on the real SmolLM2-135M-Instruct (the registry's GGUF, converted once to a
transformers checkpoint that all three tools and the floor load), under $BENCH/smollm2; ratios on a real model
are what users feel. It is 25x the peer model's compute: 0-shot only by default. HELM lays a local model's
prompts out with its chat template when its tokenizer has one (SmolLM2's does) and lm-eval does not, so ours runs
both ways: plain against lm-eval and the floor, with the chat template against HELM (whose exact_match it should
then match).

Set the peers up first (about 5 minutes, needs the package registries): bash ../shared/peerbench/setup_peers.sh

usage: .venv/bin/python bench/end_to_end.py [--model peer|smollm2] [--shots 5 0] [--passes 1] [--skip-peers]
                                            [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from peers import BENCH, PEER_MODEL, PEERBENCH, REPO, checkpoint_of, require

HERE = Path(__file__).resolve().parent
# peerbench's floor.py reads the body of a GPT-2 model as `model.transformer`; a Llama-shaped one (SmolLM2) calls it
# `model.model`: the same computation under the name floor.py uses
FLOOR = """import runpy, sys, transformers
transformers.LlamaForCausalLM.transformer = property(lambda m: m.model)
sys.argv = [sys.argv[1], "--shots", sys.argv[2]]
runpy.run_path(sys.argv[0], run_name="__main__")"""
SUBJECTS = ("abstract_algebra", "anatomy", "college_physics", "high_school_geography", "global_facts")
SUITE = """version: {version}
description: peerbench's MMLU work, {shots}-shot (bench/end_to_end.py)
scenarios:
  mmlu:
    max_eval_instances: 1000  # per subject: all of its test questions (639 in all)
    max_train_instances: {shots}
    subsets: [{subjects}]
"""


def timed(command: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> float:
    started = time.perf_counter()
    out = log.open("w") if log else subprocess.DEVNULL
    try:
        done = subprocess.run(command, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT)
    finally:
        if log:
            out.close()
    elapsed = time.perf_counter() - started
    if done.returncode:
        tail = log.read_text()[-3000:] if log else ""
        raise SystemExit(f"{' '.join(command)} failed (exit {done.returncode})\n{tail}")
    return elapsed


def smollm2_bench() -> Path:
    """A $BENCH for the peer scripts whose `model` is SmolLM2 (converted once from the registry's GGUF), sharing
    the peer tools' virtual environments and task files."""
    checkpoint = checkpoint_of("smollm2-135m-instruct")
    root = BENCH / "smollm2"
    root.mkdir(exist_ok=True)
    links = {"model": checkpoint, **{name: BENCH / name for name in ("venv-lmeval", "venv-helm", "lmeval_task",
                                                                       "nltk_data", "hf_home")}}  # fmt: skip
    for name, target in links.items():
        if (root / name).is_symlink():
            (root / name).unlink()
        (root / name).symlink_to(target)
    return root


def our_world(root: Path, shots: int, bench: Path, chat: bool = False) -> tuple[dict[str, str], str]:
    """A catalog with one suite (the peer work), a registry with the peer model, an empty warehouse and Dagster
    home: what a user who evaluates their own model on MMLU sets up."""
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(REPO / "assets", root / "assets")
    for suite in (root / "assets" / "suites").glob("*.yaml"):
        suite.unlink()
    version = f"peer{shots}shot"
    (root / "assets" / "suites" / f"{version}.yaml").write_text(
        SUITE.format(version=version, shots=shots, subjects=", ".join(SUBJECTS))
    )
    (root / "resources").mkdir()
    shutil.copy(REPO / "resources" / "backends.yaml", root / "resources" / "backends.yaml")
    (root / "resources" / "models.yaml").write_text(
        f"models:\n  peer: {{backend: transformers, path: '{(bench / 'model').resolve()}', batch_size: 16, "
        f"chat: {str(chat).lower()}}}\n"
    )
    (root / "dagster").mkdir()
    env = {
        "HOLISTIC_CATALOG": str(root / "assets"),
        "HOLISTIC_RESOURCES": str(root / "resources"),
        "HOLISTIC_WAREHOUSE": str(root / "warehouse.duckdb"),
        "HOLISTIC_DATA_DIR": str(REPO.parent / "shared" / "data"),
        "DAGSTER_HOME": str(root / "dagster"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    return env, version


def step_seconds(dagster_home: Path, since: float) -> dict[str, float]:
    """Seconds per step kind (dataset, prompts, completions, scores, summaries) of the runs started after
    `since`, from the Dagster event log."""
    from dagster import DagsterEventType, DagsterInstance, RunsFilter
    from dagster._core.instance.ref import InstanceRef

    instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(dagster_home)))
    totals: dict[str, float] = {}
    for run in instance.get_runs(RunsFilter()):
        records = instance.all_logs(run.run_id)
        if not records or records[0].timestamp < since:
            continue
        started: dict[str, float] = {}
        for record in records:
            event = record.dagster_event
            if event is None or event.step_key is None:
                continue
            if event.event_type == DagsterEventType.ASSET_MATERIALIZATION and event.step_key.endswith("completions"):
                # the model's own compute (the client's batch times), as the floor measures it
                latency = event.step_materialization_data.materialization.metadata.get("total_latency_s")
                if latency is not None:
                    totals["model"] = totals.get("model", 0.0) + float(latency.value)
            elif event.event_type == DagsterEventType.STEP_START:
                started[event.step_key] = record.timestamp
            elif event.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
                kind = event.step_key.split("__")[-1]
                if kind not in ("dataset", "prompts", "completions", "scores"):
                    kind = "summaries"
                totals[kind] = totals.get(kind, 0.0) + record.timestamp - started.pop(event.step_key)
    return totals


def ours(shots: int, root: Path, bench: Path, chat: bool = False) -> dict:
    env, version = our_world(root, shots, bench, chat)
    command = [str(REPO / ".venv" / "bin" / "holistic"), "evaluate", "--model", "peer", "--version", version]
    result = {}
    for label in ("cold", "warm"):
        since = time.time()
        result[label] = timed(command, env, root / f"{label}.log")
        steps = step_seconds(root / "dagster", since)
        result[f"{label}_steps"] = {k: round(v, 2) for k, v in sorted(steps.items())}
    import duckdb

    with duckdb.connect(env["HOLISTIC_WAREHOUSE"], read_only=True) as con:
        result["accuracy"], result["n"] = con.execute(
            "SELECT value, count FROM leaderboard WHERE family = 'accuracy' AND metric = 'exact_match' "
            "AND perturbation = '' AND model = 'peer'"
        ).fetchone()
    return result


def peers(shots: int, bench: Path) -> dict:
    group = "mmlu_local_5shot" if shots == 5 else "mmlu_local"
    logs = bench / "e2e_logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {"BENCH": str(bench)}
    lm_eval = timed(
        ["bash", str(PEERBENCH / "run_lmeval.sh"), f"e2e_lmeval_{shots}shot", group, "16"],
        env,
        log=logs / f"lmeval_{shots}.log",
    )
    helm = timed(["bash", str(PEERBENCH / "run_helm.sh"), f"e2e_helm_{shots}shot", str(shots), "4"], env,
                 log=logs / f"helm_{shots}.log")  # fmt: skip
    floor_out = subprocess.run(
        [str(bench / "venv-lmeval" / "bin" / "python"), "-c", FLOOR, str(PEERBENCH / "floor.py"), str(shots)],
        capture_output=True, text=True, check=True, env={**os.environ, **env},
    ).stdout  # fmt: skip
    fields = dict(item.split("=") for item in floor_out.split())
    return {"lm_eval": lm_eval, "helm": helm, "floor_forward": float(fields["forward_s"])}


def helm_exact_match(bench: Path, shots: int) -> tuple[float, int]:
    """HELM's exact_match over all questions of its last run (from its per-instance stats)."""
    runs = bench / "runs" / f"e2e_helm_{shots}shot" / "benchmark_output" / "runs" / "peerbench"
    values = [
        stat["sum"] / stat["count"]
        for path in runs.glob("mmlu:*/per_instance_stats.json")
        for instance in json.loads(path.read_text())
        for stat in instance["stats"]
        if stat["name"]["name"] == "exact_match" and not stat["name"].get("perturbation")
    ]
    return sum(values) / len(values), len(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("peer", "smollm2"), default="peer")
    parser.add_argument("--shots", type=int, nargs="+", default=None, help="default: 5 0 (peer), 0 (smollm2)")
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--skip-peers", action="store_true", help="time ours only")
    parser.add_argument("--json", type=Path, default=None, help="default: results/end_to_end[_smollm2].json")
    args = parser.parse_args()
    shots_list = args.shots or ([5, 0] if args.model == "peer" else [0])
    json_path = args.json or HERE / "results" / f"end_to_end{'' if args.model == 'peer' else '_smollm2'}.json"
    if not args.skip_peers:
        require(BENCH / "venv-helm", "HELM")
    require(PEER_MODEL, "peer model")
    bench = smollm2_bench() if args.model == "smollm2" else BENCH
    rows = []
    for run in range(args.passes):
        for shots in shots_list:
            row = {"pass": run + 1, "model": args.model, "shots": shots, **ours(shots, bench / "e2e_ours", bench)}
            if args.model == "smollm2":
                # HELM lays a local model's prompts out with its chat template when the tokenizer has one (SmolLM2's
                # does); lm-eval and the floor do not: ours both ways, each compared with the peer that does the same
                chat = ours(shots, bench / "e2e_ours_chat", bench, chat=True)
                row.update({f"chat_{key}": value for key, value in chat.items()})
            if not args.skip_peers:
                row.update(peers(shots, bench))
                row["helm_accuracy"], row["helm_n"] = helm_exact_match(bench, shots)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print(
        "| pass | shots | ours cold s | ours warm s | lm-eval s | HELM s | cold/lm-eval | cold/HELM | warm/cold "
        "| floor s | our model s / floor | our fixed s (share of cold) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        helm_ours = r.get("chat_cold", r["cold"])  # the run that did HELM's work
        cells = [str(r["pass"]), str(r["shots"]), f"{r['cold']:.1f}", f"{r['warm']:.1f}"]
        # fixed cost as the issue counts it: all but the completions and scores steps (start-up, dataset,
        # prompts, summaries, Dagster's own run set-up)
        fixed = r["cold"] - r["cold_steps"].get("completions", 0.0) - r["cold_steps"].get("scores", 0.0)
        if "lm_eval" in r:
            model_s = r["cold_steps"].get("model", 0.0)
            cells += [f"{r['lm_eval']:.1f}", f"{r['helm']:.1f}", f"{r['cold'] / r['lm_eval']:.2f}x",
                      f"{helm_ours / r['helm']:.2f}x", f"{r['warm'] / r['cold']:.2f}", f"{r['floor_forward']:.1f}",
                      f"{model_s / r['floor_forward']:.2f}x", f"{fixed:.1f} ({fixed / r['cold']:.0%})"]  # fmt: skip
        else:
            cells += [
                "-",
                "-",
                "-",
                "-",
                f"{r['warm'] / r['cold']:.2f}",
                "-",
                "-",
                f"{fixed:.1f} ({fixed / r['cold']:.0%})",
            ]
        print("| " + " | ".join(cells) + " |")
        print(f"  ours {r['shots']}-shot: accuracy {r['accuracy']:.4f} (n={r['n']}); cold steps {r['cold_steps']}; "
              f"warm steps {r['warm_steps']}")  # fmt: skip
        if "chat_cold" in r:
            print(f"  ours with the chat template (HELM's layout; cold/HELM above): cold {r['chat_cold']:.1f} s, "
                  f"warm {r['chat_warm']:.1f} s, exact_match {r['chat_accuracy']:.4f} (n={r['chat_n']}); "
                  f"cold steps {r['chat_cold_steps']}")  # fmt: skip
        if "helm_accuracy" in r:
            print(f"  HELM exact_match {r['helm_accuracy']:.4f} (n={r['helm_n']})")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(rows, indent=2))
    print(f"written: {json_path}")


if __name__ == "__main__":
    main()
