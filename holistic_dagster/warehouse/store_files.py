"""The shared results store's files, as every reader may reach them: the store's own, and nothing a link leads to
(warehouse/shared.py reads through these rules; `holistic query`'s sandbox reads through StoreFiles alone)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from holistic_dagster.errors import HolisticError
from holistic_dagster.warehouse.store import OUT_OF_REACH


def refuse_links(root: Path) -> None:
    """Every reader's rule (the leaderboard's, the report's, the gate's, `holistic query`'s): the store's files are
    its own. A symbolic link anywhere in it (planted by whoever can write the folder) could lead a reader to a
    file outside, or pass another file off as a partition's, so the store is not read until it is removed."""
    for folder, dirs, names in os.walk(root, followlinks=False):
        for name in (*dirs, *names):
            path = os.path.join(folder, name)
            if os.path.islink(path):
                raise HolisticError(
                    f"the results store {root} holds a symbolic link, {path} -> {os.readlink(path)}: a store's "
                    "files must be its own, so it is not read until the link is removed"
                )
            refuse_special(path)


def refuse_special(path: str | Path) -> None:
    """Only regular files and folders are read: a FIFO would block its reader forever, a device would feed it
    whatever it holds. Raises HolisticError naming the path and what it is."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise HolisticError(f"{path} is {kind}, not a file: it is not read (a store holds regular files only)")


class StoreFiles(LocalFileSystem):  # type: ignore[misc]  # fsspec ships no type information
    """Local files under their own protocol, for reading only, and only those whose real location (symbolic
    links followed) is inside the store: the sandboxed connection's only way to files."""

    protocol = "holistic-store"
    root_marker = "/"

    def __init__(self, root: str = "/", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store_root = os.path.realpath(root)

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if mode != "rb":
            _refuse(path)
        self._inside(path)
        if not stat.S_ISREG(os.stat(self._strip_protocol(path)).st_mode):
            _refuse(path)  # a FIFO or a device planted after the check: never opened, never waited on
        return super()._open(path, mode=mode, **kwargs)

    def ls(
        self, path: str, detail: bool = False, **kwargs: Any
    ) -> Any:  # what glob() lists: never a folder a link leads to
        self._inside(path)
        return super().ls(path, detail=detail, **kwargs)

    def info(self, path: str, **kwargs: Any) -> Any:
        self._inside(path)
        return super().info(path, **kwargs)

    def _inside(self, path: str) -> None:
        real = os.path.realpath(self._strip_protocol(path))
        if os.path.commonpath([real, self.store_root]) != self.store_root:
            _refuse(path)  # a link planted in the store's folder, pointing out of it

    def mkdir(self, path: str, *args: Any, **kwargs: Any) -> None:
        _refuse(path)

    makedirs = mkdir
    rm = rm_file = rmdir = touch = mv = cp_file = put_file = mkdir


def _refuse(path: Any) -> None:
    raise PermissionError(f"{path}: {OUT_OF_REACH}")
