"""The Celery app a worker runs (`holistic worker`, or `celery -A holistic_dagster.defs.celery_app worker -Q ...`):
dagster_celery's step task on the broker that resources/celery.yaml names, plus a remote-control command that
answers this checkout's code fingerprint, so a run refuses workers started from other code."""

from __future__ import annotations

from celery.worker.control import inspect_command
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from holistic_dagster.config.deployment import Deployment
from holistic_dagster.config.scaleout import CODE_VERSION_COMMAND
from holistic_dagster.defs.celery import app_args
from holistic_dagster.records import code_fingerprint

DEPLOYMENT = Deployment()  # this worker's: the environment's (settings.py)
app = make_app(app_args(DEPLOYMENT.celery()))
execute_plan = create_task(app)


@inspect_command(name=CODE_VERSION_COMMAND)
def holistic_code_version(state) -> dict[str, object]:
    """This worker's code fingerprint and the queues it consumes: what a run checks before it sends a step (one
    broadcast, rather than Celery's active_queues and a second one)."""
    consumer = state.consumer.task_consumer
    return {
        "code_version": code_fingerprint(DEPLOYMENT.catalog_dir),
        "queues": sorted(q.name for q in consumer.queues) if consumer else [],
    }
