"""One DuckDB file as the warehouse (see holistic_dagster.warehouse): its schema, the file lock, atomic partition
writes, the read-only query connection, and the background writer the completion cache uses."""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from filelock import FileLock

from holistic_dagster.errors import HolisticError
from holistic_dagster.warehouse import migrations, tables
from holistic_dagster.warehouse.journal import Segment, journal_dir
from holistic_dagster.warehouse.migrations import SCHEMA_VERSION
from holistic_dagster.warehouse.store import ResultStore, StoreReads

TABLES = tuple(name for name in tables.TABLES if name != "schema_info")  # the results' tables (not its settings)


def schema_sql() -> str:
    """The schema made from the tables' declarations (warehouse/tables/) and the views (views.sql): applied here;
    the shared store and the reference read it too."""
    return tables.schema_sql()


_SCHEMA_READY: set[Path] = set()  # files this process has already brought up to the schema


class WarehouseWriteError(HolisticError):
    """A write that did not happen (full disk, read-only folder): the earlier rows are unchanged."""


# a query connection reaches nothing but its own file: no other files (COPY TO, read_csv, glob, EXPORT), no
# other databases (ATTACH), no extensions (INSTALL, LOAD), no persistent secrets; and it cannot undo that (SET).
# No temporary folder either: DuckDB lets even a sandboxed connection write into its spill folder (<file>.tmp/),
# COPY TO included. Order matters: the configuration is locked last
SANDBOX = {"temp_directory": "", "enable_external_access": False, "lock_configuration": True}


