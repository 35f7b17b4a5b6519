"""Steps as Celery tasks (HOLISTIC_EXECUTOR=celery): dagster-celery's executor and its execution loop, with
three things a multi-host evaluation needs that it lacks:
- routing: a step that sends model requests goes to its model's queue (the registry entry's `queue`, e.g. one per
  GPU host or TGI server, or resources/celery.yaml's requests_queue); every other step to the CPU queue;
- a step is only sent to a queue that some worker consumes, from this checkout's code: otherwise the run fails at
  once naming the setting to change, instead of waiting in STARTED for a worker that never comes;
- a step whose worker died (SIGKILL, a lost host) is sent again, to whichever worker of its queue is alive, up to
  max_sends: the dead worker's finished requests come from the completion cache.
Whole runs stay with Dagster's run launcher (a run is a light process that only sends steps and waits), so one
run's steps spread over every worker, and a model's requests stay on the hosts that serve it."""

from __future__ import annotations

import time
from typing import Any

import redis
from dagster import executor, multiple_process_executor_requirements

# Dagster has no public name for these two (dagster 1.x exports neither at its top level); an executor built on
# dagster-celery's, as this one is, needs them as dagster-celery itself imports them
from dagster._core.events import EngineEventData
from dagster._core.execution.retries import RetryMode
from dagster_celery.config import DEFAULT_CONFIG
from dagster_celery.executor import CeleryExecutor, _submit_task
from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG
from kombu.exceptions import OperationalError

from holistic_dagster.config.deployment import Deployment
from holistic_dagster.config.scaleout import CODE_VERSION_COMMAND, CelerySettings
from holistic_dagster.defs.jobs import MODEL_REQUESTS_POOL
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import code_fingerprint

# an unreachable or restarted Redis: the client's own, kombu's, and the socket's
BROKER_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OperationalError, OSError)
# a broadcast waits this long for every worker's answer (a run asks once, and again only for a queue not seen)
INSPECT_TIMEOUT_S = 1.0
PING_TIMEOUT_S = 2.0  # one worker's answer: returns as soon as it comes


def app_args(config: CelerySettings) -> dict[str, Any]:
    """Arguments of dagster_celery's make_app, the same for the run that sends steps and the workers."""
    return {
        "broker": config.broker(),
        "backend": config.backend(),
        "include": [],
        "config_source": {
            **DEFAULT_CONFIG,
            "task_default_queue": config.cpu_queue,
            # a running step's task says which worker holds it: the run pings that worker (WatchedResult)
            "task_track_started": True,
            # each worker process takes one step at a time: a long completions step never holds back a queued one
            "worker_prefetch_multiplier": 1,
            "broker_connection_retry_on_startup": True,
        },
    }


class ScaleOutError(HolisticError):
    """The run cannot send a step: no broker, no worker on the step's queue, or workers from other code."""


class HolisticCeleryExecutor(CeleryExecutor):
    def __init__(self, config: CelerySettings):
        args = app_args(config)
        super().__init__(
            retries=RetryMode(RetryMode.ENABLED),
            broker=args["broker"],
            backend=args["backend"],
            config_source=args["config_source"],
        )
        self.config = config

    def execute(self, plan_context, execution_plan):
        from dagster_celery.core_execution_loop import core_celery_execution_loop

        router = StepRouter(self.config, plan_context)
        return core_celery_execution_loop(plan_context, execution_plan, step_execution_fn=router.send)


@executor(name="holistic_celery", requirements=multiple_process_executor_requirements())
def holistic_celery_executor(_init_context) -> HolisticCeleryExecutor:
    """Every step as a task on the Celery workers of resources/celery.yaml's broker (see docs/how-to/scale-out.md)."""
    return HolisticCeleryExecutor(Deployment().celery())


