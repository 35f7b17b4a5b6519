"""The real Dagster webserver and daemon (`dagster dev`) on loopback: the asset graph, partitions and checks
are visible, the demo's runs are there, and a run launched through the UI's GraphQL API succeeds."""

from __future__ import annotations

import pytest

from holistic_dagster import settings
from holistic_dagster.clients.registry import installed_models
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from tests.defs.dagster_dev import dagster_dev as start_dagster_dev
from tests.defs.dagster_dev import graphql, wait_for_run
from tests.helpers import chromium_page, keep_for_docs, wait_until

pytestmark = pytest.mark.slow  # `dagster dev` (webserver and daemon) and a headless browser


@pytest.fixture(scope="module")
def dagster_dev(suite_run, dagster_home, tmp_path_factory):
    log = tmp_path_factory.mktemp("dagster_dev") / "dagster_dev.log"
    env = {"HOLISTIC_WAREHOUSE": str(suite_run["path"]), "DAGSTER_HOME": str(dagster_home)}
    with start_dagster_dev(env, log) as (port, location):
        yield port, location


def test_asset_graph_partitions_and_checks_are_visible(dagster_dev):
    port, _ = dagster_dev
    nodes = graphql(port, "{ assetNodes { assetKey { path } isPartitioned } }")["assetNodes"]
    keys = {"/".join(n["assetKey"]["path"]) for n in nodes}
    for scenario in ("synthetic_reasoning", "mmlu", "boolq", "gsm8k", "openbookqa"):
        assert {f"{scenario}/{stage}" for stage in ("dataset", "prompts", "completions", "scores")} <= keys
    assert "leaderboard" in keys and all(n["isPartitioned"] for n in nodes)
    query = """{ assetNodeOrError(assetKey: {path: ["mmlu", "completions"]}) { ... on AssetNode {
        partitionKeysByDimension { name partitionKeys }
        assetChecksOrError { ... on AssetChecks { checks { name blocking } } } } } }"""
    # the registry's models that can run here: the ladder's are left out until installed (none in a test's home)
    runnable, _ = installed_models(Deployment().models(), settings.model_cache_dir())
    assert "smollm2-135m-instruct-llamacpp" in runnable and "qwen2.5-coder-1.5b-instruct" not in runnable
    versions = set(Catalog().suite_versions())  # the core releases and the suites of HELM's leaderboards
    assert {"v5", "capabilities-v1", "safety-v1", "helm-lite-v1", "helm-classic-v1"} <= versions
    expected = {"model": set(runnable), "version": versions}

    def dimensions() -> dict:
        node = graphql(port, query)["assetNodeOrError"]
        return {d["name"]: set(d["partitionKeys"]) for d in node["partitionKeysByDimension"]}

    # the registry's models and the catalog's versions become partitions at the model_registry sensor's first
    # tick, whenever the daemon gets to it
    wait_until(
        lambda: dimensions() == expected,
        timeout_s=180,
        interval_s=1,
        what="the registry's partitions",
        diagnostics=lambda: str(dimensions()),
    )
    node = graphql(port, query)["assetNodeOrError"]
    checks = {c["name"]: c["blocking"] for c in node["assetChecksOrError"]["checks"]}
    assert checks == {"one_completion_per_request": True, "completions_valid": True}


def test_the_demo_runs_are_shown_with_their_materializations(dagster_dev):
    port, _ = dagster_dev
    data = graphql(
        port,
        """{ assetOrError(assetKey: {path: ["mmlu", "scores"]}) { ... on Asset {
        assetMaterializations(limit: 10) { partition runId } } } }""",
    )
    partitions = {m["partition"] for m in data["assetOrError"]["assetMaterializations"]}
    assert {"demo-gpt2-untrained|v2", "demo-llama-tuned|v2"} <= partitions


def test_a_run_launched_from_the_ui_succeeds(dagster_dev):
    port, location = dagster_dev
    launched = graphql(
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
    assert wait_for_run(port, launched["run"]["runId"]) == "SUCCESS"


def test_the_ui_in_a_browser_shows_the_graph_a_partitioned_asset_and_its_checks(dagster_dev, tmp_path):
    port, _ = dagster_dev
    base = f"http://127.0.0.1:{port}"
    with chromium_page() as page:

        def visit(path: str, *texts: str, shot: str) -> None:
            page.goto(base + path, wait_until="domcontentloaded")
            for text in texts:
                page.get_by_text(text, exact=True).first.wait_for(timeout=90_000)
            skip = page.get_by_role("button", name="Skip")  # Dagster's first-visit newsletter dialog
            if skip.count():
                skip.first.click()
            page.screenshot(path=str(tmp_path / shot))

        # the asset graph: a group per scenario plus the summary group
        visit("/asset-groups", "mmlu", "openbookqa", "summary", shot="asset_graph.png")
        # one scenario's chain, from the partitioned completions asset
        visit("/assets/mmlu/completions?view=lineage", "prompts", "scores", shot="lineage.png")
        visit("/assets/mmlu/completions?view=partitions", "demo-llama-tuned", shot="partitions.png")
        visit(
            "/assets/mmlu/completions?view=checks",
            "one_completion_per_request",
            "completions_valid",
            shot="checks.png",
        )
        assert page.get_by_text("Succeeded").count() >= 2
    for name in ("asset_graph.png", "lineage.png", "partitions.png", "checks.png"):
        assert (tmp_path / name).stat().st_size > 10_000, name
    keep_for_docs(tmp_path / "asset_graph.png", "ui.png")
    print(f"screenshots in {tmp_path}")
