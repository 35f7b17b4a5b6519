"""Where things live. Every path has a default inside the repository and an environment override."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class EnvironmentVariable:
    name: str
    default: str
    meaning: str


# Every environment variable the product reads (docs/reference/environment.md is generated from this; a test fails
# on a HOLISTIC_ or DAGSTER_PG_ name in the code that is not listed). Secrets are read only where a file names
# their variable (api_key_env, url_env): those variables are the deployment's own choice and are not listed.
ENVIRONMENT = (
    EnvironmentVariable(
        "HOLISTIC_HOME",
        "data/",
        "downloads, reports, the default warehouse and Dagster home, and the default model cache",
    ),
    EnvironmentVariable(
        "HOLISTIC_MODEL_CACHE",
        "<home>",
        "model weights made or fetched here: GGUF files converted (models/), demo models built (demo_models/), the "
        "ladder's files (ladder/); homes, checkouts of one release and processes may share one (a conversion or "
        "build is made once, under a lock). Cached answers are keyed by the weights' folder: a new cache answers anew",
    ),
    EnvironmentVariable(
        "HOLISTIC_WAREHOUSE",
        "<home>/warehouse.duckdb",
        "the DuckDB results file; a folder (or a "
        "value ending in /): the shared results store of the scale-out setup (`--db` for one command)",
    ),
    EnvironmentVariable(
        "HOLISTIC_DATA_DIR",
        "<home>/settings.toml's data_dirs, then ../shared/data",
        "folders (separated by :) holding upstream data files, searched before downloading, e.g. ../shared/data "
        "(`--data-dir` for one command; `holistic demo` and `evaluate` remember the folders given them)",
    ),
    EnvironmentVariable(
        "HOLISTIC_OFFLINE",
        "(unset)",
        "1, true or yes: never download; a missing file is an error (an optional scenario is skipped with its reason)",
    ),
    EnvironmentVariable(
        "HOLISTIC_MAX_DOWNLOAD_MB",
        "8192",
        "the largest upstream file a scenario may download, in MB (a larger one is refused, nothing kept)",
    ),
    EnvironmentVariable("HOLISTIC_CATALOG", "assets/", "another evaluation catalog: suites/, scenarios/, templates/"),
    EnvironmentVariable(
        "HOLISTIC_RESOURCES",
        "resources/",
        "another folder of deployment files: models.yaml, "
        "backends.yaml, alerts.yaml, shadow.yaml, celery.yaml, automation.yaml",
    ),
    EnvironmentVariable(
        "HOLISTIC_MAX_EVAL_INSTANCES",
        "(unset)",
        "a cap on every suite scenario's max_eval_instances (as `holistic evaluate --max-eval-instances`)",
    ),
    EnvironmentVariable(
        "DAGSTER_HOME", "<home>/dagster", "Dagster's runs, events and check results (what `holistic ui` shows)"
    ),
    EnvironmentVariable(
        "HOLISTIC_EXECUTOR",
        "in_process",
        "celery: every step a Celery task on `holistic worker` processes (needs DAGSTER_PG_HOST and a broker)",
    ),
    EnvironmentVariable(
        "HOLISTIC_CELERY_BROKER",
        "(none)",
        "the broker's Redis URL under HOLISTIC_EXECUTOR=celery (the name is `broker_env` in resources/celery.yaml)",
    ),
    EnvironmentVariable(
        "HOLISTIC_CELERY_BACKEND",
        "the broker",
        "the Celery result backend's URL (`backend_env` in resources/celery.yaml)",
    ),
    EnvironmentVariable(
        "HOLISTIC_ALERT_WEBHOOK",
        "(unset: nothing posted)",
        "the Slack-compatible webhook URL of graded alerts (`webhook.url_env` in resources/alerts.yaml)",
    ),
    EnvironmentVariable(
        "HOLISTIC_VOTE_KEY", "a key file <home>/vote.key", "the key that signs `holistic vote`'s invitation links"
    ),
    EnvironmentVariable(
        "HOLISTIC_DEBUG", "(unset)", "1: an unexpected error shows its traceback (as `holistic --debug`)"
    ),
    EnvironmentVariable(
        "DAGSTER_PG_HOST",
        "(unset)",
        "Dagster's storage in PostgreSQL (dagster.postgres.yaml); "
        "with DAGSTER_PG_PORT, DAGSTER_PG_USER, DAGSTER_PG_PASSWORD and DAGSTER_PG_DB",
    ),
    EnvironmentVariable("DAGSTER_PG_PORT", "(unset)", "PostgreSQL's port, with DAGSTER_PG_HOST"),
    EnvironmentVariable("DAGSTER_PG_USER", "(unset)", "PostgreSQL's user, with DAGSTER_PG_HOST"),
    EnvironmentVariable("DAGSTER_PG_PASSWORD", "(unset)", "PostgreSQL's password, with DAGSTER_PG_HOST"),
    EnvironmentVariable("DAGSTER_PG_DB", "(unset)", "PostgreSQL's database, with DAGSTER_PG_HOST"),
    EnvironmentVariable(
        "OPENAI_BASE_URL",
        "(unset)",
        "read by the openai SDK for an openai model without `base_url` (with OPENAI_ORG_ID and OPENAI_PROJECT_ID)",
    ),
)


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


def model_cache_dir() -> Path:
    """Model weights made or fetched here (HOLISTIC_MODEL_CACHE, default the home): models/ (GGUF files converted),
    demo_models/ (built), ladder/ (installed). A conversion or build is made once, under a file lock, so several homes
    or processes of one release can share the folder (a release that converts differently redoes the conversion)."""
    return _path("HOLISTIC_MODEL_CACHE", home_dir())


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


# a data folder beside the checkout (how the demo's machines hold upstream files): searched when nothing else is set
SIBLING_DATA = REPO_ROOT.parent / "shared" / "data"


def data_dirs() -> list[Path]:
    """Local directories holding upstream data files, searched before downloading: HOLISTIC_DATA_DIR (separated by
    the OS path separator; set but empty: none) where it is set; else the folders remembered in
    <home>/settings.toml (`holistic demo` or `evaluate` given them remember them) and ../shared/data beside the
    checkout, those that exist."""
    if "HOLISTIC_DATA_DIR" in os.environ:
        value = os.environ["HOLISTIC_DATA_DIR"]
        return [Path(p).expanduser().resolve() for p in value.split(os.pathsep) if p]
    found = [d for d in remembered_data_dirs() if d.is_dir()]
    if SIBLING_DATA.is_dir() and SIBLING_DATA.resolve() not in found:
        found.append(SIBLING_DATA.resolve())
    return found


def settings_file() -> Path:
    """What the project remembers between commands (today: the data folders), in the home."""
    return home_dir() / "settings.toml"


def remembered_data_dirs() -> list[Path]:
    import tomllib

    path = settings_file()
    try:
        with path.open("rb") as f:
            value = tomllib.load(f).get("data_dirs", [])
    except FileNotFoundError:
        return []
    except (OSError, tomllib.TOMLDecodeError) as e:
        from holistic_dagster.errors import CatalogError

        raise CatalogError(f"{path}: not a settings file we can read ({e}); fix or delete it") from e
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        from holistic_dagster.errors import CatalogError

        raise CatalogError(f"{path}: data_dirs must be a list of folder paths, got {value!r}")
    return [Path(v).expanduser().resolve() for v in value]


def remember_data_dirs(dirs: list[Path]) -> bool:
    """Writes the data folders to the settings file, so that later commands (in any shell) search them without
    HOLISTIC_DATA_DIR. Returns whether anything changed."""
    import json

    dirs = [Path(d).resolve() for d in dirs]
    if dirs == remembered_data_dirs():
        return False
    path = settings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Written by `holistic demo` / `holistic evaluate` from the data folders they were given (--data-dir or",
        "# HOLISTIC_DATA_DIR); every command searches these when HOLISTIC_DATA_DIR is not set. Edit freely.",
        # a JSON string is a TOML basic string (ensure_ascii=False: TOML has no surrogate-pair escapes)
        "data_dirs = [" + ", ".join(json.dumps(str(d), ensure_ascii=False) for d in dirs) + "]",
    ]
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # two commands at once: each its own
    temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
    temporary.replace(path)
    return True


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


def max_download_bytes() -> int:
    """The largest file a download may bring (HOLISTIC_MAX_DOWNLOAD_MB, default 8192)."""
    value = os.environ.get("HOLISTIC_MAX_DOWNLOAD_MB", "").strip() or "8192"
    try:
        megabytes = float(value)
    except ValueError:
        raise ValueError(f"HOLISTIC_MAX_DOWNLOAD_MB must be a number of megabytes; got {value!r}") from None
    return int(megabytes * 1024 * 1024)


def allow_download() -> bool:
    return os.environ.get("HOLISTIC_OFFLINE", "") not in ("1", "true", "yes")


EXECUTORS = ("in_process", "celery")


def executor() -> str:
    """How Dagster runs a job's steps (HOLISTIC_EXECUTOR): `in_process` by default (the CLI runs in one process;
    runs launched from the UI use Dagster's multiprocess executor); `celery`: every step as a task on Celery
    workers (resources/celery.yaml, docs/how-to/scale-out.md)."""
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
