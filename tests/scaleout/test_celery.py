"""Scale-out on an existing engine: Dagster (webserver + daemon, PostgreSQL storage) sends every step as a Celery
task to two `holistic worker` processes over a real Redis, and every step writes the shared results store.
All of it is started here on free loopback ports and stopped after; the models are an OpenAI-protocol test
server answering with a real local model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import DagsterInstance

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.defs.runner import register_partitions
from holistic_dagster.settings import REPO_ROOT, prepare_dagster_home
from holistic_dagster.stages import StageContext
from holistic_dagster.stages.completions import run_completions
from holistic_dagster.stages.dataset import build_dataset
from holistic_dagster.stages.prompts import build_prompts
from holistic_dagster.stages.scores import compute_scores
from holistic_dagster.warehouse import Warehouse, open_warehouse
from tests.conftest import write, write_qa_scenario
from tests.defs.dagster_dev import dagster_dev, graphql, launch_backfill, launch_run, wait_for_run
from tests.helpers import wait_until
from tests.servers.openai_protocol_server import OpenAIProtocolTestServer
from tests.services import CeleryWorker, RedisServer, postgres_cluster

pytestmark = pytest.mark.slow  # PostgreSQL, Redis, two Celery workers and `dagster dev`

QUESTIONS = [
    {"q": f"What is {a} plus {b}?", "a": str(a + b)} for a, b in [(1, 2), (3, 4), (5, 6), (7, 8), (9, 1), (2, 2)]
]
BACKFILL = ["m1", "m2", "m3"]  # m1 on queue gpu-a (worker w1 only), m2 on gpu-b (w2 only), m3 on `requests` (both)


def _models(base_url: str) -> str:
    # each its own model id (the server answers every one with the same local model): its own completion cache
    entry = f"backend: openai\n    base_url: {base_url}\n    api_key_env: null\n    max_concurrency: 2\n    path"
    return f"""
models:
  m1:
    {entry}: m1
    queue: gpu-a
  m2:
    {entry}: m2
    queue: gpu-b
  m3:
    {entry}: m3
  m4:
    {entry}: m4
  m5:
    {entry}: m5
  m6:
    {entry}: m6
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, untrained_client, shared_data):
    root = tmp_path_factory.mktemp("scaleout")
    catalog, resources, data = root / "assets", root / "resources", root / "data"
    shutil.copytree(REPO_ROOT / "assets", catalog)
    for definition in [*(catalog / "suites").glob("*.yaml"), *(catalog / "scenarios").glob("*.yaml")]:
        definition.unlink()  # one suite of one scenario: the jobs hold only its steps
    write_qa_scenario(catalog, data, QUESTIONS, "Six sums.")
    write(catalog / "suites" / "v1.yaml", "version: v1\nscenarios:\n  mini_qa: {max_eval_instances: 6}\n")
    shutil.copytree(REPO_ROOT / "resources", resources)
    (resources / "shadow.yaml").unlink(missing_ok=True)
    write(resources / "celery.yaml", "worker_check_s: 1\nmissed_pings: 3\n")  # a lost worker found in ~5 s
    store = root / "store"
    store.mkdir()
    with (
        postgres_cluster() as pg,
        RedisServer(root / "redis") as redis,
        OpenAIProtocolTestServer(untrained_client) as server,
        pytest.MonkeyPatch.context() as mp,
    ):
        write(resources / "models.yaml", _models(server.base_url))
        env = {
            **pg,
            "HOLISTIC_EXECUTOR": "celery",
            "HOLISTIC_CELERY_BROKER": redis.url,
            "HOLISTIC_CATALOG": str(catalog),
            "HOLISTIC_RESOURCES": str(resources),
            "HOLISTIC_DATA_DIR": f"{data}:{shared_data}",
            "HOLISTIC_WAREHOUSE": f"{store}/",
        }
        for key, value in env.items():
            mp.setenv(key, value)
        home = prepare_dagster_home(root / "dagster_home")
        assert (home / "dagster.yaml").resolve().name == "dagster.celery.yaml"
        env["DAGSTER_HOME"] = str(home)
        mp.setenv("DAGSTER_HOME", str(home))
        instance = DagsterInstance.get()
        register_partitions(instance, ["m1", "m2", "m3", "m4", "m5", "m6"], ["v1"])
        workers = [
            CeleryWorker("w1", "cpu,requests,gpu-a", env, root / "w1.log"),
            CeleryWorker("w2", "cpu,requests,gpu-b", env, root / "w2.log"),
        ]
        try:
            for w in workers:
                w.wait_ready()
            log = root / "dagster_dev.log"
            with dagster_dev(env, log) as (port, location):
                yield {
                    "port": port, "location": location, "instance": instance, "server": server, "workers": workers,
                    "store": store, "root": root, "log": log, "redis": redis, "postgres": pg,
                }  # fmt: skip
        finally:
            for w in workers:
                w.stop()
            instance.dispose()


