"""The real Dagster webserver and daemon (`dagster dev`) on loopback: the asset graph, partitions and checks
are visible, the demo's runs are there, and a run launched through the UI's GraphQL API succeeds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from holistic_dagster.settings import REPO_ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as response:
        payload = json.loads(response.read())
    assert "errors" not in payload, payload
    return payload["data"]


@pytest.fixture(scope="module")
def dagster_dev(suite_run, dagster_home, tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("dagster_dev") / "dagster_dev.log"
    env = {**os.environ, "HOLISTIC_WAREHOUSE": str(suite_run["path"]), "DAGSTER_HOME": str(dagster_home)}
    dagster = str(Path(sys.executable).with_name("dagster"))
    with log.open("w") as out:
        proc = subprocess.Popen(
            [dagster, "dev", "-w", str(REPO_ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                data = _graphql(
                    port,
                    "{ workspaceOrError { ... on Workspace { locationEntries { name "
                    "locationOrLoadError { __typename } } } } }",
                )
                entries = data["workspaceOrError"]["locationEntries"]
                if (
                    entries
                    and entries[0]["locationOrLoadError"]
                    and entries[0]["locationOrLoadError"]["__typename"] == "RepositoryLocation"
                ):
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


def test_asset_graph_partitions_and_checks_are_visible(dagster_dev):
    port, _ = dagster_dev
    nodes = _graphql(port, "{ assetNodes { assetKey { path } isPartitioned } }")["assetNodes"]
    keys = {"/".join(n["assetKey"]["path"]) for n in nodes}
    for scenario in ("synthetic_reasoning", "mmlu", "boolq", "gsm8k", "openbookqa"):
        assert {f"{scenario}/{stage}" for stage in ("dataset", "prompts", "completions", "scores")} <= keys
    assert "leaderboard" in keys and all(n["isPartitioned"] for n in nodes)
    node = _graphql(
        port,
        """{ assetNodeOrError(assetKey: {path: ["mmlu", "completions"]}) { ... on AssetNode {
        partitionKeysByDimension { name partitionKeys }
        assetChecksOrError { ... on AssetChecks { checks { name blocking } } } } } }""",
    )["assetNodeOrError"]
    dims = {d["name"]: set(d["partitionKeys"]) for d in node["partitionKeysByDimension"]}
    assert dims == {"model": {"demo-gpt2-untrained", "demo-llama-tuned"}, "version": {"v1", "v2"}}
    checks = {c["name"]: c["blocking"] for c in node["assetChecksOrError"]["checks"]}
    assert checks == {"one_completion_per_request": True, "completions_valid": True}


def test_the_demo_runs_are_shown_with_their_materializations(dagster_dev):
    port, _ = dagster_dev
    data = _graphql(
        port,
        """{ assetOrError(assetKey: {path: ["mmlu", "scores"]}) { ... on Asset {
        assetMaterializations(limit: 10) { partition runId } } } }""",
    )
    partitions = {m["partition"] for m in data["assetOrError"]["assetMaterializations"]}
    assert {"demo-gpt2-untrained|v2", "demo-llama-tuned|v2"} <= partitions


def test_a_run_launched_from_the_ui_succeeds(dagster_dev):
    port, location = dagster_dev
    launched = _graphql(
        port,
        """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
        __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""",
        {
            "params": {
                "selector": {
                    "repositoryLocationName": location,
                    "repositoryName": "__repository__",
                    "jobName": "leaderboard_job",
                },
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "v2"}]},
            }
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    deadline = time.monotonic() + 180
    status = None
    while time.monotonic() < deadline:
        status = _graphql(port, '{ runOrError(runId: "%s") { ... on Run { status } } }' % run_id)["runOrError"][
            "status"
        ]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(1)
    assert status == "SUCCESS"
