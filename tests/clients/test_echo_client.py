"""The weightless echo backend (clients.echo_client), registered like any other: what it answers, and a suite run
through the real Dagster runs with it in place of a model (the wiring, with no model to load)."""

from __future__ import annotations

import shutil

from dagster import DagsterInstance

from holistic_dagster.clients.echo_client import EchoClient
from holistic_dagster.clients.registry import get_client, model_files
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.models import ModelSpec, load_models
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.runner import evaluate_suite
from holistic_dagster.records import Request
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.warehouse import Warehouse
from tests.conftest import SMALL_SUITE, write


def request(prompt: str, kind: str = "generate", continuation: str = "", max_tokens: int = 3) -> Request:
    return Request(
        request_id=f"{kind}-{continuation}",
        instance_id="i",
        kind=kind,
        prompt=prompt,
        continuation=continuation,
        max_tokens=max_tokens,
        stop=("\n", "."),
    )


def test_echo_answers_the_prompts_last_line_and_scores_shorter_choices_higher(tmp_path):
    spec = ModelSpec(name="echo", backend="echo", path="echo", context_tokens=50)
    client = get_client(spec)
    assert isinstance(client, EchoClient) and client.max_context == 50 and model_files(spec, tmp_path) == []
    (generated,) = client.generate(
        [request("Passage: a cat.\nQuestion: is it a cat? yes or no\nAnswer:", max_tokens=5)]
    )
    assert (generated.text, generated.tokens, generated.logprob, generated.num_prompt_tokens) == (
        "Answer:",
        ("Answer:",),
        -1.0,
        12,  # words
    )
    (cut,) = client.generate([request("Q: first. second third fourth")])
    assert cut.text == "Q: first" and cut.finish_reason == "stop"  # cut at ".", within 3 tokens
    short, long = client.score([request("Q", "score", " yes"), request("Q", "score", " certainly")])
    assert short.logprob > long.logprob and short.tokens == ("", "yes")
    assert client.truncate_left("a b c d", 2) == "c d" and client.count_tokens("a  b\nc") == 3


def test_a_suite_runs_through_dagster_on_the_echo_backend(tmp_path):
    models = write(tmp_path / "models.yaml", "models:\n  echo: {backend: echo, path: echo}\n")
    assert load_models(models)["echo"].context_tokens == 4096  # the schema's default
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(tmp_path / "assets" / "suites" / "s1.yaml", SMALL_SUITE)
    catalog, path = Catalog(tmp_path / "assets"), tmp_path / "warehouse.duckdb"
    resource = HolisticResource(warehouse_path=str(path), catalog_dir=str(catalog.root), models_file=str(models))
    runs = evaluate_suite(build_definitions(catalog, resource), DagsterInstance.ephemeral(), "s1", ["echo"])
    assert [r.label for r in runs] == ["datasets for s1", "evaluate echo", "leaderboard"]
    wh = Warehouse(path)
    completions = wh.df("SELECT text, error FROM completions WHERE model = 'echo'")
    assert len(completions) and (completions["error"] == "").all()
    # BoolQ's prompts end at "Answer:": the echo says it back, which matches no Yes/No
    assert (completions["text"] == "Answer:").all()
    scores = wh.df("SELECT value FROM instance_scores WHERE model = 'echo' AND metric = 'exact_match'")
    assert len(scores) and (scores["value"] == 0.0).all()