def _launch(cluster, job: str, partition: str) -> str:
    return launch_run(cluster["port"], cluster["location"], job, partition)


def _finished(cluster, run_id: str, timeout_s: float = 600) -> str:
    """SUCCESS, or an AssertionError saying what went wrong (the run's errors, the workers' logs)."""
    try:
        status = wait_for_run(cluster["port"], run_id, timeout_s=timeout_s)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_diagnostics(cluster, run_id)}") from None
    if status != "SUCCESS":
        raise AssertionError(f"run {run_id}: {status}\n{_diagnostics(cluster, run_id)}")
    return status


def _reexecute_from_failure(cluster, run_id: str) -> str:
    """Re-executes a failed run from its failed steps, as the UI's button does; returns the new run's id."""
    again = graphql(
        cluster["port"],
        """mutation($p: ReexecutionParams!) { launchRunReexecution(reexecutionParams: $p) {
        __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""",
        {"p": {"parentRunId": run_id, "strategy": "FROM_FAILURE"}},
    )["launchRunReexecution"]
    assert again["__typename"] == "LaunchRunSuccess", again
    return again["run"]["runId"]


def _status(cluster, run_id: str) -> str:
    query = '{ runOrError(runId: "%s") { ... on Run { status } } }' % run_id
    return graphql(cluster["port"], query)["runOrError"]["status"]


def _diagnostics(cluster, run_id: str | None = None) -> str:
    logs = [cluster["log"], *(w.log for w in cluster["workers"])]
    text = "\n".join(f"--- {p.name}\n{p.read_text()[-2500:]}" for p in logs)
    if run_id:
        for entry in cluster["instance"].all_logs(run_id):
            event = entry.dagster_event
            if event and (event.is_failure or event.event_type_value in ("ENGINE_EVENT", "RUN_FAILURE")):
                error = getattr(event.event_specific_data, "error", None)
                text += f"\n[{event.event_type_value} {event.step_key}] {event.message}"
                text += f"\n{error.to_string()}" if error else ""
    return text


def _workers_by_step(instance: DagsterInstance, run_id: str) -> list[tuple[str, str]]:
    """(step key, Celery worker) for every step execution the workers reported, in order."""
    found = []
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event and event.is_engine_event and "in celery worker" in (event.message or ""):
            metadata = event.engine_event_data.metadata
            found.append((event.step_key, metadata["Celery worker"].value.split("@")[0]))
    return found


def _run_id_for(instance: DagsterInstance, partition: str) -> str | None:
    from dagster import RunsFilter

    runs = instance.get_runs(RunsFilter(job_name="evaluate_model", tags={"dagster/partition": partition}))
    return runs[0].run_id if runs else None


def _in_process_results(root: Path, models: list[str]) -> Warehouse:
    """The same evaluation without Dagster or Celery: the stages in this process, into a DuckDB file."""
    path = root / f"in_process_{'_'.join(models)}.duckdb"
    stage = StageContext(Warehouse(path), Catalog(), Deployment.of(models=Path(root / "resources" / "models.yaml")))
    build_dataset(stage, "v1", "mini_qa")
    for model in models:
        build_prompts(stage, "v1", "mini_qa", model)
        run_completions(stage, "v1", "mini_qa", model)
        compute_scores(stage, "v1", "mini_qa", model)
    return stage.warehouse


