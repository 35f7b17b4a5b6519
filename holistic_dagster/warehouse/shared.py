"""A results store that many writer processes, on one host or several sharing a filesystem, write at once:
immutable Parquet files in a directory, read through DuckDB views. No process opens a shared DuckDB file for
writing, so there is no lock to wait on and no single writer.

Layout: `<root>/holistic-store.json` (format and schema version), and per table `<root>/<table>/`:
- `_schema-<fingerprint>.parquet`: zero rows with the table's types from the schema, written once per schema
  (a release that adds a table or a column adds its own), so every table's glob matches a file and reads get
  the schema's types;
- `<slot>.parquet`: one `replace` partition: the slot is the hash of the (key, value) pairs of `keys` that are
  columns of the table; replacing it swaps the file;
- `u-<time_ns>-<uuid>.parquet`: one `upsert`'s rows; reads keep, per primary key, the row of the latest file
  (names sort by wall-clock time: hosts whose clocks disagree by more than the time between two upserts of one
  key may see the older row win).

Every file is written to a temporary name that no glob matches (`.<name>.<uuid>.tmp`), fsynced and renamed into
place: a reader sees a table's partition either as it was or as it is now, never half of it, and a writer
killed mid-write leaves only a temporary file behind (removed by the next process that opens the store once it
is ABANDONED_AFTER_S old). Rows pass through an in-memory DuckDB table created from
the schema before they are written, so primary keys, NOT NULL and types are enforced as in the DuckDB file.
One `replace` call writes every table's file before renaming any, but the renames are not one atomic step:
a reader may see a new `instances` partition with the old `source_files` one for an instant, and a failure
between two renames (the disk vanishing) leaves the earlier tables replaced.

Each table must always be replaced by the same key columns (as every stage does): a slot is a file, not a
DELETE, so rows written under other keys are not removed. Upserted files are never compacted: a table written
by upserts gets one file per write (the completion cache: one per second per running model).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb
import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.records import sha256_json
from holistic_dagster.warehouse import migrations
from holistic_dagster.warehouse.local import (
    TABLES,
    WarehouseWriteError,
    _literal,
    _quote,
    lock_down,
    schema_sql,
)
from holistic_dagster.warehouse.migrations import SCHEMA_VERSION
from holistic_dagster.warehouse.store import StoreReads
from holistic_dagster.warehouse.store_files import StoreFiles, refuse_links

MARKER = "holistic-store.json"
FORMAT = 1
UPSERT_PREFIX = "u-"
# slot files are named by hex digests and upserts by UPSERT_PREFIX; the schema file (leading "_") is in both globs
SLOT_GLOB = "[_0-9a-f]*.parquet"
UPSERT_GLOB = "[_u]*.parquet"
SOURCE_FILE_COLUMN = "holistic_source_file"

_READY: set[Path] = set()  # roots this process has already brought up to the schema
_READERS: dict[tuple[Path, int], duckdb.DuckDBPyConnection] = {}  # (root, pid): the views, built once
_READERS_LOCK = threading.Lock()


@dataclass(frozen=True)
class _Table:
    name: str
    create_sql: str  # with its primary key, NOT NULL and defaults: what validates incoming rows
    columns: tuple[tuple[str, str, str | None], ...]  # (name, type, default expression)
    primary_key: tuple[str, ...]

    @property
    def schema_file(self) -> str:
        return f"_schema-{sha256_json(self.create_sql)[:12]}.parquet"


@dataclass(frozen=True)
class _Schema:
    tables: dict[str, _Table]
    views: tuple[str, ...]  # the schema's CREATE VIEW statements (scores, leaderboard, lineage), in order


@cache
def _schema() -> _Schema:
    """The schema (warehouse/tables/, views.sql) as DuckDB itself understands it: each table's definition, columns
    and key, and the views."""
    with duckdb.connect(config={"threads": 1}) as con:
        con.execute(schema_sql())
        tables = {}
        for name in TABLES:
            create_sql = con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()[0][0]
            columns = con.execute(
                "SELECT column_name, data_type, column_default FROM duckdb_columns() WHERE table_name = ? "
                "ORDER BY column_index",
                [name],
            ).fetchall()
            key = con.execute(
                "SELECT constraint_column_names FROM duckdb_constraints() "
                "WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'",
                [name],
            ).fetchone()
            tables[name] = _Table(name, create_sql, tuple(columns), tuple(key[0]) if key else ())
        views = con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal ORDER BY view_oid").fetchall()
    return _Schema(tables, tuple(v[0] for v in views))


ABANDONED_AFTER_S = 6 * 3600  # a temporary file this old was left by a writer that was killed


def _validating() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB in which incoming rows meet their table's constraints before they are written."""
    return duckdb.connect(config={"threads": 1})


