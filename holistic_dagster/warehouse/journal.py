"""A write-ahead journal for the rows a BackgroundWriter has been handed but not yet committed: each hand-over is
appended to a file beside the store (one JSON line, written before the caller counts the rows as kept), so a
process killed between two commits loses nothing it acknowledged. The next reader of the table replays what a
dead writer left (`replay`) before reading it.

The journal lives beside a DuckDB file (`warehouse.duckdb.journal/`) or inside a shared store's folder
(`.journal/`), one segment file per writer at a time, locked (flock) while its writer lives: a segment nobody
holds is a dead writer's. flock holds on one host, so a writer replays only its own host's segments: a killed
worker's answers are replayed when a worker on the same host name reads the cache (until then they are asked
again, as before the journal). A writer starts a new segment at each commit and deletes the
committed one, so a journal holds at most what arrived since the last commit. Appends reach the operating
system at once (they survive the process, not a power cut: no fsync per answer). Replaying is idempotent: the
rows are upserted by their key."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import uuid
from datetime import date, datetime
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from holistic_dagster.warehouse import migrations

log = logging.getLogger(__name__)

NEW = ".new-"  # a segment's name until it is locked (Segment)
NEW_SEGMENT_ATTEMPTS = 5


class _Upserting(Protocol):
    path: Path

    def upsert(self, table: str, frame: pd.DataFrame) -> None: ...


def journal_dir(store_path: Path) -> Path:
    """Beside a DuckDB file (`warehouse.duckdb.journal/`, as DuckDB's own .wal); inside a shared store's folder
    (`.journal/`, which no table's name matches), where whoever may write the store may write it."""
    store_path = Path(store_path)
    if store_path.is_dir():
        return store_path / ".journal"
    return store_path.with_name(store_path.name + ".journal")


def _host() -> str:
    # a segment names its host: flock holds on one host only, so a writer replays only its own host's segments
    return socket.gethostname().replace("-", "_") or "host"


def _encode(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()  # the table's TIMESTAMP column casts it back on upsert
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


class Segment:
    """One locked journal file, appended to by one writer."""

    def __init__(self, folder: Path, table: str):
        folder.mkdir(parents=True, exist_ok=True)
        for _ in range(NEW_SEGMENT_ATTEMPTS):
            name = f"{table}-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl"
            # locked under a name no replayer reads, then given its own: a replayer never reads it unlocked
            hidden = folder / f"{NEW}{name}"
            self._fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL, 0o600)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)  # released by the kernel when the process dies, however it dies
                self.path = folder / name
                os.rename(hidden, self.path)
                break
            except FileNotFoundError:
                # a replayer removed it as a dead writer's leftover in the instant before our lock: another one
                os.close(self._fd)
            except BaseException:
                os.close(self._fd)
                hidden.unlink(missing_ok=True)
                raise
        else:
            raise OSError(f"{folder}: no journal segment could be started ({NEW_SEGMENT_ATTEMPTS} tries)")
        self.empty = True
        self.closed = False

    def append(self, rows: list[dict[str, Any]]) -> None:
        assert not self.closed, f"{self.path}: appended to after it was closed"
        line = json.dumps(rows, default=_encode, ensure_ascii=False, separators=(",", ":")) + "\n"
        data = line.encode()
        while data:  # one write() of a line is all of it in practice; a partial one is continued
            data = data[os.write(self._fd, data) :]
        self.empty = False

    def retire(self) -> None:
        """Its rows are committed: the file goes."""
        try:
            self.path.unlink(missing_ok=True)
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Its rows could not be committed: the file stays, unlocked, for the next reader to replay."""
        if not self.closed:
            self.closed = True
            os.close(self._fd)


def _remove_unborn(folder: Path, table: str) -> None:
    """Removes the segments a writer created but was killed before it locked and named (no row is written to a
    segment before that): left behind, they were never replayed nor removed. One nobody holds is a dead writer's, or
    a live one's in the instant before its lock, which then starts another (Segment)."""
    for path in folder.glob(f"{NEW}{table}-{_host()}-*.jsonl"):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its writer holds it: it is about to be named
                continue
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def _rows_of(fd: int, path: Path) -> list[dict[str, Any]]:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    rows = []
    for number, line in enumerate(b"".join(chunks).decode("utf-8", "replace").splitlines(), 1):
        try:
            rows.extend(json.loads(line))
        except ValueError:  # the writer died mid-line: what it had not finished writing was never acknowledged
            log.warning("%s line %d: cut off by the writer's death, skipped", path, number)
    return rows


def _renamed(table: str) -> dict[str, str]:
    """{a column's old name: its name now} over every migration (an old name is never declared again)."""
    return migrations.renames(list(migrations.MIGRATIONS), table)


def replay(store: _Upserting, table: str) -> int:
    """Upserts the rows dead writers of `table` (on this host) left in the journal and deletes their segments.
    Returns how many rows were replayed. A segment that cannot be upserted is set aside as *.bad, named in a
    warning, so that it blocks nothing after it."""
    folder = journal_dir(store.path)
    if not folder.is_dir():
        return 0
    _remove_unborn(folder, table)
    replayed = 0
    for path in sorted(folder.glob(f"{table}-{_host()}-*.jsonl")):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # replayed by another process meanwhile
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a live writer's
                continue
            if os.fstat(fd).st_nlink == 0:  # replayed or retired between our open and our lock
                continue
            rows = _rows_of(fd, path)
            try:
                if rows:  # rows a release before a column's rename journaled: under its name now
                    store.upsert(table, pd.DataFrame(rows).rename(columns=_renamed(table)))
            except Exception as e:
                log.warning("%s: its rows could not be replayed (%s); set aside as %s.bad", path, e, path.name)
                path.rename(path.with_name(path.name + ".bad"))
                continue
            replayed += len(rows)
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    if replayed:
        log.info("replayed %d %s row(s) a killed run had received but not committed", replayed, table)
    return replayed
