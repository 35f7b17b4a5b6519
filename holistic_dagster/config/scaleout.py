"""Scale-out settings (resources/celery.yaml): which Celery broker the runs and workers share and which queue each
step goes to. The executor (defs/celery.py) and the worker entry point (defs/celery_app.py) both build their Celery
app from these settings (defs/celery.py's app_args), so the two can never disagree about the broker or the queues;
a worker started from another checkout is told by records.code_fingerprint."""

from __future__ import annotations

import os
from pathlib import Path

from kombu.utils.url import maybe_sanitize_url
from pydantic import Field, PrivateAttr

from holistic_dagster.config.schema import read_yaml, validate
from holistic_dagster.errors import CatalogError
from holistic_dagster.records import Strict

QUEUE_PATTERN = r"^[A-Za-z0-9_.-]+$"
# the remote-control command a worker answers with its code fingerprint and queues (defs/celery_app.py)
CODE_VERSION_COMMAND = "holistic_code_version"


class CelerySettings(Strict):
    # the NAME of the variable holding the broker's URL
    broker_env: str = "HOLISTIC_CELERY_BROKER"
    # the NAME of the variable holding the result backend's URL (unset: the broker)
    backend_env: str = "HOLISTIC_CELERY_BACKEND"
    # the queue of datasets, prompts, scores and summaries
    cpu_queue: str = Field("cpu", pattern=QUEUE_PATTERN)
    # the queue of model requests of models without a `queue`
    requests_queue: str = Field("requests", pattern=QUEUE_PATTERN)
    # how many times a step is sent at most (its worker died: sent again)
    max_sends: int = Field(3, ge=1)
    # seconds between pings of a running step's worker
    worker_check_s: float = Field(5, gt=0)
    # pings a worker may miss before its step is sent again
    missed_pings: int = Field(3, ge=1)
    worker_wait_s: float = Field(30, ge=0)  # how long a run waits for a worker on a step's queue (workers starting)
    _source: Path = PrivateAttr(default=Path("resources/celery.yaml"))  # the file these were read from (messages)

    def broker(self) -> str:
        url = os.environ.get(self.broker_env, "")
        if not url:
            raise CatalogError(
                f"HOLISTIC_EXECUTOR=celery needs a broker: set {self.broker_env} (e.g. redis://127.0.0.1:6379/0), "
                f"the variable that {self._source} names in broker_env"
            )
        return url

    def backend(self) -> str:
        return os.environ.get(self.backend_env) or self.broker()

    def shown_broker(self) -> str:
        """The broker URL for messages: its password masked."""
        return f"{self.broker_env}={maybe_sanitize_url(self.broker())}"


def load_celery_settings(path: Path) -> CelerySettings:
    """The scale-out settings (the file is optional: without it, the defaults)."""
    path = Path(path)
    found = validate(CelerySettings, read_yaml(path) or {}, path) if path.exists() else CelerySettings()
    found._source = path
    return found
