"""What the verbs share: the consoles, the options, one error line, stored text shown safely, the deployment a
command works on (--db, --data-dir over the environment's), and the default suite version."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

console = Console()
if not console.is_terminal:  # piped or logged: room for the long metric names rather than 80 columns
    console = Console(width=160)
err = Console(stderr=True, soft_wrap=True)  # an error is one line, however long

DbOption = Annotated[
    Optional[Path],
    typer.Option(
        "--db",
        help="DuckDB warehouse file, or the folder of a shared results store (default: $HOLISTIC_WAREHOUSE or "
        "data/warehouse.duckdb)",
    ),
]
# --suite is HELM's word; --version, its former name, is still accepted (and `holistic --version` is the program's)
VersionOption = Annotated[
    Optional[str],
    typer.Option(
        "--suite",
        "--version",
        help="suite version (a file in assets/suites/; default: the newest); --version is its former name",
    ),
]
DataDirOption = Annotated[
    Optional[Path], typer.Option(help="folder with upstream data files (default: $HOLISTIC_DATA_DIR)")
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="run every step, also those whose inputs are unchanged since their last run")
]


def deployment(db: Path | None = None, data_dir: Path | None = None, max_eval_instances: int | None = None):
    """The deployment a command works on: the environment's (settings.py), with --db, --data-dir and
    --max-eval-instances in place."""
    from holistic_dagster.config.deployment import Deployment

    if data_dir is not None and not data_dir.is_dir():  # checked before anything starts, naming what was passed
        fail(f"--data-dir {data_dir}: no such folder (it holds the upstream data files, e.g. ../shared/data)")
    return Deployment.of(
        warehouse=db, data_dirs=[data_dir] if data_dir else None, max_eval_instances=max_eval_instances
    )


def default_version(deployment=None) -> str:
    """The newest suite version of the deployment's catalog."""
    from holistic_dagster.config.catalog import Catalog

    return (deployment.catalog() if deployment else Catalog()).newest_version()


def shown(text: str) -> str:
    """Stored text (dataset text, model output, ids) as the terminal shows it: its control characters as pictures
    (an escape sequence in the data must not drive the terminal) and no rich markup taken from it."""
    from holistic_dagster.config.redaction import visible

    return escape(visible(str(text)))


def shown_on_terminal(text: str) -> str:
    from holistic_dagster.config.redaction import visible

    return visible(text)


def invocation() -> str:
    """How the user calls this program, for the hints we print: `holistic` where that name on PATH is this program
    (the venv activated), else the path they ran (`.venv/bin/holistic`, as the docs write it)."""
    import os
    import shutil
    import sys

    ran = Path(sys.argv[0])
    on_path = shutil.which("holistic")
    if ran.name != "holistic" or (on_path and Path(on_path).resolve() == ran.resolve()):
        return "holistic"
    try:
        return os.path.relpath(ran)
    except ValueError:
        return str(ran)


def fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(1)