class SharedStore(StoreReads):
    """The store.ResultStore interface over a directory of Parquet files that any number of processes write at the
    same time."""

    def __init__(self, path: Path | str):
        self.path = Path(path).expanduser().resolve()  # the views name files by absolute paths

    # -- writing

    def ensure_schema(self) -> None:
        """Creates the store (or adds what a newer release's schema has): the marker and every table's schema
        file. Safe to run from many processes at once: each file is written whole and renamed into place."""
        try:
            # another process creating the store has nothing in it but its marker's temporary file
            others = self.path.is_dir() and [p for p in self.path.iterdir() if not p.name.startswith(f".{MARKER}.")]
            if others and not (self.path / MARKER).exists():
                raise HolisticError(
                    f"{self.path} is a folder with files in it but not a results store (no {MARKER}): point "
                    "the warehouse at an empty or new folder, or at a file named *.duckdb"
                )
            self.path.mkdir(parents=True, exist_ok=True)
            self._check_or_write_marker()
            self._remove_abandoned_temporaries()
            written: list[tuple[Path, Path]] = []
            with _validating() as con:  # one DuckDB for every table's file (each new one costs 30-40 ms)
                for table in _schema().tables.values():
                    target = self.path / table.name / table.schema_file
                    if not target.exists():
                        target.parent.mkdir(exist_ok=True)
                        written.append((self._write_rows(table, None, target, upsert=False, con=con), target))
            self._publish(written)
            self._rename_columns()
        except OSError as e:
            raise WarehouseWriteError(f"cannot write the results store {self.path}: {e}") from e
        _READY.add(self.path)

    def _rename_columns(self) -> None:
        """The migrations' renamed columns (warehouse/migrations.py), in the files an older release wrote: each file
        that still has an old name is written again with the new one and renamed onto itself (a reader sees it
        whole, before or after). A store carries no version of its own, so each file says whether it needs it."""
        every = list(migrations.MIGRATIONS)
        renamed = {t: migrations.renames(every, t) for m in every for t in m.renamed}
        with _validating() as con:
            for table, names in renamed.items():
                folder = self.path / table
                for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else ():
                    if path.name.startswith("_"):  # a schema file: zero rows, its fingerprint names its columns
                        continue
                    schema = con.execute("SELECT name FROM parquet_schema(?)", [str(path)]).fetchall()
                    columns = {r[0] for r in schema}
                    old = {o: n for o, n in names.items() if o in columns}
                    if not old:
                        continue
                    renames = ", ".join(f"{_quote(o)} AS {_quote(n)}" for o, n in old.items())
                    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
                    con.execute(
                        f"COPY (SELECT * RENAME ({renames}) FROM read_parquet({_literal(str(path))})) "
                        f"TO {_literal(str(temporary))} (FORMAT parquet)"
                    )
                    with temporary.open("rb") as written:
                        os.fsync(written.fileno())
                    self._publish([(temporary, path)])

    def _remove_abandoned_temporaries(self, now: float | None = None) -> list[Path]:
        """Deletes the temporary files of writers killed mid-write: a temporary file older than
        ABANDONED_AFTER_S belongs to no live writer (a write takes seconds to minutes). Returns them."""
        limit = (now or time.time()) - ABANDONED_AFTER_S
        removed = []
        for folder in (self.path, *(self.path / name for name in TABLES)):
            for path in folder.glob(".*.tmp") if folder.is_dir() else ():
                with contextlib.suppress(FileNotFoundError):  # another process removed it first
                    if path.stat().st_mtime < limit:
                        path.unlink()
                        removed.append(path)
        return removed

    def _check_or_write_marker(self) -> None:
        marker = self.path / MARKER
        if marker.exists():
            found = json.loads(marker.read_text(encoding="utf-8")).get("format")
            if found != FORMAT:
                raise HolisticError(f"results store {self.path} has format {found}; this release reads {FORMAT}")
            return
        temporary = self.path / f".{MARKER}.{uuid.uuid4().hex}.tmp"
        temporary.write_text(json.dumps({"format": FORMAT, "schema_version": SCHEMA_VERSION}) + "\n")
        self._publish([(temporary, marker)])

    def replace(self, keys: Mapping[str, str], frames: Mapping[str, pd.DataFrame]) -> None:
        """Per table, the rows for the `keys` that are its columns become `frame`'s rows (one file per slot)."""
        self.replace_partitions([(keys, frames)])

    def replace_partitions(self, jobs: list[tuple[Mapping[str, str], Mapping[str, pd.DataFrame]]]) -> None:
        """Several partitions' replace: every file is written before any is renamed into place."""
        self._ready()
        written: list[tuple[Path, Path]] = []
        try:
            with _validating() as con:
                self._write_jobs(jobs, con, written)
            self._publish(written)  # only once every table's file is complete
        except BaseException:
            for temporary, _ in written:
                with contextlib.suppress(OSError):
                    temporary.unlink()
            raise

    def _write_jobs(
        self, jobs: list[tuple[Mapping[str, str], Mapping[str, pd.DataFrame]]], con: duckdb.DuckDBPyConnection,
        written: list[tuple[Path, Path]],
    ) -> None:  # fmt: skip
        for keys, frames in jobs:
            for table_name, frame in frames.items():
                assert table_name in TABLES, table_name
                table = _schema().tables[table_name]
                columns = {c[0] for c in table.columns}
                slot = sorted([k, str(v)] for k, v in keys.items() if k in columns)
                if not slot:
                    raise HolisticError(f"replace: none of the keys {sorted(keys)} is a column of {table_name}")
                target = self.path / table_name / f"{sha256_json(slot)[:24]}.parquet"
                written.append((self._write_rows(table, frame, target, upsert=False, slot=slot, con=con), target))

    def upsert(self, table: str, frame: pd.DataFrame) -> None:
        """Adds the rows in a file of their own; reads see them in place of older rows with the same key."""
        assert table in TABLES, table
        if frame.empty:
            return
        self._ready()
        name = f"{UPSERT_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex}.parquet"
        target = self.path / table / name
        temporary = self._write_rows(_schema().tables[table], frame, target, upsert=True)
        try:
            self._publish([(temporary, target)])
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise

    def _ready(self) -> None:
        if self.path not in _READY:
            self.ensure_schema()

    def _write_rows(
        self,
        table: _Table,
        frame: pd.DataFrame | None,
        target: Path,
        *,
        upsert: bool,
        slot: list[list[str]] | None = None,
        con: duckdb.DuckDBPyConnection | None = None,
    ) -> Path:
        """`frame`'s rows, validated by a DuckDB table with the schema's constraints, in a durable temporary
        file beside `target` (not yet visible to any read). `con`: an in-memory DuckDB to validate in (a new
        one otherwise)."""
        temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            with contextlib.ExitStack() as stack:
                if con is None:
                    con = stack.enter_context(_validating())
                con.execute(f"DROP TABLE IF EXISTS {table.name}")
                con.execute(table.create_sql)
                if frame is not None and len(frame):
                    con.register("incoming", frame)
                    verb = "INSERT OR REPLACE" if upsert else "INSERT"
                    con.execute(f"{verb} INTO {table.name} BY NAME SELECT * FROM incoming")
                if slot:
                    # a row outside its slot would never be replaced with it
                    outside = " OR ".join(f"{_quote(k)} IS DISTINCT FROM ?" for k, _ in slot)
                    count = con.execute(f"SELECT count(*) FROM {table.name} WHERE {outside}", [v for _, v in slot])
                    if n := count.fetchall()[0][0]:
                        raise HolisticError(f"replace: {n} row(s) of {table.name} do not carry the keys {dict(slot)}")
                con.execute(f"COPY {table.name} TO {_literal(str(temporary))} (FORMAT parquet)")
            with temporary.open("rb") as written:
                os.fsync(written.fileno())
            return temporary
        except BaseException as e:
            with contextlib.suppress(OSError):
                temporary.unlink()
            if isinstance(e, (duckdb.IOException, OSError)):
                raise WarehouseWriteError(
                    f"could not write the results store {self.path} (earlier results are unchanged): {e}"
                ) from e
            raise

    def _publish(self, written: list[tuple[Path, Path]]) -> None:
        """Renames each complete temporary file onto its name (atomic per file), then makes the renames durable."""
        try:
            for temporary, target in written:
                os.replace(temporary, target)
            for folder in {target.parent for _, target in written}:
                descriptor = os.open(folder, os.O_RDONLY)
                try:
                    os.fsync(descriptor)
                finally:
                    os.close(descriptor)
        except OSError as e:
            raise WarehouseWriteError(f"could not write the results store {self.path}: {e}") from e

    # -- reading

    @contextmanager
    def connect(self, read_only: bool = False, sandboxed: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB connection whose tables are views over the store's files, with the schema's views.
        sandboxed: the engine reaches nothing but the store, and only to read it (see query)."""
        if not (read_only or sandboxed):
            raise HolisticError(
                f"the results store {self.path} is written through replace() and upsert() only: it has no "
                "writable connection"
            )
        if not self.path.is_dir():
            raise HolisticError(f"no warehouse at {self.path}: run `holistic demo` (or materialize assets) first")
        self._ready_for_reading()
        refuse_links(self.path)
        if sandboxed:
            with self._sandboxed() as con:
                yield con
            return
        key = (self.path, os.getpid())  # a forked worker builds its own: DuckDB connections do not survive fork
        with _READERS_LOCK:
            if key not in _READERS:
                # no cache of file contents: a replaced file can keep its name, size and second of modification
                reader = duckdb.connect(config={"threads": 1, "enable_external_file_cache": False})
                for statement in _views(self.path):
                    reader.execute(statement)
                _READERS[key] = reader
            cursor = _READERS[key].cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    def _ready_for_reading(self) -> None:
        """Brings the store up to this release's schema when it can; a store it cannot write (a read-only
        mount) is read as it is, which works unless it predates this release's schema."""
        if self.path in _READY:
            return
        try:
            self.ensure_schema()
        except WarehouseWriteError:
            missing = [t.name for t in _schema().tables.values() if not (self.path / t.name / t.schema_file).exists()]
            if missing:
                raise HolisticError(
                    f"the results store {self.path} predates this release's schema ({', '.join(missing)}) and "
                    "cannot be written here: open it once where it is writable"
                ) from None

    @contextmanager
    def _sandboxed(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only database of views whose files are read through a filesystem that refuses every write,
        and the only place DuckDB may reach (`allowed_directories`): DuckDB's own allowance would also let
        COPY TO, EXPORT and ATTACH write into an allowed folder."""
        with tempfile.TemporaryDirectory(prefix="holistic-query-") as folder:
            views_file = Path(folder) / "views.duckdb"
            prefix = f"{StoreFiles.protocol}://"
            with duckdb.connect(str(views_file)) as con:
                con.register_filesystem(StoreFiles(str(self.path)))  # a view is bound when created
                for statement in _views(self.path, prefix):
                    con.execute(statement)
            con = duckdb.connect(str(views_file), read_only=True, config={"threads": 1})
            try:
                con.register_filesystem(StoreFiles(str(self.path)))
                con.execute(f"SET allowed_directories = [{_literal(prefix + str(self.path) + '/')}]")
                lock_down(con)
                yield con
            finally:
                con.close()

    def write_views_file(self, path: Path | str) -> Path:
        """A small DuckDB file holding only views over this store's files (absolute paths), for any DuckDB
        client: `duckdb -readonly views.duckdb`. It needs no refresh: the views read the files as they are."""
        self._ready()
        path = Path(path)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with duckdb.connect(str(temporary)) as con:
                for statement in _views(self.path):
                    con.execute(statement)
            os.replace(temporary, path)
        finally:
            with contextlib.suppress(OSError):
                temporary.unlink()
        return path


def _views(root: Path, prefix: str = "") -> list[str]:
    """A view per table over its files (latest row per key among upserted files), then the schema's views."""
    statements = []
    for table in _schema().tables.values():
        folder = f"{prefix}{root}/{table.name}"
        slots = f"read_parquet({_literal(f'{folder}/{SLOT_GLOB}')}, union_by_name = true)"
        upserts = (
            f"read_parquet({_literal(f'{folder}/{UPSERT_GLOB}')}, union_by_name = true, "
            f"filename = {_literal(SOURCE_FILE_COLUMN)})"
        )
        key = ", ".join(_quote(c) for c in table.primary_key)
        latest = f"QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY {SOURCE_FILE_COLUMN} DESC) = 1" if key else ""
        # the declared column order; a column a later release added reads as its default in older files (so a
        # NULL stored in a nullable column with a default reads as the default too: none is stored today)
        columns = ", ".join(
            f"COALESCE({_quote(name)}, CAST({default} AS {kind})) AS {_quote(name)}" if default else _quote(name)
            for name, kind, default in table.columns
        )
        statements.append(
            f"CREATE OR REPLACE VIEW {table.name} AS SELECT {columns} FROM ("
            f"SELECT * FROM {slots} UNION ALL BY NAME "
            f"(SELECT * EXCLUDE ({SOURCE_FILE_COLUMN}) FROM {upserts} {latest}))"
        )
    return statements + list(_schema().views)
