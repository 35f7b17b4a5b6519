"""Starting the real `dagster dev` (webserver + daemon) on a loopback port, and its GraphQL API."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from holistic_dagster.settings import REPO_ROOT
from tests.helpers import free_port, wait_until


def graphql(port: int, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as response:
        payload = json.loads(response.read())
    assert "errors" not in payload, payload
    return payload["data"]


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_serving(command: list[str], env: dict[str, str], log: Path, **popen) -> subprocess.Popen:
    """Starts a command that serves the Dagster UI (in a session of its own, output to `log`). dagster dev stops on
    SIGTERM only where SIGINT is not ignored, and a test run started as a background job (CI's, nohup's) passes it
    on ignored: the child gets SIGINT's default back (stopping it otherwise waited 30 s for the kill), unless the
    caller sets preexec_fn itself."""
    popen.setdefault("preexec_fn", _interruptible)
    with log.open("a") as out:
        return subprocess.Popen(
            command, cwd=REPO_ROOT, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, **popen,
        )  # fmt: skip


def wait_for_location(port: int, proc: subprocess.Popen, log: Path) -> str:
    """The code location's name, once the UI on `port` has loaded it."""

    def loaded_location() -> str | None:
        data = graphql(
            port,
            "{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError { __typename } } } } }",
        )
        entries = data["workspaceOrError"]["locationEntries"]
        if entries and (entries[0]["locationOrLoadError"] or {}).get("__typename") == "RepositoryLocation":
            return entries[0]["name"]
        return None

    return wait_until(
        loaded_location,
        timeout_s=120,
        interval_s=1,
        what="dagster dev to come up with its code location loaded",
        diagnostics=lambda: log.read_text()[-3000:],
        alive=lambda: proc.poll() is None,
        ignoring=(OSError, AssertionError),
    )


def stop_session(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # (already gone: keep the error that says why)
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextmanager
def dagster_dev(env: dict[str, str], log: Path):
    """Yields (port, code location name) once the code location has loaded; stops the process group after."""
    port = free_port()
    dagster = str(Path(sys.executable).with_name("dagster"))
    command = [dagster, "dev", "-w", str(REPO_ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)]
    proc = start_serving(command, env, log)
    try:
        yield port, wait_for_location(port, proc, log)
    finally:
        stop_session(proc)


def wait_for_run(port: int, run_id: str, timeout_s: float = 180) -> str:
    def finished() -> str | None:
        status = graphql(port, '{ runOrError(runId: "%s") { ... on Run { status } } }' % run_id)["runOrError"]["status"]
        return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

    return wait_until(finished, timeout_s=timeout_s, interval_s=1, what=f"run {run_id} to finish")


REPOSITORY = "__repository__"  # a code location's only repository, built from a Definitions object


def launch_run(port: int, location: str, job: str, partition: str) -> str:
    """Launches `job` for one partition through GraphQL, as the UI does; returns the run id."""
    tags = [{"key": "dagster/partition", "value": partition}]
    if "|" in partition:  # a multi-partition key names each dimension too (model|version), as the UI does
        model, version = partition.split("|")
        tags += [
            {"key": "dagster/partition/model", "value": model},
            {"key": "dagster/partition/version", "value": version},
        ]
    launched = graphql(
        port,
        """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) {
        __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""",
        {"p": {"selector": {"repositoryLocationName": location, "repositoryName": REPOSITORY, "jobName": job},
               "executionMetadata": {"tags": tags}}},
    )["launchRun"]  # fmt: skip
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def launch_backfill(port: int, location: str, job: str, partitions: list[str]) -> str:
    """A partition backfill of `job` (the daemon turns it into one run per partition); returns its id."""
    backfill = graphql(
        port,
        """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
        __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
        {"p": {"selector": {"partitionSetName": f"{job}_partition_set",
                            "repositorySelector": {"repositoryLocationName": location, "repositoryName": REPOSITORY}},
               "partitionNames": partitions}},
    )["launchPartitionBackfill"]  # fmt: skip
    assert backfill["__typename"] == "LaunchBackfillSuccess", backfill
    return backfill["backfillId"]
