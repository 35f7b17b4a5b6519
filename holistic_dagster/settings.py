"""Where things live. Every path has a default inside the repository and an environment override."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _path(env: str, default: Path) -> Path:
    value = os.environ.get(env)
    return Path(value).expanduser().resolve() if value else default


def catalog_dir() -> Path:
    """The evaluation catalog: suites/, scenarios/, templates/ (HOLISTIC_CATALOG)."""
    return _path("HOLISTIC_CATALOG", REPO_ROOT / "assets")


def resources_dir() -> Path:
    """Deployment config: models.yaml (HOLISTIC_RESOURCES)."""
    return _path("HOLISTIC_RESOURCES", REPO_ROOT / "resources")


def home_dir() -> Path:
    """Working data: the warehouse, built demo models, downloads (HOLISTIC_HOME)."""
    return _path("HOLISTIC_HOME", REPO_ROOT / "data")


def dagster_home() -> Path:
    """Dagster's instance folder (DAGSTER_HOME, default <home>/dagster): the runs, events and check results of
    `holistic evaluate`, which `holistic ui` shows."""
    return _path("DAGSTER_HOME", home_dir() / "dagster")


def warehouse_path() -> Path:
    """Where results go (HOLISTIC_WAREHOUSE); warehouse.open_warehouse tells the two kinds apart by the path.
    A name ending in .duckdb (the default), or an existing file: one DuckDB file, written by one process at a
    time. An existing folder, or a value ending in "/": a shared results store (warehouse/shared.py), Parquet
    files that many processes write at once, e.g. Celery workers on several hosts sharing the folder."""
    path = _path("HOLISTIC_WAREHOUSE", home_dir() / "warehouse.duckdb")
    if os.environ.get("HOLISTIC_WAREHOUSE", "").endswith(("/", os.sep)):
        path.mkdir(parents=True, exist_ok=True)  # a Path drops the trailing "/": the folder itself says "store"
    return path


def data_dirs() -> list[Path]:
    """Local directories holding upstream data files, searched before downloading (HOLISTIC_DATA_DIR,
    separated by the OS path separator)."""
    value = os.environ.get("HOLISTIC_DATA_DIR", "")
    return [Path(p).expanduser().resolve() for p in value.split(os.pathsep) if p]


def download_dir() -> Path:
    return home_dir() / "downloads"


MAX_EVAL_ENV = "HOLISTIC_MAX_EVAL_INSTANCES"


def max_eval_instances() -> int | None:
    """A cap on every suite scenario's max_eval_instances (HOLISTIC_MAX_EVAL_INSTANCES; `holistic evaluate
    --max-eval-instances`): a HELM leaderboard suite at HELM's sizes run at a scale a CPU finishes, as helm-run's
    own -m does. None: the suites' sizes."""
    value = os.environ.get(MAX_EVAL_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        from holistic_dagster.errors import CatalogError

        raise CatalogError(f"{MAX_EVAL_ENV}={value!r}: a positive whole number of instances")
    return int(value)


def allow_download() -> bool:
    return os.environ.get("HOLISTIC_OFFLINE", "") not in ("1", "true", "yes")


EXECUTORS = ("in_process", "celery")


def executor() -> str:
    """How Dagster runs a job's steps (HOLISTIC_EXECUTOR): `in_process` by default (the CLI runs in one process;
    runs launched from the UI use Dagster's multiprocess executor); `celery`: every step as a task on Celery
    workers (resources/celery.yaml, docs/scaling.md)."""
    from holistic_dagster.errors import CatalogError

    value = os.environ.get("HOLISTIC_EXECUTOR", "") or "in_process"
    if value not in EXECUTORS:
        raise CatalogError(f"HOLISTIC_EXECUTOR={value!r}: expected one of {', '.join(EXECUTORS)}")
    return value


def dagster_config_file() -> Path:
    """The instance configuration to use: dagster.celery.yaml with HOLISTIC_EXECUTOR=celery (PostgreSQL storage,
    which workers on other hosts share, and a run queue), dagster.postgres.yaml when DAGSTER_PG_HOST is set
    (PostgreSQL storage, connection from DAGSTER_PG_* variables), otherwise dagster.yaml (embedded SQLite)."""
    if executor() == "celery":
        if not os.environ.get("DAGSTER_PG_HOST"):
            from holistic_dagster.errors import CatalogError

            raise CatalogError(
                "HOLISTIC_EXECUTOR=celery keeps Dagster's runs and events in PostgreSQL, which every worker reaches: "
                "set DAGSTER_PG_HOST, DAGSTER_PG_PORT, DAGSTER_PG_USER, DAGSTER_PG_PASSWORD and DAGSTER_PG_DB"
            )
        return REPO_ROOT / "dagster.celery.yaml"
    name = "dagster.postgres.yaml" if os.environ.get("DAGSTER_PG_HOST") else "dagster.yaml"
    return REPO_ROOT / name


def prepare_dagster_home(home: Path) -> Path:
    """DAGSTER_HOME with the chosen instance configuration linked in as dagster.yaml (relinked when the choice
    changes)."""
    home.mkdir(parents=True, exist_ok=True)
    config, wanted = home / "dagster.yaml", dagster_config_file()
    if config.is_symlink() and config.resolve() != wanted.resolve():
        config.unlink()
    if not config.exists() and wanted.exists():
        config.symlink_to(wanted)
    return home
