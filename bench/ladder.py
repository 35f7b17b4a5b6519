"""Benchmark: known-groups validity. Does the evaluation recover the known order of a ladder of real models?

The ladder (resources/models.yaml; installed by scripts/install-ladder, about 1.9 GB) is evaluated on llama.cpp
with the random-weight floor beside it, through the real pipeline (`holistic evaluate`, one model at a time, in a
throwaway catalog whose one suite is SUITE below), and the adjacent rungs of the expected order (from the
models' published results: larger Qwen > smaller Qwen > SmolLM2-135M and Gemma-3-270M > the floor) are compared
instance by instance with the product's paired test (results.scores.compare_models: the paired difference, its
bootstrap CI and a sign-flip permutation test), Holm-corrected over all the comparisons of the run.

Throughput: for each llama.cpp model, the MMLU requests the pipeline sent are sent again, with the same bodies and
the same concurrency, straight to llama.cpp's own server (xllamacpp, the same settings) by a bare HTTP client; our
completions step over the same requests (from the Dagster event log of the same run, the model already loaded as
for the bare side) against it is our overhead as a ratio.

Judges: the ladder's instruct models, as chat models, measured by the product's judge qualification
(stages.judging.qualify, the arena's template): the issue's trial found that none can judge; they must be refused.

usage: .venv/bin/python bench/ladder.py [--scale 1.0] [--models M ...] [--skip-evaluation] [--skip-throughput]
                                        [--skip-judges] [--judge-max-tokens 256] [--root DIR]
Writes bench/results/ladder.{json,md} (with --scale below 1: ladder_pilot.{json,md}).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from end_to_end import timed  # noqa: E402
from peers import BENCH  # noqa: E402

VERSION = "ladder"
# the rungs of the expected order, best first; models on one rung are not expected to differ
RUNGS = (
    ("qwen2.5-coder-1.5b-instruct",),
    ("qwen2.5-coder-0.5b-instruct",),
    ("smollm2-135m-instruct-llamacpp", "gemma-3-270m"),
    ("demo-gpt2-untrained",),
)
FLOOR = "demo-gpt2-untrained"
MMLU_SUBJECTS = (
    "high_school_geography", "high_school_psychology", "high_school_biology", "high_school_government_and_politics",
    "high_school_macroeconomics", "miscellaneous", "us_foreign_policy", "human_aging", "computer_security",
    "college_medicine",
)  # fmt: skip
# HELM's formats, 0-shot (in-context examples would multiply the prompts' length on a 2-core CPU); sample sizes
# (per subject for MMLU) at scale 1, chosen so that the whole ladder runs in about an hour on 2 cores
SIZES = {"mmlu": 25, "openbookqa": 250, "boolq": 150, "imdb": 40}
# IMDB by log-likelihood of each label (0-shot, the models answer the letter format with "The ..."; a review is
# 300 tokens, read once per label)
SUITE = """version: {version}
description: The model ladder (bench/ladder.py), HELM's formats 0-shot, no perturbations.
conventions: helm
scenarios:
  mmlu:
    max_eval_instances: {mmlu}
    max_train_instances: 0
    subsets: [{subjects}]
  openbookqa: {{max_eval_instances: {openbookqa}, method: multiple_choice_joint, max_train_instances: 0}}
  boolq: {{max_eval_instances: {boolq}, max_train_instances: 0}}
  imdb: {{max_eval_instances: {imdb}, method: multiple_choice_separate_original, max_train_instances: 0}}
"""
# BoolQ 0-shot: no example shows that the answer is one word, so "Yes, there is an ..." is read by its prefix
# (HELM's quasi_prefix_exact_match, which the scenario reports beside its main quasi_exact_match)
METRIC_OVERRIDES = {"boolq": "quasi_prefix_exact_match"}
THROUGHPUT_SUITE = """version: {version}
description: MMLU's requests for the throughput comparison (bench/ladder.py)
conventions: helm
scenarios:
  mmlu: {{max_eval_instances: 5, max_train_instances: 0, subsets: [{subjects}]}}
