"""Results exchange with HELM, measured with HELM's own tools (crfm-helm 0.5.16 from ../shared/peerbench):

1. round trip: `helm-run` (two models, several scenarios) -> `holistic import-helm` -> `holistic export --format
   helm` -> `helm-summarize` on HELM's runs and on ours: every per-instance value and every cell of HELM's
   leaderboard tables equal;
2. beside ours: HELM's SmolLM2 runs imported into the suite version our own SmolLM2 run evaluated (the same
   instances, conventions: helm): `holistic compare` pairs them instance by instance;
3. ours in HELM: that version exported (our model and HELM's) and read by `helm-summarize`: our model's row in
   HELM's tables against HELM's row for the same model.

Writes bench/results/helm_exchange.{json,md}; with --fixtures, the committed test fixtures: HELM's runs of
synthetic reasoning (HELM generates its instances: no dataset text) for both models, under tests/helm/fixtures/.

usage: .venv/bin/python bench/helm_exchange.py [--n 10] [--fixtures] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from helm_parity import (
    CASES,
    PLACERS,
    _empty_punkt,
    _peer_env,
    _with_arg,
    evaluate_ours,
)
from peers import BENCH, HELM_RUN, REPO, SHARED, checkpoint_of, require

FIXTURES = REPO / "tests" / "helm" / "fixtures" / "helm_runs"
FIXTURE_SUITE = "exchange"
KEPT_FILES = ("run_spec.json", "scenario_state.json", "per_instance_stats.json", "stats.json", "scenario.json")
# HELM run entries of the round trip (the model is appended); {n} instances each
ROUND_TRIP = {
    "mmlu:subject=computer_security,method=multiple_choice_joint": "mmlu",
    "mmlu:subject=us_foreign_policy,method=multiple_choice_joint": "mmlu",
    "boolq:max_train_instances=zero": "boolq",
    "synthetic_reasoning:mode=pattern_match": "none",
}
FIXTURE_ENTRIES = {
    "synthetic_reasoning:mode=pattern_match": "none",
    "synthetic_reasoning:mode=variable_substitution": "none",
}
E2E_CASES = ("mmlu joint 5-shot", "boolq 0-shot")
E2E_MMLU = ("computer_security", "us_foreign_policy")
OUR_MODEL = "smollm2-135m-instruct"
HELM_SMOLLM2 = "SmolLM2 Instruct (135M)"  # how HELM's tables name huggingface/smollm2-135m-instruct
# why a column of HELM's tables differs between HELM's run of SmolLM2 and ours (docs/how-to/helm-exchange.md)
WHY = {
    "calibration": "HELM's local Hugging Face client gives generated tokens log-probability 0 (max prob 1.0), so "
    "HELM computes no ECE or selective accuracy; ours has the tokens' log-probabilities",
    "Robustness": "the suite has no perturbations: HELM then writes the worst case over the original alone (its "
    "EM), ours writes none",
    "Fairness": "as Robustness",
    "# prompt tokens": "HELM counts the prompt's tokens before the chat template, ours with it",
    "time": "wall-clock timing of two runs on a shared machine",
}


def helm_models() -> list[Path]:
    """The two models HELM runs: SmolLM2 (the demo's converted checkpoint) and the peer environment's random one,
    each in a folder whose name becomes HELM's model name (huggingface/<folder>)."""
    return [checkpoint_of(OUR_MODEL), BENCH / "model"]


def helm_run(entries: dict[str, str], models: list[Path], n: int, work: Path, suite: str) -> Path:
    """runs/<suite> of one helm-run over every entry x model (each model linked under its HELM name)."""
    out = work / "benchmark_output"
    for place in dict.fromkeys(entries.values()):
        PLACERS[place](SHARED / "data", out)
    names = []
    for model in models:
        # HELM names a local model by its folder, and helm-summarize looks that folder up again from its
        # working directory: the links live in the folder both commands run in
        link = work / (OUR_MODEL if model.name.startswith("SmolLM2") else "peer-random")
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(model)
        names.append(link)
    runs = [_with_arg(e, f"model=huggingface/{m.name}") for e in entries for m in names]
    cmd = [str(BENCH / "venv-helm" / "bin" / "helm-run"), "--enable-local-huggingface-models", *map(str, names)]
    cmd += ["-r", *runs, "--suite", suite, "-m", str(n), "-o", str(out), "--local-path", str(work / "prod_env")]
    _run([*cmd, "--exit-on-error"], {**os.environ, **_peer_env()}, work)
    return out / "runs" / suite


def helm_summarize(output: Path, suite: str, cwd: Path) -> dict[str, tuple[list, list[list]]]:
    """{group table title: (header, rows)} that helm-summarize writes for a suite (run in `cwd`, beside the model
    links)."""
    _run([str(BENCH / "venv-helm" / "bin" / "helm-summarize"), "--suite", suite, "-o", str(output)],
         {**os.environ, **_peer_env()}, cwd)  # fmt: skip
    tables = {}
    for path in sorted((output / "runs" / suite / "groups").glob("*.json")):
        for table in json.loads(path.read_text()):
            key = f"{path.stem}: {table['title']}"
            header = [h["value"] for h in table["header"]]
            tables[key] = (header, [[c.get("value") for c in row] for row in table["rows"]])
    return tables


def holistic(*args: str, env: dict[str, str] | None = None) -> str:
    return _run([str(REPO / ".venv" / "bin" / "holistic"), *args], env or dict(os.environ), REPO)


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def per_instance_values(runs: Path) -> dict[tuple, float]:
    """{(run, instance, metric, split): value} of every per-instance stat with a value, perturbations aside."""
    out = {}
    for path in runs.glob("*/per_instance_stats.json"):
        for entry in json.loads(path.read_text()):
            for s in entry["stats"]:
                if s["count"] and "perturbation" not in s["name"]:
                    out[(path.parent.name, entry["instance_id"], s["name"]["name"], s["name"]["split"])] = (
                        s["sum"] / s["count"]
                    )
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a))
    return a == b


