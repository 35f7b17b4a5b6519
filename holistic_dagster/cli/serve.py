"""Long-running verbs: `holistic ui` (dagster dev, supervised so that a stop stops everything it started) and
`holistic worker` (a Celery worker for scale-out)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from holistic_dagster import settings
from holistic_dagster.cli.common import console, deployment, fail
from holistic_dagster.errors import HolisticError


def ui(port: Annotated[int, typer.Option(help="webserver port")] = 3000) -> None:
    """Start the Dagster UI and daemon (dagster dev) on this repository's workspace; Ctrl-C (or SIGTERM)
    stops it and everything it started."""
    try:
        home = settings.prepare_dagster_home(deployment().dagster_home)
    except HolisticError as e:
        fail(str(e))
    dagster = Path(sys.executable).with_name("dagster")
    args = [str(dagster), "dev", "-w", str(settings.REPO_ROOT / "workspace.yaml"), "-p", str(port)]
    console.print(f"DAGSTER_HOME={home}\n{' '.join(args)}")
    raise typer.Exit(_supervise(args, {**os.environ, "DAGSTER_HOME": str(home)}))


def worker(
    queues: Annotated[
        str, typer.Option(help="comma-separated queues to consume (default: resources/celery.yaml's cpu and requests)")
    ] = "",
    name: Annotated[str, typer.Option(help="worker name; the host name is appended (name@host)")] = "holistic",
    concurrency: Annotated[int, typer.Option(help="steps this worker runs at once (one process each)")] = 1,
) -> None:
    """Start a Celery worker for scale-out (HOLISTIC_EXECUTOR=celery): it runs the steps that runs send to its
    queues, on the broker named in resources/celery.yaml, with this checkout's code. See docs/how-to/scale-out.md."""
    try:
        config = deployment().celery()
        config.broker()  # a clear error now, not Celery's retry loop against localhost
    except HolisticError as e:
        fail(str(e))
    queues = queues or f"{config.cpu_queue},{config.requests_queue}"
    args = [sys.executable, "-m", "celery", "-A", "holistic_dagster.defs.celery_app", "worker", "-Q", queues]
    args += ["-n", f"{name}@%h", "-c", str(concurrency), "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
    console.print(f"[bold]holistic worker[/] {name}: queues {queues} on {config.shown_broker()}")
    sys.stdout.flush()
    os.execv(sys.executable, args)  # Celery's own signal handling (TERM: finish the running step, then stop)


def _supervise(args: list[str], env: dict[str, str] | None = None, grace_s: float = 30) -> int:
    """Runs `args` in a session of its own until it exits or we are told to stop (SIGINT, SIGTERM, SIGHUP).
    `dagster dev` shuts its webserver, daemon and code servers down on Ctrl-C, but a SIGTERM sent to it alone
    left them running as orphans: so every stop signal reaches it as Ctrl-C; if it is still running `grace_s`
    later, it and everything it started are terminated, then killed; and whatever it started that outlives it
    is terminated, then killed, too."""
    import signal
    import subprocess

    import psutil

    proc: subprocess.Popen | None = None
    started: dict[int, psutil.Process] = {}  # every descendant seen, kept past its parent's exit
    stop_asked: list[float] = []

    def note_descendants() -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            started.update({p.pid: p for p in psutil.Process(proc.pid).children(recursive=True)})

    def stop(signum, _frame) -> None:
        stop_asked.append(time.monotonic())
        if proc is not None:
            note_descendants()
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)

    # handlers first: a child inherits an ignored SIGINT (a background job's), but not a handled one
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    proc = subprocess.Popen(args, start_new_session=True, env=env)
    if stop_asked:  # stopped while starting it
        stop(signal.SIGTERM, None)
    while True:  # notes the process tree as it grows (code servers start late), until dagster dev exits
        note_descendants()
        try:
            code = proc.wait(timeout=1)
            break
        except subprocess.TimeoutExpired:
            if stop_asked and time.monotonic() - stop_asked[0] > grace_s:  # Ctrl-C was not enough
                _end([psutil.Process(proc.pid), *started.values()], grace_s=10)
    _end(list(started.values()), grace_s)
    return code


def _end(processes: list, grace_s: float) -> None:
    """Waits up to grace_s for the processes to exit, then terminates them, then kills what is left."""
    import psutil

    alive = [p for p in processes if p.is_running()]  # is_running also checks the start time: no reused pid
    _, alive = psutil.wait_procs(alive, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
    _, alive = psutil.wait_procs(alive, timeout=10)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