def _launch_held_mid_step(cluster, model: str, answers: int) -> str:
    """Launches the model's evaluation; returns once its completions step has `answers` answers in the cache and
    waits on the server for the rest (until server.release())."""
    store, instance = open_warehouse(cluster["store"]), cluster["instance"]
    cached = "SELECT count(*) AS n FROM completion_cache"
    before = store.df(cached)["n"].iat[0]  # the other models' answers
    cluster["server"].hold_after(answers)
    run_id = _launch(cluster, "evaluate_model", f"{model}|v1")
    wait_until(
        lambda: store.df(cached)["n"].iat[0] >= before + answers,
        timeout_s=300,
        interval_s=0.5,
        what=f"{model}'s first {answers} answers in the completion cache",
        diagnostics=lambda: _diagnostics(cluster, run_id),
        alive=lambda: not instance.get_run_by_id(run_id).is_finished,
    )
    return run_id


SCORES = "SELECT model, instance_id, metric, value FROM instance_scores WHERE family = 'accuracy' ORDER BY ALL"
TEXTS = "SELECT model, request_id, text FROM completions ORDER BY ALL"


@pytest.fixture(scope="module")
def datasets(cluster):
    """The suite version's datasets, materialized once on the workers."""
    assert _finished(cluster, _launch(cluster, "datasets", "v1")) == "SUCCESS"
    return cluster


def test_a_backfill_of_three_models_spreads_over_both_workers_by_queue(cluster, datasets):
    instance = cluster["instance"]
    launch_backfill(cluster["port"], cluster["location"], "evaluate_model", [f"{m}|v1" for m in BACKFILL])
    run_ids = wait_until(  # the daemon turns the backfill into one run per partition
        lambda: (ids := [_run_id_for(instance, f"{m}|v1") for m in BACKFILL]) and all(ids) and ids,
        timeout_s=300,
        interval_s=2,
        what="the backfill's three runs",
        diagnostics=lambda: _diagnostics(cluster),
    )
    statuses = {m: _finished(cluster, run_id) for m, run_id in zip(BACKFILL, run_ids, strict=True)}
    assert statuses == dict.fromkeys(BACKFILL, "SUCCESS"), _diagnostics(cluster)

    ran_on = {m: _workers_by_step(instance, run_id) for m, run_id in zip(BACKFILL, run_ids, strict=True)}
    for m, steps in ran_on.items():  # every step of every run ran on a worker: prompts, completions, scores
        assert {s for s, _ in steps} == {"mini_qa__prompts", "mini_qa__completions", "mini_qa__scores"}, (m, steps)
    completions_on = {m: [w for s, w in steps if s == "mini_qa__completions"] for m, steps in ran_on.items()}
    assert completions_on["m1"] == ["w1"] and completions_on["m2"] == ["w2"]  # each model's queue, each its host
    assert {w for steps in ran_on.values() for _, w in steps} == {"w1", "w2"}

    shared = open_warehouse(cluster["store"])
    local = _in_process_results(cluster["root"], BACKFILL)
    assert len(shared.df(SCORES)) == 3 * len(QUESTIONS)
    assert shared.df(SCORES).equals(local.df(SCORES))
    assert shared.df(TEXTS).equals(local.df(TEXTS))


def test_redis_restarted_mid_step_the_run_fails_naming_the_broker_and_its_reexecution_finishes(cluster, datasets):
    instance, server, store, redis = (
        cluster["instance"],
        cluster["server"],
        open_warehouse(cluster["store"]),
        cluster["redis"],
    )
    run_id = _launch_held_mid_step(cluster, "m5", answers=2)  # its completions step runs when Redis goes away
    try:
        redis.stop()
        wait_until(lambda: instance.get_run_by_id(run_id).is_finished, timeout_s=120, what="the run to end")
        errors = [
            e.dagster_event.event_specific_data.error.to_string()
            for e in instance.all_logs(run_id)
            if e.dagster_event and e.dagster_event.is_run_failure and e.dagster_event.event_specific_data.error
        ]
        assert instance.get_run_by_id(run_id).status.value == "FAILURE"
        assert any("lost the Celery broker" in m and "HOLISTIC_CELERY_BROKER=redis://127.0.0.1:" in m for m in errors)
    finally:
        if redis.proc.poll() is not None:
            redis.start()  # the same port, empty: its queues and results are gone
        server.release()
    assert _finished(cluster, _reexecute_from_failure(cluster, run_id)) == "SUCCESS"
    local = _in_process_results(cluster["root"], ["m5"])
    assert store.df(SCORES).query("model == 'm5'").reset_index(drop=True).equals(local.df(SCORES))
    assert store.df(TEXTS).query("model == 'm5'").reset_index(drop=True).equals(local.df(TEXTS))