"""


def world(root: Path, version: str, suite: str) -> dict[str, str]:
    """A catalog with one suite, the repository's registry and backend settings, a warehouse and a Dagster home
    under `root` (kept between runs: a model already evaluated is not evaluated again)."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "assets").exists():
        shutil.copytree(REPO / "assets", root / "assets")
        for path in (root / "assets" / "suites").glob("*.yaml"):
            path.unlink()
    (root / "assets" / "suites" / f"{version}.yaml").write_text(suite)
    (root / "dagster").mkdir(exist_ok=True)
    return {
        "HOLISTIC_CATALOG": str(root / "assets"),
        "HOLISTIC_RESOURCES": str(REPO / "resources"),
        "HOLISTIC_WAREHOUSE": str(root / "warehouse.duckdb"),
        "HOLISTIC_DATA_DIR": os.environ.get("HOLISTIC_DATA_DIR", str(REPO.parent / "shared" / "data")),
        "DAGSTER_HOME": str(root / "dagster"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def evaluate(models: list[str], root: Path, env: dict[str, str], version: str = VERSION) -> dict[str, float]:
    seconds = {}
    for model in models:
        command = [str(REPO / ".venv" / "bin" / "holistic"), "evaluate", "--model", model, "--version", version]
        seconds[model] = timed(command, env, root / f"{model}.log")
        print(f"{model}: evaluated in {seconds[model]:.0f} s", file=sys.stderr, flush=True)
    return seconds


def comparisons(env: dict[str, str], models: list[str]) -> tuple[list[dict], dict]:
    """Accuracy per model and scenario, and the paired tests between adjacent rungs (each model of a rung
    against each of the next), with Holm-adjusted p-values."""
    from holistic_dagster.alerts.gate import holm
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.results.scores import compare_models, original_scores
    from holistic_dagster.warehouse import Warehouse

    warehouse = Warehouse(Path(env["HOLISTIC_WAREHOUSE"]))
    main = Catalog(Path(env["HOLISTIC_CATALOG"])).main_metrics(VERSION) | METRIC_OVERRIDES
    scores = original_scores(warehouse, VERSION, models)
    accuracy = {}
    for (model, scenario), part in scores[scores["family"] == "accuracy"].groupby(["model", "scenario"]):
        values = part[part["metric"] == main[scenario]]["value"]
        accuracy.setdefault(model, {})[scenario] = {"value": float(values.mean()), "n": int(len(values))}
    rungs = [[m for m in rung if m in models] for rung in RUNGS]
    rungs = [rung for rung in rungs if rung]
    tests = []
    for upper, lower in zip(rungs, rungs[1:]):
        for better in upper:
            for worse in lower:
                frame = compare_models(warehouse, VERSION, worse, better, main_metric=main)
                frame = frame[(frame["family"] == "accuracy") & (frame["perturbation"] == "")]
                for row in frame.itertuples():
                    tests.append({"better": better, "worse": worse, "scenario": row.scenario, "metric": row.metric,
                                  "n": int(row.n), "diff": row.diff, "ci": [row.ci_low, row.ci_high],
                                  "p": row.p_value})  # fmt: skip
    for test, adjusted in zip(tests, holm([t["p"] for t in tests])):
        test["p_holm"] = adjusted
        test["separated"] = bool(adjusted < 0.05 and test["diff"] > 0)
        test["reversed"] = bool(adjusted < 0.05 and test["diff"] < 0)
    return tests, accuracy


def mmlu_requests(env: dict[str, str], version: str, model: str) -> list[dict]:
    from holistic_dagster.warehouse import Warehouse

    warehouse = Warehouse(Path(env["HOLISTIC_WAREHOUSE"]))
    frame = warehouse.df(
        "SELECT prompt, max_tokens, temperature, stop FROM prompts WHERE version = ? AND model = ? "
        "AND scenario = 'mmlu' AND kind = 'generate' ORDER BY request_id",
        [version, model],
    )
    return [
        {"prompt": r.prompt, "max_tokens": int(r.max_tokens), "temperature": float(r.temperature),
         "stop": json.loads(r.stop), "logprobs": 5, "cache_prompt": False}
        for r in frame.itertuples()
    ]  # fmt: skip


def bare_seconds(model: str, bodies: list[dict]) -> float:
    """Wall seconds for llama.cpp's own server (the same settings as the backend's), loaded beforehand, to answer
    `bodies` sent by a plain HTTP client with as many requests in flight as the server has slots."""
    import httpx

    from holistic_dagster import settings
    from holistic_dagster.clients.checkpoints import gguf_file
    from holistic_dagster.clients.llamacpp_client import LlamaCppServer
    from holistic_dagster.config.deployment import Deployment

    spec = Deployment().model(model)
    server = LlamaCppServer(gguf_file(spec, settings.model_cache_dir()), n_ctx=spec.n_ctx, slots=spec.slots,
                            threads=spec.threads or os.cpu_count() or 1)  # fmt: skip
    try:
        with httpx.Client(base_url=server.base_url, timeout=600) as http:
            while http.get("/health").status_code != 200:
                time.sleep(0.1)

            def send(body: dict) -> None:
                http.post("/v1/completions", json=body).raise_for_status()

            started = time.perf_counter()
            with ThreadPoolExecutor(spec.max_concurrency) as pool:
                list(pool.map(send, bodies))
            return time.perf_counter() - started
    finally:
        server.close()


def our_mmlu_seconds(env: dict[str, str], model: str) -> float:
    """Our mmlu completions step for `model`, from the Dagster event log (its last successful run)."""
    from dagster import DagsterEventType, DagsterInstance, RunsFilter
    from dagster._core.instance.ref import InstanceRef

    instance = DagsterInstance.from_ref(InstanceRef.from_dir(env["DAGSTER_HOME"]))
    for run in instance.get_runs(RunsFilter()):  # newest first
        if model not in run.tags.get("dagster/partition", "").split("|"):
            continue
        started = None
        for record in instance.all_logs(run.run_id):
            event = record.dagster_event
            if event is None or event.step_key != "mmlu__completions":
                continue
            if event.event_type == DagsterEventType.STEP_START:
                started = record.timestamp
            elif event.event_type == DagsterEventType.STEP_SUCCESS and started is not None:
                return record.timestamp - started
    raise SystemExit(f"no successful mmlu completions step of {model} in {env['DAGSTER_HOME']}")


def throughput(root: Path, models: list[str]) -> list[dict]:
    """For each llama.cpp model, back to back: our pipeline on a fresh warehouse (MMLU, 5 questions a subject),
    then the same requests by the bare client."""
    from holistic_dagster.config.deployment import Deployment

    version = "ladder_throughput"
    if root.exists():
        shutil.rmtree(root)  # nothing cached: every request is sent
    env = world(root, version, THROUGHPUT_SUITE.format(version=version, subjects=", ".join(MMLU_SUBJECTS)))
    rows = []
    for model in models:
        if Deployment().model(model).backend != "llamacpp":
            continue
        evaluate([model], root, env, version)
        bodies = mmlu_requests(env, version, model)
        ours = our_mmlu_seconds(env, model)
        bare = bare_seconds(model, bodies)
        rows.append({"model": model, "requests": len(bodies), "ours_s": ours, "bare_s": bare, "ratio": ours / bare})
        print(f"{model}: ours {ours:.1f} s, bare {bare:.1f} s", file=sys.stderr, flush=True)
    return rows


# the ladder's instruct models as judges, laid out with their chat templates (how an instruct model is asked);
# Gemma-3-270M is a base model without one
JUDGES = ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct-llamacpp")


def judges(root: Path, names: list[str], max_tokens: int) -> list[dict]:
    """Each ladder judge measured by the product's qualification (stages.judging.qualify) with the arena's
    template, as `holistic arena` would before letting its verdicts into ratings."""
    import yaml

    from holistic_dagster.config.catalog import Catalog, QualificationSpec
    from holistic_dagster.config.deployment import Deployment
    from holistic_dagster.stages.context import StageContext
    from holistic_dagster.stages.judging import qualify
    from holistic_dagster.warehouse import Warehouse

    root.mkdir(parents=True, exist_ok=True)
    registry = yaml.safe_load((REPO / "resources" / "models.yaml").read_text())["models"]
    chat = {f"{name}-chat": {**registry[name], "chat": True} for name in names}
    (root / "models.yaml").write_text(yaml.safe_dump({"models": chat}))
    deployment = Deployment.of(models=root / "models.yaml", warehouse=root / "judges.duckdb")
    stage = StageContext(Warehouse(root / "judges.duckdb"), Catalog(REPO / "assets"), deployment)
    rows = []
    for judge in chat:
        started = time.perf_counter()
        measured, sent = qualify(stage, judge, "judge_pairwise.j2", max_tokens, QualificationSpec())
        per_source = stage.warehouse.df(
            "SELECT source, agreement, agreement_ci_low, agreement_ci_high, position_consistency, no_verdict, "
            "judgements FROM judge_qualifications WHERE judge = ? AND max_tokens = ?",
            [judge, max_tokens],
        ).set_index("source")
        rows.append({"judge": judge, "qualified": measured.qualified, "reason": measured.reason,
                     "max_tokens": max_tokens, "seconds": time.perf_counter() - started, "sent": sent,
                     "per_source": per_source.to_dict("index")})  # fmt: skip
        print(f"{judge}: {measured.label} ({rows[-1]['seconds']:.0f} s)", file=sys.stderr, flush=True)
    return rows


def markdown(result: dict) -> str:
    overrides = ", ".join(f"{k}: {v}" for k, v in result["metric_overrides"].items())
    lines = [f"Ladder on `{VERSION}` (scale {result['scale']}): accuracy (main metric; {overrides}), 0-shot", ""]
    scenarios = sorted({s for per in result["accuracy"].values() for s in per})
    lines.append("| model | " + " | ".join(f"{s} (n)" for s in scenarios) + " | evaluate s |")
    lines.append("|---|" + "---:|" * (len(scenarios) + 1))
    for rung in RUNGS:
        for model in rung:
            if model not in result["accuracy"]:
                continue
            cells = [f"{result['accuracy'][model][s]['value']:.3f} ({result['accuracy'][model][s]['n']})"
                     for s in scenarios]  # fmt: skip
            lines.append(f"| {model} | " + " | ".join(cells) + f" | {result['seconds'].get(model, 0):.0f} |")
    lines += ["", "Adjacent rungs, paired (better - worse), Holm-adjusted over all comparisons:", ""]
    lines.append("| better | worse | scenario | n | diff | 95% CI | p | p (Holm) | separated |")
    lines.append("|---|---|---|---:|---:|---|---:|---:|---|")
    for t in result["tests"]:
        verdict = "yes" if t["separated"] else ("REVERSED" if t["reversed"] else "no")
        ci = f"[{t['ci'][0]:+.3f}, {t['ci'][1]:+.3f}]"
        lines.append(f"| {t['better']} | {t['worse']} | {t['scenario']} | {t['n']} | {t['diff']:+.3f} | {ci} | "
                     f"{t['p']:.4f} | {t['p_holm']:.4f} | {verdict} |")  # fmt: skip
    if result["throughput"]:
        lines += ["", "Throughput on MMLU's requests: our completions step against a bare client on llama.cpp's own "
                  "server (same bodies, same concurrency, model loaded):", "",
                  "| model | requests | ours s | bare s | ours / bare |", "|---|---:|---:|---:|---:|"]  # fmt: skip
        for r in result["throughput"]:
            lines.append(f"| {r['model']} | {r['requests']} | {r['ours_s']:.1f} | {r['bare_s']:.1f} | "
                         f"{r['ratio']:.2f}x |")  # fmt: skip
    if result.get("judges"):
        lines += ["", "The ladder's instruct models as pairwise judges (chat template; battles with a known answer, "
                  "both orders; QualificationSpec: agreement >= 0.80 with its Wilson lower bound above 0.5, position "
                  "consistency >= 0.70):", "",
                  "| judge | max_tokens | agreement [95% CI] | TruthfulQA | XSTest human labels | position consistency "
                  "| no verdict | decision |", "|---|---:|---|---:|---:|---:|---:|---|"]  # fmt: skip
        for j in result["judges"]:
            a, t, x = (j["per_source"][k] for k in ("all", "truthfulqa", "xstest_human_labels"))
            lines.append(f"| {j['judge']} | {j['max_tokens']} | {a['agreement']:.2f} [{a['agreement_ci_low']:.2f}, "
                         f"{a['agreement_ci_high']:.2f}] | {t['agreement']:.2f} | {x['agreement']:.2f} | "
                         f"{a['position_consistency']:.2f} | {a['no_verdict']}/{a['judgements']} | "
                         f"{'qualified' if j['qualified'] else 'refused'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the sample sizes")
    parser.add_argument("--models", nargs="+", default=[m for rung in RUNGS for m in rung])
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-evaluation", action="store_true", help="keep the last run's scores")
    parser.add_argument("--skip-judges", action="store_true")
    parser.add_argument("--judge-max-tokens", type=int, default=256, help="the arena's default")
    parser.add_argument("--root", type=Path, default=BENCH / "ladder")
    args = parser.parse_args()
    from holistic_dagster import settings
    from holistic_dagster.clients.registry import installed_models
    from holistic_dagster.config.deployment import Deployment

    _, missing = installed_models({m: Deployment().model(m) for m in args.models}, settings.model_cache_dir())
    if missing:
        raise SystemExit("; ".join(missing))
    root = args.root if args.scale == 1.0 else args.root.with_name(args.root.name + f"_scale{args.scale}")
    stem = "ladder" if args.scale == 1.0 else "ladder_pilot"
    previous = HERE / "results" / f"{stem}.json"
    result = json.loads(previous.read_text()) if previous.exists() else {"throughput": [], "seconds": {}}
    sizes = {name: max(1, round(n * args.scale)) for name, n in SIZES.items()}
    env = world(root, VERSION, SUITE.format(version=VERSION, subjects=", ".join(MMLU_SUBJECTS), **sizes))
    os.environ.update(env)
    if not args.skip_evaluation:  # (a model evaluated in an earlier run keeps its time: --models names the rest)
        result["seconds"] = result.get("seconds", {}) | evaluate(args.models, root, env)
    evaluated = [m for rung in RUNGS for m in rung if m in result["seconds"] or m in args.models]
    result["tests"], result["accuracy"] = comparisons(env, evaluated)
    result |= {"scale": args.scale, "version": VERSION, "metric_overrides": METRIC_OVERRIDES}
    if not args.skip_throughput:
        result["throughput"] = throughput(root.with_name(root.name + "_throughput"), args.models)
    if not args.skip_judges:
        names = [m for m in JUDGES if m in args.models]
        result["judges"] = judges(root.with_name(root.name + "_judges"), names, args.judge_max_tokens)
    (HERE / "results" / f"{stem}.json").write_text(json.dumps(result, indent=1))
    (HERE / "results" / f"{stem}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