def compare_tables(helm: dict[str, tuple], ours: dict[str, tuple]) -> dict:
    cells = equal = 0
    first = ""
    for title, (_, rows) in helm.items():
        for i, row in enumerate(rows):
            other = ours.get(title, ([], []))[1]
            for j, value in enumerate(row):
                cells += 1
                mine = other[i][j] if i < len(other) and j < len(other[i]) else "(missing)"
                if _same(value, mine):
                    equal += 1
                elif not first:
                    first = f"{title} row {i} column {j}: HELM {value!r}, exported {mine!r}"
    return {"cells": cells, "equal": equal, "first_difference": first}


def round_trip(n: int, work: Path, models: list[Path]) -> dict:
    started = time.perf_counter()
    runs = helm_run(ROUND_TRIP, models, n, work / "helm", "trip")
    helm_s = time.perf_counter() - started
    db = work / "trip.duckdb"
    started = time.perf_counter()
    holistic("import-helm", str(runs), "--db", str(db))
    import_s = time.perf_counter() - started
    holistic("export", "--format", "helm", "--version", "helm-trip", "--suite", "trip", "--out",
             str(work / "exported"), "--db", str(db))  # fmt: skip
    before, after = per_instance_values(runs), per_instance_values(work / "exported" / "runs" / "trip")
    kept = sum(1 for k, v in before.items() if k in after and _same(v, after[k]))
    cwd = work / "helm"
    tables = compare_tables(
        helm_summarize(runs.parent.parent, "trip", cwd), helm_summarize(work / "exported", "trip", cwd)
    )
    return {
        "runs": len(list(runs.glob("*/run_spec.json"))),
        "per_instance_values": len(before),
        "per_instance_values_kept": kept,
        "missing": [list(k) for k in before if k not in after][:5],
        "summary_tables": tables,
        "helm_run_s": round(helm_s, 1),
        "import_s": round(import_s, 1),
    }


def beside_ours(n: int, work: Path, models: list[Path]) -> dict:
    """HELM's SmolLM2 runs imported into the suite version our SmolLM2 run evaluated, compared pairwise; that
    version exported and summarized by HELM."""
    from dataclasses import replace

    cases = [replace(c, subsets=E2E_MMLU) if c.scenario == "mmlu" else c for c in CASES if c.name in E2E_CASES]
    entries = {c.helm_entry.format(subset=s): c.place for c in cases for s in c.subsets}
    runs = helm_run(entries, models[:1], n, work / "helm", "beside")
    db, ours, env = evaluate_ours(cases, n, work, OUR_MODEL)
    holistic("import-helm", str(runs), "--version", "helm-e2e", "--db", str(db), env=env)
    theirs = f"huggingface/{OUR_MODEL}"
    compared = _compare(db, env, ours, theirs)
    holistic("export", "--format", "helm", "--version", "helm-e2e", "--suite", "beside", "--out",
             str(work / "exported"), "--db", str(db), env=env)  # fmt: skip
    tables = helm_summarize(work / "exported", "beside", work / "helm")
    cells = equal = 0
    differing: dict[str, list] = {}
    for title, (header, table) in tables.items():
        rows = {row[0]: row[1:] for row in table}
        if ours not in rows or HELM_SMOLLM2 not in rows:
            continue
        for column, a, b in zip(header[1:], rows[ours], rows[HELM_SMOLLM2]):
            cells += 1
            if _same(a, b):
                equal += 1
            else:
                differing.setdefault(column, [a, b])
    return {"model": ours, "helm_model": theirs, "compare": compared, "summary_cells": cells,
            "summary_cells_equal": equal, "differing_columns": differing}  # fmt: skip


