"""Helpers the tests share: a free loopback port, waiting for a condition with a deadline, fixture edits that
fail loudly when the text they edit is not there (a silent no-op would test the unedited fixture), and the
system Chromium driven headless by Playwright."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(
    predicate: Callable[[], T],
    *,
    timeout_s: float,
    interval_s: float = 0.1,
    what: str,
    diagnostics: Callable[[], str] | None = None,
    alive: Callable[[], bool] | None = None,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """Calls `predicate` every `interval_s` seconds until it returns a truthy value, and returns that value.

    Raises AssertionError naming `what` (the awaited condition) when `timeout_s` passes first, or as soon as
    `alive()` returns False (the process that was to bring the condition about has ended); `diagnostics()`
    (e.g. a log's tail) is appended to the message. Exceptions of the types in `ignoring` raised by the
    predicate count as "not yet" (e.g. connection refused while a server starts); the last one is reported."""
    started = time.monotonic()
    deadline = started + timeout_s
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
        except ignoring as e:
            result, last_error = None, e
        if result:
            return result
        if alive is not None and not alive():
            problem = f"the process ended after {time.monotonic() - started:.1f} s"
        elif time.monotonic() > deadline:
            problem = f"not within {timeout_s} s"
        else:
            time.sleep(interval_s)
            continue
        message = f"waited for {what}: {problem}"
        if last_error is not None:
            message += f" (last error: {type(last_error).__name__}: {last_error})"
        if diagnostics is not None:
            message += f"\n{diagnostics()}"
        raise AssertionError(message)


def replaced(text: str, old: str, new: str, count: int = 1, *, where: str = "text") -> str:
    """`text` with `old` replaced by `new`; AssertionError unless `old` occurs exactly `count` times."""
    found = text.count(old)
    if found != count:
        raise AssertionError(f"{where}: expected {count} occurrence(s) of {old!r} to replace, found {found}")
    return text.replace(old, new)


def edit_file(path: Path, old: str, new: str, count: int = 1) -> Path:
    """Replaces `old` by `new` in the file at `path`, in place; AssertionError naming the file and the text
    unless `old` occurs there exactly `count` times."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    path.write_text(replaced(text, old, new, count, where=str(path)), encoding="utf-8")
    return path


def kill_when(
    proc: subprocess.Popen, condition: Callable[[], T], *, timeout_s: float, interval_s: float, what: str
) -> T:
    """SIGKILLs `proc` (no chance to clean up: as a crash or an OOM kill would) as soon as `condition()` holds,
    and returns its value; AssertionError if the process ends first or the condition does not come within
    `timeout_s`. The process is killed and reaped in every case (kill_group)."""
    try:
        value = wait_until(
            condition, timeout_s=timeout_s, interval_s=interval_s, what=what, alive=lambda: proc.poll() is None
        )
        assert proc.poll() is None, f"the process ended before it could be killed ({what})"
        return value
    finally:
        kill_group(proc)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILLs `proc` and reaps it; started with start_new_session=True, its whole process group: what it started
    goes with it (a Dagster run killed mid-step leaves its compute logs' `tail -F` running for ever otherwise)."""
    if proc.returncode is None:  # not reaped, so its pid is still its own (a zombie keeps it)
        with suppress(ProcessLookupError):  # (ended since)
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.send_signal(signal.SIGKILL)
    proc.wait()


@contextmanager
def filesystem_of_its_own(path: Path, size: str = "4m") -> Iterator[Path]:
    """A real, small filesystem (tmpfs) mounted at `path`, to fill up or to remount read-only; unmounted after.
    Needs root, as CI's containers and these machines run; elsewhere the test is skipped, saying why."""
    import pytest

    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs at {path} here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def remount_read_only(path: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)


def fill_up(folder: Path, leave_bytes: int) -> None:
    """Fills the filesystem under `folder` until about `leave_bytes` are free."""
    import os

    free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    (folder / "filler").write_bytes(b"\0" * max(0, free - leave_bytes))


CHROMIUM = "/usr/bin/chromium"
# set to a folder (e.g. docs/images) and the browser tests also keep their pictures there, under the docs' names
DOCS_PICTURES_ENV = "HOLISTIC_DOCS_PICTURES"


def keep_for_docs(shot: Path, name: str) -> None:
    """Copies a browser test's screenshot to $HOLISTIC_DOCS_PICTURES/name: how README.md's pictures are taken."""
    folder = os.environ.get(DOCS_PICTURES_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(folder) / name)


# Chromium's background services try the network, which these machines close: keep them off
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip


@contextmanager
def chromium_page(width: int = 1600, height: int = 1000) -> Iterator:
    """A page of Debian's Chromium, headless (Playwright's API; no browser download). Fails saying how to get
    Chromium when it is missing."""
    import pytest
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: scripts/test installs Debian's chromium package (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()
