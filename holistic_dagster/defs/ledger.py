"""The in-process runs going on (the CLI's and evaluate_suite's), as one small file each beside the Dagster
instance (<DAGSTER_HOME>/in_process_runs/): written before the run starts, removed when it ends. A file whose
process is gone marks a run that was killed. Reading them needs no Dagster, so `holistic evaluate` can tell,
also when it has nothing to run and does not load Dagster, whether a killed run is waiting to be marked failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

FOLDER = "in_process_runs"


def _me() -> dict[str, float]:
    process = psutil.Process()
    return {"pid": process.pid, "started": round(process.create_time(), 2)}


@contextmanager
def running(home: str | Path | None) -> Iterator[None]:
    """Marks an in-process run as going on in this process for the block's duration (no-op without a home)."""
    if not home:
        yield
        return
    folder = Path(home) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{os.getpid()}-{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(_me()))
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def killed(home: str | Path | None) -> list[Path]:
    """The marks left by processes that ended in the middle of a run."""
    folder = Path(home) / FOLDER if home else None
    if folder is None or not folder.is_dir():
        return []
    dead = []
    for path in folder.glob("*.json"):
        try:
            mark = json.loads(path.read_text())
            alive = abs(psutil.Process(int(mark["pid"])).create_time() - float(mark["started"])) < 0.05
        except (psutil.Error, OSError, ValueError, KeyError):
            alive = False  # gone, or a pid reused by another process, or an unreadable mark
        if not alive:
            dead.append(path)
    return dead


def forget(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()