def _compare(db: Path, env: dict[str, str], a: str, b: str) -> list[dict]:
    os.environ.update({k: v for k, v in env.items() if k.startswith("HOLISTIC_")})
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.results.leaderboard import main_metrics
    from holistic_dagster.results.scores import compare_models
    from holistic_dagster.warehouse import open_warehouse

    warehouse = open_warehouse(db)
    main = main_metrics(warehouse, Catalog(Path(env["HOLISTIC_CATALOG"])), "helm-e2e")
    frame = compare_models(warehouse, "helm-e2e", a, b, main_metric=main)
    accuracy = frame[frame["family"] == "accuracy"]
    return [
        {"scenario": r.scenario, "metric": r.metric, "n": int(r.n), "ours": round(r.mean_a, 4),
         "helm": round(r.mean_b, 4), "diff": r.diff, "p": r.p_value}
        for r in accuracy.itertuples()
    ]  # fmt: skip


def write_fixtures(work: Path, models: list[Path]) -> None:
    runs = helm_run(FIXTURE_ENTRIES, models, 4, work / "fixtures", FIXTURE_SUITE)
    target = FIXTURES / FIXTURE_SUITE
    shutil.rmtree(target, ignore_errors=True)
    for run in sorted(runs.glob("*/run_spec.json")):
        folder = target / run.parent.name
        folder.mkdir(parents=True)
        for name in KEPT_FILES:
            shutil.copy(run.parent / name, folder / name)
    print(f"wrote {target}")


def render(result: dict) -> str:
    trip, beside = result["round_trip"], result["beside_ours"]
    t = trip["summary_tables"]
    lines = [
        "# HELM results exchange",
        "",
        f"crfm-helm {result['helm']}, {result['n']} instances per run, {result['date']} (`bench/helm_exchange.py`).",
        "",
        "## Round trip: helm-run -> holistic import-helm -> holistic export --format helm -> helm-summarize",
        "",
        f"- {trip['runs']} HELM runs (MMLU computer_security and us_foreign_policy joint, BoolQ 0-shot, synthetic "
        "reasoning pattern_match; SmolLM2-135M-Instruct and the peer environment's random model)",
        f"- per-instance values kept: **{trip['per_instance_values_kept']} of {trip['per_instance_values']}**",
        f"- cells of helm-summarize's tables equal (HELM's runs against the exported ones): **{t['equal']} of "
        f"{t['cells']}** {t['first_difference']}",
        f"- helm-run {trip['helm_run_s']} s, import {trip['import_s']} s",
        "",
        f"## HELM's {beside['helm_model']} beside our {beside['model']} (suite helm-e2e, conventions: helm)",
        "",
        "| scenario | metric | n | ours | HELM | diff | p |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {r['scenario']} | {r['metric']} | {r['n']} | {r['ours']} | {r['helm']} | {r['diff']:+.4f} | "
            f"{r['p']:.3f} |"
            for r in beside["compare"]
        ),
        "",
        "helm-summarize on the exported version (ours and HELM's SmolLM2 in one suite): "
        f"**{beside['summary_cells_equal']} of {beside['summary_cells']}** cells of our model's rows equal HELM's row "
        "for the same model. The others:",
        "",
        "| column | ours | HELM | why |",
        "|---|---|---|---|",
        *(f"| {c} | {_fmt(a)} | {_fmt(b)} | {_why(c)} |" for c, (a, b) in beside["differing_columns"].items()),
        "",
    ]
    return "\n".join(lines)


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _why(column: str) -> str:
    if any(k in column for k in ("ECE", "Max prob", "Selective", "Acc@10")):
        return WHY["calibration"]
    if column == "Mean win rate":
        return "follows from the columns it ranks"
    return next((why for key, why in WHY.items() if key in column), "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="max_eval_instances per run")
    parser.add_argument("--fixtures", action="store_true", help=f"write {FIXTURES.relative_to(REPO)}")
    parser.add_argument("--work", help="keep the runs in this (new) folder instead of a temporary one")
    args = parser.parse_args()
    require(HELM_RUN, "HELM")
    os.environ.setdefault("HOLISTIC_DATA_DIR", str(SHARED / "data"))
    os.environ["HOLISTIC_OFFLINE"] = "1"
    _empty_punkt()
    models = helm_models()
    with tempfile.TemporaryDirectory(prefix="helm-exchange-") as scratch:
        work = Path(args.work or scratch)
        work.mkdir(parents=True, exist_ok=True)
        if args.fixtures:
            write_fixtures(work, models)
        result = {"helm": "0.5.16", "n": args.n, "date": time.strftime("%Y-%m-%d")}
        result["round_trip"] = round_trip(args.n, work / "trip", models)
        print(json.dumps(result["round_trip"], indent=1), flush=True)
        result["beside_ours"] = beside_ours(args.n, work / "beside", models)
        print(json.dumps(result["beside_ours"], indent=1), flush=True)
    out = Path(__file__).parent / "results"
    (out / "helm_exchange.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "helm_exchange.md").write_text(render(result))
    print(f"wrote {out / 'helm_exchange.md'}")


if __name__ == "__main__":
    main()
