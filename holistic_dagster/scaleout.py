"""Scale-out settings (resources/celery.yaml): which Celery broker the runs and workers share, which queue each
step goes to, and the code fingerprint that tells a worker started from another checkout. Free of Dagster:
the executor (defs/celery.py) and the worker entry point (defs/celery_app.py) both build their Celery app from
these settings (defs/celery.py's app_args), so the two can never disagree about the broker or the queues."""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path

from kombu.utils.url import maybe_sanitize_url
from pydantic import Field

from holistic_dagster import settings
from holistic_dagster.config.schema import read_yaml, validate
from holistic_dagster.errors import CatalogError
from holistic_dagster.records import Strict

QUEUE_PATTERN = r"^[A-Za-z0-9_.-]+$"
# the remote-control command a worker answers with its code fingerprint and queues (defs/celery_app.py)
CODE_VERSION_COMMAND = "holistic_code_version"


class CelerySettings(Strict):
    broker_env: str = "HOLISTIC_CELERY_BROKER"
    backend_env: str = "HOLISTIC_CELERY_BACKEND"
    cpu_queue: str = Field("cpu", pattern=QUEUE_PATTERN)
    requests_queue: str = Field("requests", pattern=QUEUE_PATTERN)
    max_sends: int = Field(3, ge=1)
    worker_check_s: float = Field(5, gt=0)
    missed_pings: int = Field(3, ge=1)
    worker_wait_s: float = Field(30, ge=0)  # how long a run waits for a worker on a step's queue (workers starting)

    def broker(self) -> str:
        url = os.environ.get(self.broker_env, "")
        if not url:
            raise CatalogError(
                f"HOLISTIC_EXECUTOR=celery needs a broker: set {self.broker_env} (e.g. redis://127.0.0.1:6379/0), "
                f"the variable that {celery_settings_file()} names in broker_env"
            )
        return url

    def backend(self) -> str:
        return os.environ.get(self.backend_env) or self.broker()

    def shown_broker(self) -> str:
        """The broker URL for messages: its password masked."""
        return f"{self.broker_env}={maybe_sanitize_url(self.broker())}"


def celery_settings_file() -> Path:
    return settings.resources_dir() / "celery.yaml"


def load_celery_settings(path: Path | None = None) -> CelerySettings:
    path = Path(path) if path else celery_settings_file()
    if not path.exists():
        return CelerySettings()
    return validate(CelerySettings, read_yaml(path) or {}, path)


@cache
def code_fingerprint() -> str:
    """A hash of this checkout's code and catalog (package sources, assets/): a worker whose fingerprint differs
    from the run's would run other code than the run planned, so its steps are refused."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parent
    roots = [package, settings.catalog_dir()]
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in {".py", ".sql", ".j2", ".yaml"}):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]