class StepRouter:
    def __init__(self, config: CelerySettings, plan_context):
        self.config, self.plan_context = config, plan_context
        self._checked: set[str] = set()  # queues with a worker of this code
        self._workers: dict[str, dict[str, Any]] | None = None  # the workers' last answers

    def queue_for(self, step) -> tuple[str, str]:
        """The step's queue and the setting that chose it (for error messages)."""
        if DAGSTER_CELERY_QUEUE_TAG in step.tags:
            return step.tags[DAGSTER_CELERY_QUEUE_TAG], f"the op tag {DAGSTER_CELERY_QUEUE_TAG}"
        if step.pool != MODEL_REQUESTS_POOL:
            return self.config.cpu_queue, "cpu_queue in resources/celery.yaml"
        model = self.plan_context.dagster_run.tags.get("dagster/partition/model")
        if model:
            deployment = Deployment()
            spec = deployment.models().get(model)
            if spec is not None and spec.queue:
                return spec.queue, f"`queue` of model {model!r} in {deployment.models_path}"
        return self.config.requests_queue, "requests_queue in resources/celery.yaml"

    def send(self, app, plan_context, step, _queue, priority, known_state) -> WatchedResult:
        queue, setting = self.queue_for(step)
        self.check_queue(app, queue, setting)
        yield_event = lambda message, data=None: plan_context.instance.report_engine_event(  # noqa: E731
            message, plan_context.dagster_run, EngineEventData(data or {}), step_key=step.key
        )
        # (dagster-celery's own "Submitting celery task ... to queue" names its default queue, not this one)
        yield_event(f"step {step.key} goes to queue {queue!r} (chosen by {setting})", {"queue": queue})
        return WatchedResult(
            lambda: _submit_task(app, plan_context, step, queue, priority, known_state),
            app,
            self.config,
            step.key,
            report=yield_event,
            recheck=lambda: self.check_queue(app, queue, setting, again=True),
        )

    def check_queue(self, app, queue: str, setting: str, again: bool = False) -> None:
        """Raises ScaleOutError unless a worker of this code consumes `queue`. The workers' answers are kept for the
        run; workers that are starting may not answer at once: asks again for up to worker_wait_s."""
        if queue in self._checked and not again:
            return
        deadline, ours = time.monotonic() + self.config.worker_wait_s, code_fingerprint(Deployment().catalog_dir)
        while True:
            if again or self._workers is None or queue not in {q for w in self._workers.values() for q in w["queues"]}:
                self._workers = self._ask_workers(app)
                again = False
            consumers = {w: info["code_version"] for w, info in self._workers.items() if queue in info["queues"]}
            if ours in consumers.values():
                self._checked.add(queue)
                return
            if time.monotonic() > deadline:
                break
            time.sleep(1)
            self._workers = None
        if consumers:
            raise ScaleOutError(
                f"the workers on queue {queue!r} run other code than this run (code version {ours}; "
                + ", ".join(f"{w}: {v}" for w, v in sorted(consumers.items()))
                + "): restart them from the same checkout (`holistic worker`)"
            )
        listening = ", ".join(f"{w}: {info['queues']}" for w, info in sorted(self._workers.items()))
        raise ScaleOutError(
            f"no Celery worker consumes queue {queue!r} (chosen by {setting}) on {self.config.shown_broker()} "
            f"({listening or 'no worker answers'}): start one with `holistic worker --queues {queue}`, or correct "
            "the setting"
        )

    def _ask_workers(self, app) -> dict[str, dict[str, Any]]:
        """{worker: {"code_version", "queues"}} from every worker that answers within INSPECT_TIMEOUT_S."""
        try:
            replies = app.control.inspect(timeout=INSPECT_TIMEOUT_S)._request(CODE_VERSION_COMMAND) or {}
        except BROKER_ERRORS as e:
            raise ScaleOutError(
                f"cannot reach the Celery broker ({self.config.shown_broker()}): {str(e).rstrip('.')}. Start it, "
                f"or point {self.config.broker_env} at one that runs"
            ) from e
        return {
            w: {"code_version": r.get("code_version", "unknown"), "queues": r.get("queues", [])}
            for w, r in replies.items()
        }


class WatchedResult:
    """A step's Celery result that sends the step again when its worker is gone: the pool process was killed
    (Celery reports WorkerLostError), or the whole worker stopped answering pings while holding the step.
    Offers what dagster-celery's loop uses: ready(), get(), revoke()."""

    def __init__(self, send, app, config: CelerySettings, step_key: str, report, recheck):
        self._send, self.app, self.config, self.step_key = send, app, config, step_key
        self._report, self._recheck = report, recheck
        self.result = send()
        self.sends, self._missed, self._last_check = 1, 0, time.monotonic()

    def ready(self) -> bool:
        try:
            return self._ready()
        except BROKER_ERRORS as e:
            # the run cannot tell whether its steps still run: it fails, saying how to finish the work
            raise ScaleOutError(
                f"step {self.step_key}: lost the Celery broker / result backend ({self.config.shown_broker()}): "
                f"{str(e).rstrip('.')}. Once it is back, re-execute this run from failure: finished requests come "
                "from the completion cache, finished steps are not run again"
            ) from e

    def _ready(self) -> bool:
        if self.result.ready():
            error = self.result.result if self.result.failed() else None
            if type(error).__name__ == "WorkerLostError":
                return not self._send_again(f"its worker process was lost ({error})")
            return True
        if time.monotonic() - self._last_check >= self.config.worker_check_s:
            self._last_check = time.monotonic()
            worker = self._holder()
            if worker and not self.app.control.ping(destination=[worker], timeout=PING_TIMEOUT_S):
                self._missed += 1
                if self._missed >= self.config.missed_pings:
                    self.result.revoke()
                    return not self._send_again(f"its worker {worker} stopped answering ({self._missed} pings)")
            else:
                self._missed = 0
        return False

    def _holder(self) -> str | None:
        """The worker running the step (task_track_started), None while it waits in the queue."""
        if self.result.state != "STARTED":
            return None
        info: Any = self.result.info
        return info.get("hostname") if isinstance(info, dict) else None

    def _send_again(self, why: str) -> bool:
        """True if sent again; False once max_sends is reached (the step then fails with the task's error)."""
        if self.sends >= self.config.max_sends:
            self._report(f"step {self.step_key}: {why}; not sent again (max_sends {self.config.max_sends} reached)")
            return False
        self._recheck()  # some live worker still consumes the queue, or a clear error
        self.result = self._send()
        self.sends += 1
        self._missed = 0
        self._report(
            f"step {self.step_key}: {why}; sent again (send {self.sends} of at most {self.config.max_sends}); "
            "its finished requests come from the completion cache",
            {"sends": str(self.sends)},
        )
        return True

    def get(self):
        return self.result.get()

    def revoke(self) -> None:
        self.result.revoke()
