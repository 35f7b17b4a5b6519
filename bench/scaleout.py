"""Benchmark: scale-out throughput (1 Celery worker vs 2) and the fixed cost per step that Dagster + Celery add.

Everything runs on loopback, started here and stopped after: PostgreSQL (Dagster's instance), Redis (the broker),
`dagster dev` (webserver + daemon) with HOLISTIC_EXECUTOR=celery, `holistic worker` processes, a shared Parquet
results store, and bench/http_concurrency.py's fixed-latency OpenAI stub in its own process (every request
answered after L seconds, no model work). The catalog holds one generated generation scenario of Q questions;
every model is an OpenAI-backend model with `max_concurrency` C and its own `path`, so none reuses another's
completion cache. One evaluate_model run = 3 steps (prompts, completions, scores); its completions step sends Q
requests, C at a time: Q / C * L seconds at best.

Phases (each worker: --concurrency 1, queues cpu,requests, started fresh before its phase):
  solo     one model alone on a warm worker: the fixed costs without contention;
  phase 1  a partition backfill of K models (a1..aK) on 1 worker;
  phase 2  the same with K other models (b1..bK) on 2 workers.
Ideal wall: K * Q / C * L for one worker, half of it for two. Ratio = wall(phase 1) / wall(phase 2) (target
>= 1.8), both from the backfill's launch (own clock: includes the daemon turning the backfill into runs) and over
the runs' own span (first run start -> last run end, from the run records).

Per step, from each run's event log (all processes share this host's clock):
  queue wait  the run's 'Submitting celery task' engine event -> the worker's STEP_START (the run's check that a
              worker consumes the queue, the broker, the task waiting for a free worker, the worker's set-up);
  compute     STEP_START -> STEP_SUCCESS (the step's own work, inside Dagster);
  handoff     a step's STEP_SUCCESS -> the run's submit of the next step (the run polling Celery's result);
  worker gap  on one worker, one step's STEP_SUCCESS -> its next STEP_START (its cost per step while saturated);
  lead, tail  run start -> its first submit; its last STEP_SUCCESS -> run end.
The check that a worker consumes the queue (defs/celery.py StepRouter.check_queue: one Celery remote-control
broadcast, answered by waiting out its 1 s timeout) comes once per run: it is also timed alone.
Fixed cost per step = (run wall - sum of its steps' compute) / steps, from the solo run (start -> end of the run
record; the run's steps form a chain, so their sum is the critical path); launch = run created -> run started.
For reference, the same three stages for one model run in this process without Dagster or Celery (DuckDB file).

usage: .venv/bin/python bench/scaleout.py [--questions 120] [--models 4] [--concurrency 4] [--latency 0.5]
                                          [--out bench/results/scaleout.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.services and bench.http_concurrency, run as a script from the repo root

from bench.http_concurrency import fixed_latency_server  # noqa: E402
from tests.conftest import write, write_qa_scenario  # noqa: E402
from tests.defs.dagster_dev import (  # noqa: E402
    launch_backfill,
    launch_run,
    start_serving,
    stop_session,
    wait_for_location,
)
from tests.helpers import free_port, wait_until  # noqa: E402
from tests.services import CeleryWorker, RedisServer, postgres_cluster  # noqa: E402

VERSION = "v1"
SCENARIO = "mini_qa"
STEPS = (f"{SCENARIO}__prompts", f"{SCENARIO}__completions", f"{SCENARIO}__scores")
SHARED_DATA = REPO.parent / "shared" / "data"


def build_world(root: Path, questions: int, models: list[str], concurrency: int, base_url: str) -> Path:
    """A catalog of one suite with one generated scenario, and a registry of stub-backed models; returns the
    resources folder."""
    catalog, resources, data = root / "assets", root / "resources", root / "data"
    shutil.copytree(REPO / "assets", catalog)
    for definition in [*(catalog / "suites").glob("*.yaml"), *(catalog / "scenarios").glob("*.yaml")]:
        definition.unlink()  # the jobs hold only this scenario's steps
    records = [{"q": f"What is {i} plus {i + 1}?", "a": str(2 * i + 1)} for i in range(questions)]
    write_qa_scenario(catalog, data, records, "Generated sums (bench/scaleout.py).")  # scenario mini_qa
    write(
        catalog / "suites" / f"{VERSION}.yaml",
        f"version: {VERSION}\nscenarios:\n  {SCENARIO}: {{max_eval_instances: {questions}}}\n",
    )
    shutil.copytree(REPO / "resources", resources)
    (resources / "shadow.yaml").unlink(missing_ok=True)
    entries = "".join(
        f"  {m}:\n    backend: openai\n    base_url: {base_url}\n    api_key_env: null\n"
        f"    max_concurrency: {concurrency}\n    path: {m}\n"
        for m in models
    )
    write(resources / "models.yaml", f"models:\n{entries}")
    return resources


@contextlib.contextmanager
def dagster_dev(env: dict[str, str], log: Path):
    """tests.defs.dagster_dev's, and then whatever is left of its session (its code servers can outlive it until
    their heartbeat times out) is killed."""
    port = free_port()
    dagster = str(Path(sys.executable).with_name("dagster"))
    proc = start_serving(
        [dagster, "dev", "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)], env, log
    )
    try:
        yield port, wait_for_location(port, proc, log)
    finally:
        stop_session(proc)
        end_session(proc.pid)


def end_session(sid: int, grace_s: float = 10) -> None:
    import psutil

    def left() -> list:
        found = []
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                    found.append(p)
        return found

    deadline = time.monotonic() + grace_s
    while (procs := left()) and time.monotonic() < deadline:
        time.sleep(0.5)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()


def run_errors(instance, run_id: str) -> str:
    text = ""
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event and (event.is_failure or event.event_type_value == "RUN_FAILURE"):
            error = getattr(event.event_specific_data, "error", None)
            text += f"\n[{event.event_type_value} {event.step_key}] {event.message}"
            text += f"\n{error.to_string()}" if error else ""
    return text


def wait_runs(instance, run_ids, count: int, timeout_s: float, logs: list[Path]) -> tuple[list, float]:
    """The run records once `count` runs (from `run_ids()`) have all finished successfully, and the moment
    (own clock, time.time()) this process saw them finished."""
    from dagster import RunsFilter

    def done():
        ids = run_ids()
        if len(ids) < count:
            return None
        records = instance.get_run_records(RunsFilter(run_ids=ids))
        return records if len(records) == count and all(r.dagster_run.is_finished for r in records) else None

    tail = lambda: "\n".join(f"--- {p.name}\n{p.read_text()[-2500:]}" for p in logs if p.exists())  # noqa: E731
    records = wait_until(done, timeout_s=timeout_s, interval_s=0.25, what=f"{count} run(s) to finish", diagnostics=tail)
    seen = time.time()
    failed = [r.dagster_run.run_id for r in records if r.dagster_run.status.value != "SUCCESS"]
    if failed:
        raise SystemExit(f"runs failed: {failed}{''.join(run_errors(instance, i) for i in failed)}\n{tail()}")
    return records, seen


def step_timeline(instance, run_id: str) -> dict[str, dict]:
    """Per step key: submit, received (the worker's 'in celery worker' event), start, end, worker."""
    steps: dict[str, dict] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or not event.step_key:
            continue
        step, kind, message = steps.setdefault(event.step_key, {}), event.event_type_value, event.message or ""
        if kind == "ENGINE_EVENT" and message.startswith("Submitting celery task"):
            step.setdefault("submit", entry.timestamp)
        elif kind == "ENGINE_EVENT" and "in celery worker" in message:
            step.setdefault("received", entry.timestamp)
            step.setdefault("worker", event.engine_event_data.metadata["Celery worker"].value.split("@")[0])
        elif kind == "STEP_START":
            step.setdefault("start", entry.timestamp)
        elif kind == "STEP_SUCCESS":
            step["end"] = entry.timestamp
    return steps


def median(values) -> float | None:
    values = list(values)
    return round(statistics.median(values), 3) if values else None


def analyse(instance, records, launched_at: float | None = None, seen_at: float | None = None) -> dict:
    """Wall times and per-step costs of a set of finished runs (see the module docstring for the definitions)."""
    runs, all_steps = [], []
    for record in records:
        steps = step_timeline(instance, record.dagster_run.run_id)
        chain = sorted((s for s in steps.values() if "start" in s and "end" in s), key=lambda s: s["start"])
        compute = sum(s["end"] - s["start"] for s in chain)
        wall = record.end_time - record.start_time
        runs.append(
            {
                "model": record.dagster_run.tags.get("dagster/partition/model"),
                "created": record.create_timestamp.timestamp(),
                "start": record.start_time,
                "end": record.end_time,
                "wall_s": wall,
                "compute_s": compute,
                "steps": len(chain),
                "handoffs": [b["submit"] - a["end"] for a, b in zip(chain, chain[1:], strict=False) if "submit" in b],
                "lead_s": chain[0].get("submit", chain[0]["start"]) - record.start_time if chain else None,
                "tail_s": record.end_time - chain[-1]["end"] if chain else None,
            }
        )
        all_steps += [{**s, "key": k} for k, s in steps.items() if "start" in s and "end" in s]
    by_worker: dict[str, list] = {}
    for s in all_steps:
        by_worker.setdefault(s.get("worker", "?"), []).append(s)
    gaps = []
    for steps in by_worker.values():
        steps.sort(key=lambda s: s["start"])
        gaps += [b["start"] - a["end"] for a, b in zip(steps, steps[1:], strict=False)]
    first_start, last_end = min(r["start"] for r in runs), max(r["end"] for r in runs)
    out = {
        "runs": len(runs),
        "runs_span_s": round(last_end - first_start, 3),
        "first_run_created_to_start_s": round(min(r["start"] - r["created"] for r in runs), 3),
        "median_run_created_to_start_s": median(r["start"] - r["created"] for r in runs),
        "median_run_wall_s": median(r["wall_s"] for r in runs),
        "median_queue_wait_s": median(s["start"] - s["submit"] for s in all_steps if "submit" in s),
        "median_submit_to_worker_s": median(s["received"] - s["submit"] for s in all_steps if "received" in s),
        "median_worker_setup_s": median(s["start"] - s["received"] for s in all_steps if "received" in s),
        "median_handoff_s": median(h for r in runs for h in r["handoffs"]),
        "median_run_start_to_first_submit_s": median(r["lead_s"] for r in runs if r["lead_s"] is not None),
        "median_last_step_end_to_run_end_s": median(r["tail_s"] for r in runs if r["tail_s"] is not None),
        "median_worker_gap_s": median(gaps),
        "median_compute_s": {k: median(s["end"] - s["start"] for s in all_steps if s["key"] == k) for k in STEPS},
        "median_overhead_per_step_s": median((r["wall_s"] - r["compute_s"]) / r["steps"] for r in runs),
        "steps_per_worker": {w: len(s) for w, s in sorted(by_worker.items())},
        # what grows the PostgreSQL event log: events stored per evaluate_model run
        "median_events_per_run": median(len(instance.all_logs(r.dagster_run.run_id)) for r in records),
        "busy_fraction": round(
            sum(s["end"] - s["start"] for s in all_steps) / ((last_end - first_start) * len(by_worker)), 3
        ),
    }
    if launched_at is not None:
        out["wall_from_launch_s"] = round(seen_at - launched_at, 3)
        out["launch_to_first_run_start_s"] = round(first_start - launched_at, 3)
        out["launch_to_last_run_end_s"] = round(last_end - launched_at, 3)
    return out


def in_process_reference(root: Path, resources: Path, model: str) -> dict:
    """The same three stages for one model in this process: no Dagster, no Celery, a DuckDB file."""
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.config.deployment import Deployment
    from holistic_dagster.stages import StageContext
    from holistic_dagster.stages.completions import run_completions
    from holistic_dagster.stages.dataset import build_dataset
    from holistic_dagster.stages.prompts import build_prompts
    from holistic_dagster.stages.scores import compute_scores
    from holistic_dagster.warehouse import Warehouse

    stage = StageContext(
        Warehouse(root / "in_process.duckdb"), Catalog(), Deployment.of(models=resources / "models.yaml")
    )
    build_dataset(stage, VERSION, SCENARIO)
    timings = {}
    for key, run in zip(STEPS, (build_prompts, run_completions, compute_scores), strict=True):
        started = time.perf_counter()
        run(stage, VERSION, SCENARIO, model)
        timings[key] = round(time.perf_counter() - started, 3)
    return timings


def queue_check_s(env: dict[str, str], queue: str, tries: int = 3) -> float:
    """What a run's first step on a queue spends asking the workers (defs/celery.py StepRouter.check_queue)."""
    from dagster_celery.make_app import make_app

    from holistic_dagster.config.scaleout import load_celery_settings
    from holistic_dagster.defs.celery import StepRouter, app_args

    config = load_celery_settings()
    app = make_app(app_args(config))
    router, times = StepRouter(config, None), []
    for _ in range(tries):
        started = time.perf_counter()
        router.check_queue(app, queue, "bench", again=True)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def start_workers(names: list[str], env: dict[str, str], root: Path, stack: contextlib.ExitStack) -> list:
    workers = [CeleryWorker(n, "cpu,requests", env, root / f"{n}.log", concurrency=1) for n in names]
    for w in workers:
        stack.callback(w.stop)
    for w in workers:
        w.wait_ready()
    return workers


def phase(instance, port: int, location: str, models: list[str], logs: list[Path], timeout_s: float) -> dict:
    from dagster import RunsFilter
    from dagster._core.storage.tags import BACKFILL_ID_TAG

    launched_at = time.time()
    backfill = launch_backfill(port, location, "evaluate_model", [f"{m}|{VERSION}" for m in models])
    run_ids = lambda: [r.run_id for r in instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill}))]  # noqa: E731
    records, seen = wait_runs(instance, run_ids, len(models), timeout_s, logs)
    return analyse(instance, records, launched_at, seen)