def lock_down(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Applies SANDBOX to an open connection, in its order (DuckDB's connect-time config applies it in its own)."""
    for setting, value in SANDBOX.items():
        con.execute(f"SET {setting} = {_literal(value) if isinstance(value, str) else str(value).lower()}")
    return con


class Warehouse(StoreReads):
    """One DuckDB file (one writer at a time): the store.ResultStore a single machine uses."""

    def __init__(self, path: Path | str, lock_timeout_s: float = 600):
        self.path = Path(path)
        self._lock = FileLock(str(self.path) + ".lock", timeout=lock_timeout_s)

    @contextmanager
    def connect(self, read_only: bool = False, sandboxed: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """sandboxed (read-only): the engine reaches nothing but this file (SANDBOX)."""
        read_only = read_only or sandboxed
        if read_only and not self.path.exists():
            raise HolisticError(f"no warehouse at {self.path}: run `holistic demo` (or materialize assets) first")
        if read_only and self.path not in _SCHEMA_READY:
            self._upgrade_if_older()
        if not read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise WarehouseWriteError(f"cannot write the warehouse {self.path}: {e}") from e
        with self._locked(read_only):
            if sandboxed:  # a user's query: an instance of its own, whose settings the user cannot change
                with lock_down(duckdb.connect(str(self.path), read_only=True)) as con:
                    yield con
                return
            with _attached(self.path, read_only) as con:
                if not read_only and self.path not in _SCHEMA_READY:
                    self._ensure_schema(con)
                    _SCHEMA_READY.add(self.path)
                yield con

    def _upgrade_if_older(self) -> None:
        """A file an earlier release wrote gets this release's tables before it is first read in this process (the
        readers query them), where it can be written; one that cannot be written is read as it is."""
        with self._locked(True), _attached(self.path, True) as con:
            current = _schema_version(con) == SCHEMA_VERSION
        if current:
            _SCHEMA_READY.add(self.path)
            return
        try:
            self.ensure_schema()
        except WarehouseWriteError:
            pass

    def ensure_schema(self) -> None:
        """Brings the file up to this release's schema (the tables a newer release added), creating it if new."""
        with self.connect():
            pass

    @contextmanager
    def _locked(self, read_only: bool) -> Iterator[None]:
        try:
            self._lock.acquire()
        except OSError as e:
            # a folder this process cannot write (read-only mount, another user's files) cannot take the lock
            # file; nothing can be written there through this class either, so reading needs no lock
            if read_only:
                yield
                return
            raise WarehouseWriteError(
                f"cannot write the warehouse {self.path}: its lock file cannot be created ({e}); "
                "point --db or HOLISTIC_WAREHOUSE at a folder you can write"
            ) from e
        try:
            yield
        finally:
            self._lock.release()

    @contextmanager
    def _writing(self, con: duckdb.DuckDBPyConnection, transaction: bool) -> Iterator[None]:
        """A write that fails (e.g. "No space left on device" at COMMIT) is rolled back and reported as itself,
        with the file's name: not as the "cannot rollback" that follows when DuckDB has already ended it."""
        if transaction:
            con.execute("BEGIN TRANSACTION")
        try:
            yield
            if transaction:
                con.execute("COMMIT")
        except BaseException as e:
            if transaction:
                with contextlib.suppress(duckdb.Error):  # a failed COMMIT has already ended the transaction
                    con.execute("ROLLBACK")
            if isinstance(e, (duckdb.IOException, duckdb.TransactionException, OSError)):
                raise WarehouseWriteError(
                    f"could not write the warehouse {self.path} (earlier results are unchanged): {e}"
                ) from e
            raise

    @staticmethod
    def _ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
        """The declared schema, and for a file an older release wrote, the migrations since its version: each table
        they rebuild is renamed aside, made anew, and its rows copied across under their columns' names now."""
        todo = migrations.pending(_schema_version(con))
        existing = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        rebuilt = [t for t in migrations.rebuilt_tables(todo) if t in existing]
        if rebuilt:
            con.execute("BEGIN TRANSACTION")
            for table in rebuilt:
                con.execute(f"ALTER TABLE {table} RENAME TO {table}_old")
        con.execute(schema_sql())
        if rebuilt:
            for table in rebuilt:
                now = {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
                named = migrations.renames(todo, table)
                kept = [(c, named.get(c, c)) for c in (r[0] for r in con.execute(f"DESCRIBE {table}_old").fetchall())]
                kept = [(old, new) for old, new in kept if new in now]
                con.execute(
                    f"INSERT INTO {table} ({', '.join(_quote(n) for _, n in kept)}) "
                    f"SELECT {', '.join(_quote(o) for o, _ in kept)} FROM {table}_old"
                )
                con.execute(f"DROP TABLE {table}_old")
            con.execute("COMMIT")
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('schema_version', ?)", [SCHEMA_VERSION])

    def replace(self, keys: Mapping[str, str], frames: Mapping[str, pd.DataFrame]) -> None:
        """In one transaction: delete each table's rows for `keys`, insert the new rows."""
        self.replace_partitions([(keys, frames)])

    def replace_partitions(self, jobs: list[tuple[Mapping[str, str], Mapping[str, pd.DataFrame]]]) -> None:
        """Several partitions' replace in one transaction: all of them are written, or none."""
        with self.connect() as con, self._writing(con, transaction=True):
            for keys, frames in jobs:
                self._replace(con, keys, frames)

    @staticmethod
    def _replace(con: duckdb.DuckDBPyConnection, keys: Mapping[str, str], frames: Mapping[str, pd.DataFrame]) -> None:
        for table, frame in frames.items():
            assert table in TABLES, table
            columns = {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
            where = [k for k in keys if k in columns]
            if where:
                con.execute(
                    f"DELETE FROM {table} WHERE " + " AND ".join(f"{k} = ?" for k in where),
                    [keys[k] for k in where],
                )
            if len(frame):
                con.register("incoming", frame)
                con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
                con.unregister("incoming")

    def upsert(self, table: str, frame: pd.DataFrame) -> None:
        """Insert rows, replacing those with the same primary key (one transaction)."""
        assert table in TABLES, table
        if frame.empty:
            return
        with self.connect() as con, self._writing(con, transaction=False):
            con.register("incoming", frame)
            con.execute(f"INSERT OR REPLACE INTO {table} BY NAME SELECT * FROM incoming")
            con.unregister("incoming")


class BackgroundWriter:
    """Upserts rows into one table from a background thread, committing whatever has queued up in one
    transaction, at most once per `interval_s`: the caller (a local model's batches, an event loop of HTTP
    requests) never waits on DuckDB. Committing every batch as it came made a local model's generation 1.7x
    slower on 2 cores: each commit's CPU competes with torch's threads. What is handed over between two commits
    is kept in a write-ahead journal first (journal.py), so a killed process loses no row it was handed: the
    next reader replays it (journal.replay) and a finished answer is never asked for again."""

    def __init__(self, warehouse: ResultStore, table: str, interval_s: float = 1.0) -> None:
        self.warehouse, self.table, self.interval_s = warehouse, table, interval_s
        self._queue: queue.Queue[list[dict[str, Any]] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"write-{table}", daemon=True)
        self._lock = threading.Lock()  # a hand-over is in the journal segment that the queue's rows belong to
        self._segment: Segment | None = None

    def __enter__(self) -> BackgroundWriter:
        self._segment = Segment(journal_dir(self.warehouse.path), self.table)
        self._thread.start()
        return self

    def put(self, rows: list[dict[str, Any]]) -> None:
        """Hands rows over (plain dicts: the caller, e.g. an event loop answering HTTP responses, pays no
        DataFrame per call; one frame per commit is built on the writer's thread). They are in the journal when
        this returns, or raises: after the writer failed, they go to a journal segment of their own, left for the
        next reader to replay, and the writer's error is raised."""
        if not rows:
            return
        with self._lock:
            if self._error is None:
                assert self._segment is not None, "put() outside the writer's with-block"
                self._segment.append(rows)
                self._queue.put(rows)
                return
        leftover = Segment(journal_dir(self.warehouse.path), self.table)
        leftover.append(rows)
        leftover.abandon()
        raise self._error

    def _run(self) -> None:
        committing: Segment | None = None
        try:
            while True:
                batches = [self._queue.get()]
                with self._lock:  # everything queued so far is in this segment; what comes next goes in a new one
                    while not self._queue.empty():
                        batches.append(self._queue.get_nowait())
                    committing = self._segment
                    assert committing is not None
                    if not committing.empty:
                        self._segment = Segment(committing.path.parent, self.table)
                done = batches[-1] is None
                rows = [row for batch in batches if batch is not None for row in batch]
                if rows:
                    self.warehouse.upsert(self.table, pd.DataFrame(rows))
                if committing is not self._segment or done:
                    committing.retire()
                if done:
                    if self._segment is not None and self._segment is not committing:
                        self._segment.retire()
                    return
                self._closing.wait(self.interval_s)  # what arrives meanwhile goes in the next commit
        except BaseException as e:  # reported to the caller at put() or on exit; the journal keeps the rows
            with self._lock:
                self._error = e
                for segment in (committing, self._segment):  # unlocked, kept: the next reader replays them
                    if segment is not None and not segment.closed:
                        segment.abandon()

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._queue.put(None)
        self._thread.join()
        self._segment = None
        if self._error is not None and exc[0] is None:
            raise self._error


def _schema_version(con: duckdb.DuckDBPyConnection) -> str | None:
    """The schema version of an existing file (None for a new one)."""
    tables = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database()"
        ).fetchall()
    }
    if "schema_info" not in tables:
        return None
    row = con.execute("SELECT value FROM schema_info WHERE key = 'schema_version'").fetchone()
    return row[0] if row else None


_ENGINES: dict[int, duckdb.DuckDBPyConnection] = {}  # by process: a forked child cannot use its parent's
_ENGINE_LOCK = threading.Lock()
# path -> (the instance it is attached to, alias, read-only, connections using it)
_ATTACHED: dict[Path, tuple[duckdb.DuckDBPyConnection, str, bool, int]] = {}
_ALIASES = itertools.count()


def _engine() -> duckdb.DuckDBPyConnection:
    """This process's in-memory instance (one engine thread for our own reads and writes: small tables, and a
    model's threads need the cores). Called with _ENGINE_LOCK held."""
    engine = _ENGINES.get(os.getpid())
    if engine is None:
        # what a big query spills goes to the system's temporary folder, not a `.tmp` in the working directory
        spill = os.path.join(tempfile.gettempdir(), f"holistic-duckdb-{os.getpid()}")
        engine = _ENGINES[os.getpid()] = duckdb.connect(config={"threads": 1, "temp_directory": spill})
    return engine


@contextmanager
def _attached(path: Path, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection whose default database is the file at `path`, attached for the block's duration. Called with
    the file's lock held; a connection nested in another (same thread) uses the file already attached."""
    with _ENGINE_LOCK:
        engine, alias, attached_read_only, users = _ATTACHED.get(path) or (_engine(), "", read_only, 0)
        if users and attached_read_only and not read_only:
            raise HolisticError(f"warehouse {path}: cannot write inside a read-only connection to it")
        if not users:
            alias = f"warehouse_{next(_ALIASES)}"
            engine.execute(f"ATTACH {_literal(str(path))} AS {alias}" + (" (READ_ONLY)" if read_only else ""))
        _ATTACHED[path] = (engine, alias, attached_read_only, users + 1)
        con = engine.cursor()
    try:
        con.execute(f"USE {alias}")
        yield con
    finally:
        con.close()  # rolls back a transaction the block left open
        _release(path)


def _release(path: Path) -> None:
    with _ENGINE_LOCK:
        engine, alias, read_only, users = _ATTACHED.pop(path)
        if users > 1:
            _ATTACHED[path] = (engine, alias, read_only, users - 1)
            return
        try:
            engine.execute(f"DETACH {alias}")
        except duckdb.Error:
            # the instance is unusable (e.g. invalidated by a failed write): closing it closes the file, and the
            # next connection starts a new one
            if _ENGINES.get(os.getpid()) is engine:
                del _ENGINES[os.getpid()]
            with contextlib.suppress(duckdb.Error):
                engine.close()


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