def test_a_worker_killed_mid_step_the_step_finishes_on_the_other_without_resending_finished_requests(cluster, datasets):
    instance, server, store = cluster["instance"], cluster["server"], open_warehouse(cluster["store"])
    server.hits.clear()
    run_id = _launch_held_mid_step(cluster, "m4", answers=3)  # the kill comes mid-step, whatever the timing
    answered_first = {p for p, n in server.hits.items() if n}  # received so far (3 answered + the held ones)
    holder = wait_until(
        lambda: next((w for s, w in _workers_by_step(instance, run_id) if s == "mini_qa__completions"), None),
        timeout_s=60,
        what="the worker running m4's completions step",
    )
    victim = next(w for w in cluster["workers"] if w.name == holder)
    victim.kill()
    server.release()
    try:
        assert _finished(cluster, run_id) == "SUCCESS"
        steps = _workers_by_step(instance, run_id)
        survivor = next(w.name for w in cluster["workers"] if w.name != holder)
        assert [w for s, w in steps if s == "mini_qa__completions"] == [holder, survivor]
        messages = [e.dagster_event.message or "" for e in instance.all_logs(run_id) if e.dagster_event]
        resent = [m for m in messages if "sent again" in m]
        assert len(resent) == 1 and f"its worker {holder}@" in resent[0], resent
        # every request the killed worker had finished came from the cache: sent once in all
        assert len(answered_first) >= 3
        finished_before = [p for p in answered_first if server.hits[p] == 1]
        assert len(finished_before) >= 3, server.hits
        assert all(n <= 2 for n in server.hits.values())  # a request held at the kill is sent once more, at most
        assert store.df("SELECT count(*) AS n FROM completions WHERE model = 'm4'")["n"].iat[0] == len(QUESTIONS)
    finally:
        server.release()  # (the killed worker stays down: the next test needs only the other)


def test_postgres_restarted_mid_step_the_run_ends_and_a_reexecution_finishes(cluster, datasets):
    # the module's last test: after a restart, Dagster's webserver answers its first requests with errors (each
    # storage's held connection is stale) before it reconnects
    server, store, pg = cluster["server"], open_warehouse(cluster["store"]), cluster["postgres"]
    run_id = _launch_held_mid_step(cluster, "m6", answers=2)
    try:
        pg.stop()  # every process's connections to it die
        pg.start()
    finally:
        server.release()

    def ended(run_id: str) -> str:  # (the webserver's first answers after the restart may be errors)
        return wait_until(
            lambda: (status := _status(cluster, run_id)) in ("SUCCESS", "FAILURE", "CANCELED") and status,
            timeout_s=300,
            interval_s=1,
            what=f"run {run_id} to end after PostgreSQL restarted (not to stay STARTED)",
            ignoring=(OSError,),
        )

    if ended(run_id) != "SUCCESS":  # failed clearly: a re-execution from failure finishes the work
        again = wait_until(
            lambda: _reexecute_from_failure(cluster, run_id), timeout_s=60, what="a re-execution", ignoring=(OSError,)
        )
        assert ended(again) == "SUCCESS", _diagnostics(cluster, again)
    local = _in_process_results(cluster["root"], ["m6"])
    assert store.df(SCORES).query("model == 'm6'").reset_index(drop=True).equals(local.df(SCORES))
    assert store.df(TEXTS).query("model == 'm6'").reset_index(drop=True).equals(local.df(TEXTS))