def interrupted(signum, _frame) -> None:
    # SIGTERM and SIGHUP clean up as Ctrl-C does; a background job (SIGINT ignored) too. Once only: a second signal
    # must not cut the clean-up short
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    print(f"\n{signal.Signals(signum).name}: stopping everything started here ...", file=sys.stderr, flush=True)
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=120, help="Q: questions (requests per model)")
    parser.add_argument("--models", type=int, default=4, help="K: models per phase (one run each)")
    parser.add_argument("--concurrency", type=int, default=4, help="C: max_concurrency of every model")
    parser.add_argument("--latency", type=float, default=0.5, help="L: the stub's seconds per request")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "scaleout.json")
    args = parser.parse_args()
    q, k, c, lat = args.questions, args.models, args.concurrency, args.latency
    ideal1 = k * q / c * lat
    phase1, phase2 = [f"a{i + 1}" for i in range(k)], [f"b{i + 1}" for i in range(k)]
    begun = time.perf_counter()
    report: dict = {
        "parameters": {"questions": q, "models": k, "concurrency": c, "latency_s": lat, "worker_concurrency": 1},
        "machine": {
            "nproc": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        },
    }
    with contextlib.ExitStack() as stack:
        root = Path(tempfile.mkdtemp(prefix="holistic-scaleout-"))
        stack.callback(shutil.rmtree, root, ignore_errors=True)  # registered first: removed last
        # the stub is forked before anything here starts threads or connections
        server, stub_port = fixed_latency_server(lat)
        stack.callback(lambda: (server.terminate(), server.join(10)))
        # installed after the fork: the stub keeps the default handlers (SIGTERM ends it)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, interrupted)
        resources = build_world(root, q, ["solo", "ref", *phase1, *phase2], c, f"http://127.0.0.1:{stub_port}/v1")
        data_dirs = [str(root / "data"), *([str(SHARED_DATA)] if SHARED_DATA.is_dir() else [])]
        env = {
            "HOLISTIC_EXECUTOR": "celery",
            "HOLISTIC_CATALOG": str(root / "assets"),
            "HOLISTIC_RESOURCES": str(resources),
            "HOLISTIC_DATA_DIR": os.pathsep.join(data_dirs),
            "HOLISTIC_HOME": str(root / "home"),
            "HOLISTIC_OFFLINE": "1",
            "HOLISTIC_WAREHOUSE": f"{root / 'store'}/",
        }
        os.environ.update(env)  # this process reads the same catalog and instance as the services

        print("in-process reference (one model, no Dagster, no Celery) ...", flush=True)
        report["in_process_one_model_s"] = in_process_reference(root, resources, "ref")

        pg = stack.enter_context(postgres_cluster())
        redis = stack.enter_context(RedisServer(root / "redis"))
        env |= {**pg, "HOLISTIC_CELERY_BROKER": redis.url}
        os.environ.update(env)
        from dagster import DagsterInstance

        from holistic_dagster.defs.runner import register_partitions
        from holistic_dagster.settings import prepare_dagster_home

        env["DAGSTER_HOME"] = os.environ["DAGSTER_HOME"] = str(prepare_dagster_home(root / "dagster_home"))
        instance = DagsterInstance.get()
        stack.callback(instance.dispose)
        register_partitions(instance, ["solo", *phase1, *phase2], [VERSION])
        print("starting dagster dev and worker w0 ...", flush=True)
        dev_log = root / "dagster_dev.log"
        workers = start_workers(["w0"], env, root, stack)
        port, location = stack.enter_context(dagster_dev(env, dev_log))
        logs = [dev_log]
        timeout_s = 600 + 10 * ideal1

        print("datasets run, then one model alone (solo) ...", flush=True)
        logs += [w.log for w in workers]
        datasets_id = launch_run(port, location, "datasets", VERSION)
        wait_runs(instance, lambda: [datasets_id], 1, timeout_s, logs)
        report["queue_check_s"] = queue_check_s(env, "requests")
        solo_id = launch_run(port, location, "evaluate_model", f"solo|{VERSION}")
        records, _ = wait_runs(instance, lambda: [solo_id], 1, timeout_s, logs)
        report["solo"] = analyse(instance, records)
        # where one uncontended run's time goes, step by step
        report["solo_steps"] = {
            key: {
                "queue_wait_s": round(st["start"] - st["submit"], 3),
                "compute_s": round(st["end"] - st["start"], 3),
            }
            for key, st in sorted(step_timeline(instance, solo_id).items(), key=lambda kv: kv[1].get("start", 0))
            if {"submit", "start", "end"} <= st.keys()
        }
        workers[0].stop()

        results = {}
        for name, models, worker_names in (("phase1", phase1, ["w1"]), ("phase2", phase2, ["w2", "w3"])):
            print(f"{name}: {len(models)} models on {len(worker_names)} worker(s) ...", flush=True)
            workers = start_workers(worker_names, env, root, stack)
            results[name] = phase(instance, port, location, models, logs + [w.log for w in workers], timeout_s)
            results[name]["workers"] = len(worker_names)
            results[name]["ideal_s"] = round(ideal1 / len(worker_names), 3)
            for w in workers:
                w.stop()
        report |= results
        # what the shared results store holds after 2K+1 evaluations: files per table (upserts are not compacted)
        tables = sorted(d for d in (root / "store").iterdir() if d.is_dir())
        report["store_files"] = {d.name: n for d in tables if (n := len(list(d.glob("*.parquet"))))}

    p1, p2, solo = report["phase1"], report["phase2"], report["solo"]
    for p in (p1, p2):
        p["requests_per_s"] = round(k * q / p["wall_from_launch_s"], 3)
        p["requests_per_s_over_runs_span"] = round(k * q / p["runs_span_s"], 3)
    report["ratio_from_launch"] = round(p1["wall_from_launch_s"] / p2["wall_from_launch_s"], 3)
    report["ratio_over_runs_span"] = round(p1["runs_span_s"] / p2["runs_span_s"], 3)
    report["fixed_cost_per_step_s"] = solo["median_overhead_per_step_s"]
    report["total_bench_s"] = round(time.perf_counter() - begun, 1)
    print_table(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten {args.out}")


def print_table(r: dict) -> None:
    p, ref = r["parameters"], r["in_process_one_model_s"]
    print(
        f"\nK={p['models']} models x Q={p['questions']} requests, C={p['concurrency']} per model, "
        f"L={p['latency_s']} s, workers at --concurrency 1, nproc={r['machine']['nproc']}"
    )
    row = lambda label, cells: print(f"{label:52}" + "".join(f"{'-' if v is None else v:>11}" for v in cells))  # noqa: E731
    row("", ["solo", "1 worker", "2 workers", "in-process"])
    for label, key in [
        ("wall, backfill launch -> all runs seen finished (s)", "wall_from_launch_s"),
        ("ideal wall: K*Q/C*L / workers (s)", "ideal_s"),
        ("requests/s (from launch)", "requests_per_s"),
        ("launch -> first run start (daemon) (s)", "launch_to_first_run_start_s"),
        ("runs' span: first start -> last end (s)", "runs_span_s"),
        ("requests/s (runs' span)", "requests_per_s_over_runs_span"),
        ("worker busy fraction (compute / span / workers)", "busy_fraction"),
        ("median run created -> started (s)", "median_run_created_to_start_s"),
        ("median run wall (s)", "median_run_wall_s"),
        ("median queue wait: submit -> STEP_START (s)", "median_queue_wait_s"),
        ("  of which submit -> task on a worker (s)", "median_submit_to_worker_s"),
        ("  of which worker set-up -> STEP_START (s)", "median_worker_setup_s"),
        ("median handoff: STEP_SUCCESS -> next submit (s)", "median_handoff_s"),
        ("median run start -> first submit (s)", "median_run_start_to_first_submit_s"),
        ("median last STEP_SUCCESS -> run end (s)", "median_last_step_end_to_run_end_s"),
        ("median worker gap between its steps (s)", "median_worker_gap_s"),
        ("median (run wall - compute) / steps (s)", "median_overhead_per_step_s"),
        ("median events stored per run (PostgreSQL)", "median_events_per_run"),
    ]:
        row(label, [r[n].get(key) for n in ("solo", "phase1", "phase2")])
    for step in STEPS:
        cells = [r[n]["median_compute_s"][step] for n in ("solo", "phase1", "phase2")]
        row(f"median compute: {step.split('__')[1]} (s)", [*cells, ref[step]])
    print(f"a run's check that a worker consumes a queue (first step per queue, per run): {r['queue_check_s']} s")
    steps = ", ".join(f"{k.split('__')[1]} {v['queue_wait_s']} + {v['compute_s']}" for k, v in r["solo_steps"].items())
    print(f"solo run, per step queue wait + compute (s): {steps}")
    print(
        f"ratio 1 worker / 2 workers: {r['ratio_from_launch']} from launch, {r['ratio_over_runs_span']} over the ",
        end="",
    )
    print("runs' span (target >= 1.8)")
    print(f"fixed cost per step (solo run: (wall - compute) / steps): {r['fixed_cost_per_step_s']} s")
    print(f"total bench time: {r['total_bench_s']} s")


if __name__ == "__main__":
    main()
