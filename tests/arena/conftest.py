"""The arena's world: a question-answer scenario that three contestants answered (the untrained demo model
through the real transformers path, two scripted HTTP models), battles judged by two rule-following judges,
through Dagster into a real DuckDB file; built once for the arena tests."""

from __future__ import annotations

import shutil

import pytest
from dagster import AssetKey, DagsterInstance, MultiPartitionKey

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.runner import register_partitions, run_arena
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write, write_qa_scenario
from tests.servers.arena_protocol_server import ArenaProtocolTestServer

QA = [
    {"q": "What is the capital of France?", "a": "Paris"},
    {"q": "What is the capital of Italy?", "a": "Rome"},
    {"q": "What is the capital of Spain?", "a": "Madrid"},
    {"q": "What is the capital of Japan?", "a": "Tokyo"},
    {"q": "What is the capital of Egypt?", "a": "Cairo"},
]
CONTESTANTS = ["demo-gpt2-untrained", "oracle", "wrong"]
JUDGES = ["rule-judge", "biased-judge", "coin-judge", "mute-judge"]
SUITE = """
version: a1
scenarios:
  mini_qa: {max_eval_instances: 10, seed: 1}
arena:
  scenarios: [mini_qa]
  judges: [rule-judge, biased-judge]
  baseline: wrong
  bootstrap_samples: 200
"""


@pytest.fixture(scope="package")
def arena_world(tmp_path_factory, shared_data):
    root = tmp_path_factory.mktemp("arena")
    shutil.copytree(REPO_ROOT / "assets", root / "assets")
    write_qa_scenario(root / "assets", root / "data", QA, "Five capitals.")
    write(root / "assets" / "suites" / "a1.yaml", SUITE)
    with ArenaProtocolTestServer({r["q"]: r["a"] for r in QA}) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOLISTIC_DATA_DIR", f"{root / 'data'}:{shared_data}")
        http = f"backend: openai, base_url: '{server.base_url}', api_key_env: null, max_attempts: 1"
        models = write(
            root / "resources" / "models.yaml",
            "models:\n  demo-gpt2-untrained: {backend: transformers, path: 'demo:gpt2-untrained'}\n"
            + "".join(f"  {m}: {{{http}, path: {m}}}\n" for m in ("oracle", "wrong", "verbose"))
            + "".join(f"  {m}: {{{http}, path: {m}}}\n" for m in JUDGES),
        )
        catalog, path = Catalog(root / "assets"), root / "warehouse.duckdb"
        resource = HolisticResource(warehouse_path=str(path), catalog_dir=str(catalog.root), models_file=str(models))
        defs = build_definitions(catalog, resource)
        instance = DagsterInstance.ephemeral()
        # the contestants' completions (datasets and evaluate_model runs; the leaderboard is not needed here)
        register_partitions(instance, CONTESTANTS, ["a1"])
        selection = [AssetKey(["mini_qa", stage]) for stage in ("prompts", "completions")]
        datasets = defs.resolve_job_def("datasets").execute_in_process(
            partition_key="a1", instance=instance, asset_selection=[AssetKey(["mini_qa", "dataset"])]
        )
        assert datasets.success
        for model in CONTESTANTS:
            key = MultiPartitionKey({"model": model, "version": "a1"})
            run = defs.resolve_job_def("evaluate_model").execute_in_process(
                partition_key=key, instance=instance, asset_selection=selection
            )
            assert run.success
        result = run_arena(defs, instance, "a1")
        yield {
            "root": root, "server": server, "defs": defs, "instance": instance, "wh": Warehouse(path),
            "result": result, "catalog": catalog, "resource": resource,
        }  # fmt: skip
