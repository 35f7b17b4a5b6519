"""An HTTP model through the whole pipeline: capability checks before any request, failed requests as
error rows that are never scored, and a completions check that says how many failed and why."""

from __future__ import annotations

import shutil

import pytest

from holistic_dagster import quality
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.errors import CapabilityError
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.stages import StageContext
from holistic_dagster.stages.completions import run_completions
from holistic_dagster.stages.dataset import build_dataset
from holistic_dagster.stages.prompts import build_prompts
from holistic_dagster.stages.scores import compute_scores
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write, write_qa_scenario
from tests.helpers import edit_file
from tests.servers.openai_protocol_server import OpenAIProtocolTestServer


@pytest.fixture
def world(tmp_path, monkeypatch, shared_data):
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    records = [
        {"q": "Capital of France?", "a": "Paris"},
        {"q": "Capital of Italy?", "a": "Rome"},
        {"q": "ALWAYS500 Capital of Spain?", "a": "Madrid"},
    ]
    write_qa_scenario(
        tmp_path / "assets", tmp_path / "data", records, "Three questions, one of which the test server always fails."
    )
    write(
        tmp_path / "assets" / "suites" / "v1.yaml",
        """
version: v1
scenarios:
  mini_qa: {max_eval_instances: 10}
  openbookqa: {max_eval_instances: 2}
""",
    )
    monkeypatch.setenv("HOLISTIC_DATA_DIR", f"{tmp_path / 'data'}:{shared_data}")
    return tmp_path


def _stage(world, base_url: str) -> StageContext:
    models = write(
        world / "models.yaml",
        f"""
models:
  remote:
    backend: openai
    path: demo-llama-tuned
    base_url: {base_url}
    max_attempts: 2
    timeout_s: 5
""",
    )
    return StageContext(Warehouse(world / "w.duckdb"), Catalog(world / "assets"), Deployment.of(models=models))


def test_a_model_without_prompt_logprobs_is_stopped_before_any_request(world):
    stage = _stage(world, "http://127.0.0.1:9/v1")  # nothing listens there: no request may be attempted
    build_dataset(stage, "v1", "openbookqa")
    with pytest.raises(CapabilityError) as e:
        build_prompts(stage, "v1", "openbookqa", "remote")
    message = str(e.value)
    assert "model 'remote' (openai) cannot return prompt log-probabilities" in message
    assert "scenario 'openbookqa' needs for multiple_choice_separate_calibrated" in message
    assert "fallback_method: multiple_choice_joint" in message


def test_the_suites_fallback_method_is_used_and_recorded(world, tuned_client):
    edit_file(
        world / "assets" / "suites" / "v1.yaml",
        "openbookqa: {max_eval_instances: 2}",
        "openbookqa: {max_eval_instances: 2, fallback_method: multiple_choice_joint}",
    )
    with OpenAIProtocolTestServer(tuned_client) as server:
        stage = _stage(world, server.base_url)
        build_dataset(stage, "v1", "openbookqa")
        build_prompts(stage, "v1", "openbookqa", "remote")
        run_completions(stage, "v1", "openbookqa", "remote")
        compute_scores(stage, "v1", "openbookqa", "remote")
    wh = stage.warehouse
    assert set(wh.df("SELECT DISTINCT adapter_method FROM prompts")["adapter_method"]) == {"multiple_choice_joint"}
    assert wh.df("SELECT count(*) AS n FROM prompts")["n"].iat[0] == 2  # one lettered prompt per question
    assert wh.df("SELECT decoding FROM provenance")["decoding"].str.contains("multiple_choice_joint").all()
    assert wh.df("SELECT count(*) AS n FROM instance_scores WHERE metric = 'exact_match'")["n"].iat[0] == 2


def test_failed_requests_are_error_rows_never_scores(world, tuned_client):
    with OpenAIProtocolTestServer(tuned_client) as server:
        stage = _stage(world, server.base_url)
        build_dataset(stage, "v1", "mini_qa")
        build_prompts(stage, "v1", "mini_qa", "remote")
        summary = run_completions(stage, "v1", "mini_qa", "remote")
        assert (summary["num_completions"], summary["num_failed"]) == (3, 1)
        again = run_completions(stage, "v1", "mini_qa", "remote")  # the failure is retried, the rest cached
        assert (again["num_sent"], again["num_from_cache"]) == (1, 2)
    assert server.hits[next(p for p in server.hits if "ALWAYS500" in p)] == 4  # 2 attempts x 2 runs
    wh = stage.warehouse
    (check_count, check_valid) = quality.check_completions(wh, "v1", "mini_qa", "remote", max_failure_rate=0.0)
    assert check_count.passed and not check_valid.passed
    assert check_valid.description.startswith("1 of 3 requests failed (allowed rate 0): 1 x TransientError: gave up")
    (_, tolerant) = quality.check_completions(wh, "v1", "mini_qa", "remote", max_failure_rate=0.5)
    assert tolerant.passed
    scored = compute_scores(stage, "v1", "mini_qa", "remote")
    assert (scored["num_instances"], scored["num_failed_instances"]) == (2, 1)
    assert set(wh.df("SELECT DISTINCT instance_id FROM instance_scores")["instance_id"]) == {"test/1", "test/2"}
    assert all(o.passed for o in quality.check_scores(wh, "v1", "mini_qa", "remote", metrics_per_instance=5))
