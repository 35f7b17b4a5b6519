"""What a results store is, whichever holds the tables (one DuckDB file: local.Warehouse; a folder of Parquet files
many processes write at once: shared.SharedStore): the one interface the stages, the read model and the CLI use,
and the reads both implement the same way on top of their own connections."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import duckdb
import pandas as pd

from holistic_dagster.errors import HolisticError


class ReadOnlyError(HolisticError):
    pass


OUT_OF_REACH = "out of holistic query's reach"
_OTHER_FILES = (
    "holistic query reads the warehouse only: other files and databases (read_csv, ATTACH, COPY TO, EXPORT), "
    "extensions and secrets are out of its reach."
)
_WRITES_REFUSED = (
    "holistic query opens the warehouse read-only: statements that write (INSERT, UPDATE, DELETE, CREATE, DROP, ...) "
    "are refused."
)
_ROW_WRITES = {duckdb.StatementType.INSERT, duckdb.StatementType.UPDATE, duckdb.StatementType.DELETE,
               duckdb.StatementType.MERGE_INTO}  # fmt: skip


@runtime_checkable
class ResultStore(Protocol):
    path: Path

    def connect(
        self, read_only: bool = False, sandboxed: bool = False
    ) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection over the tables (sandboxed: a user's query, which reaches nothing else)."""

    def ensure_schema(self) -> None:
        """Creates the store, or brings it up to this release's schema."""

    def replace(self, keys: Mapping[str, str], frames: Mapping[str, pd.DataFrame]) -> None:
        """Replaces one partition (the rows matching `keys`) of each table at once: all or nothing."""

    def replace_partitions(self, jobs: list[tuple[Mapping[str, str], Mapping[str, pd.DataFrame]]]) -> None:
        """Several partitions' replace, as one write."""

    def upsert(self, table: str, frame: pd.DataFrame) -> None:
        """Inserts the rows, replacing those with the same key."""

    def df(self, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
        """A query on a read-only connection."""

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """A user's SQL: reads the store and nothing else, writes nothing (ReadOnlyError says why)."""


class StoreReads:
    """df and query for a store, on its own connect(read_only=True) and connect(sandboxed=True)."""

    def connect(
        self, read_only: bool = False, sandboxed: bool = False
    ) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        raise NotImplementedError  # each store's own

    def df(self, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
        with self.connect(read_only=True) as con:
            return con.execute(sql, params or []).df()

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """A user's SQL on a read-only, sandboxed connection: statements that write, and any that reach another
        file, another database, an extension or a setting, are refused by the engine."""
        with self.connect(sandboxed=True) as con:
            return run_user_query(con, sql)


def run_user_query(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Runs a user's SQL on a sandboxed connection, saying in words what the sandbox refused."""
    try:
        cursor = con.execute(sql)
    except duckdb.PermissionException as e:  # file system, extensions: enable_external_access
        raise ReadOnlyError(_OTHER_FILES + f" ({e})") from None
    except duckdb.InvalidInputException as e:
        message = str(e).lower()
        if "configuration" in message:  # SET / PRAGMA: lock_configuration
            raise ReadOnlyError(
                f"holistic query reads the warehouse only: its settings cannot be changed (SET, PRAGMA). ({e})"
            ) from None
        if "read-only" in message or "read only" in message:
            raise ReadOnlyError(_WRITES_REFUSED + f" ({e})") from None
        raise
    except (duckdb.CatalogException, duckdb.BinderException) as e:
        # a shared store's tables are views: writing rows into one fails when bound, before the read-only check
        if any(statement.type in _ROW_WRITES for statement in con.extract_statements(sql)):
            raise ReadOnlyError(_WRITES_REFUSED + f" ({e})") from None
        raise
    except duckdb.Error as e:
        if OUT_OF_REACH in str(e):  # a shared store's files, which the sandbox reads through a read-only filesystem
            raise ReadOnlyError(_OTHER_FILES + f" ({str(e).strip().splitlines()[-1]})") from None
        raise
    columns = [d[0] for d in cursor.description or []]
    return columns, cursor.fetchall()
