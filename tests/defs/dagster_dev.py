"""Starting the real `dagster dev` (webserver + daemon) on a loopback port, and its GraphQL API."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from holistic_dagster.settings import REPO_ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as response:
        payload = json.loads(response.read())
    assert "errors" not in payload, payload
    return payload["data"]


@contextmanager
def dagster_dev(env: dict[str, str], log: Path):
    """Yields (port, code location name) once the code location has loaded; stops the process group after."""
    port = free_port()
    dagster = str(Path(sys.executable).with_name("dagster"))
    with log.open("a") as out:
        proc = subprocess.Popen(
            [dagster, "dev", "-w", str(REPO_ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO_ROOT,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                data = graphql(
                    port,
                    "{ workspaceOrError { ... on Workspace { locationEntries { name "
                    "locationOrLoadError { __typename } } } } }",
                )
                entries = data["workspaceOrError"]["locationEntries"]
                if entries and (entries[0]["locationOrLoadError"] or {}).get("__typename") == "RepositoryLocation":
                    break
            except (OSError, AssertionError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"dagster dev did not come up:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield port, entries[0]["name"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_for_run(port: int, run_id: str, timeout_s: float = 180) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = graphql(port, '{ runOrError(runId: "%s") { ... on Run { status } } }' % run_id)["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            return status
        time.sleep(1)
    raise AssertionError(f"run {run_id} did not finish in {timeout_s} s")
