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


def warehouse_path() -> Path:
    """The DuckDB results file (HOLISTIC_WAREHOUSE)."""
    return _path("HOLISTIC_WAREHOUSE", home_dir() / "warehouse.duckdb")


def data_dirs() -> list[Path]:
    """Local directories holding upstream data files, searched before downloading (HOLISTIC_DATA_DIR,
    separated by the OS path separator)."""
    value = os.environ.get("HOLISTIC_DATA_DIR", "")
    return [Path(p).expanduser().resolve() for p in value.split(os.pathsep) if p]


def download_dir() -> Path:
    return home_dir() / "downloads"


def allow_download() -> bool:
    return os.environ.get("HOLISTIC_OFFLINE", "") not in ("1", "true", "yes")


def dagster_config_file() -> Path:
    """The instance configuration to use: dagster.postgres.yaml when DAGSTER_PG_HOST is set (PostgreSQL storage,
    connection from DAGSTER_PG_* variables), otherwise dagster.yaml (embedded SQLite)."""
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
