"""The DuckDB results warehouse: the one place that writes each table.

DuckDB allows one writing process per file, and a read-only connection cannot open while another process
writes. Every connection therefore takes a file lock beside the database for its (short) lifetime: stages
compute without it and hold it only to write. Each write replaces one partition in one transaction, so a
failed stage leaves earlier results intact and no partial rows.

A connection ATTACHes the file to one in-memory DuckDB instance that the process keeps (and DETACHes it, which
closes the file, before the lock is let go): opening a new DuckDB instance builds its whole catalog of built-in
functions, 30-40 ms of CPU each time, against 5 ms to attach a file, and a run opens the warehouse ~70 times.

Many writer processes (Celery workers, several hosts) write a SharedStore instead (shared.py): open_warehouse
picks one by the path's name.
"""

from __future__ import annotations

import os
from pathlib import Path

from holistic_dagster.errors import HolisticError
from holistic_dagster.warehouse.local import TABLES, BackgroundWriter, Warehouse, WarehouseWriteError
from holistic_dagster.warehouse.migrations import SCHEMA_VERSION
from holistic_dagster.warehouse.shared import SharedStore
from holistic_dagster.warehouse.store import ReadOnlyError, ResultStore, run_user_query
from holistic_dagster.warehouse.store_files import refuse_special

__all__ = [
    "SCHEMA_VERSION",
    "TABLES",
    "BackgroundWriter",
    "ReadOnlyError",
    "ResultStore",
    "SharedStore",
    "Warehouse",
    "WarehouseWriteError",
    "open_warehouse",
    "run_user_query",
]


def open_warehouse(path: Path | str) -> ResultStore:
    """A path named *.duckdb, or an existing file, is one DuckDB file (one writer at a time); an existing folder,
    or a path ending in a separator, is a shared results store that many processes write at once."""
    refuse_special(path)  # a FIFO named warehouse.duckdb would block DuckDB's open forever
    if str(path).endswith(("/", os.sep)) or Path(path).is_dir():
        return SharedStore(path)
    if Path(path).suffix == ".duckdb" or Path(path).is_file():
        return Warehouse(path)
    raise HolisticError(
        f"warehouse {path}: name a DuckDB file *.duckdb, or create the folder first for a results store that many "
        "processes write at once"
    )
