"""The OpenAI-compatible backend: against the real `transformers serve`, and against an OpenAI-protocol test
server that injects faults (429 with Retry-After, 5xx, timeouts, malformed JSON)."""

from __future__ import annotations

import json
import random
import time

import pytest

from holistic_dagster.clients.http import RetryPolicy, backoff_delay
from holistic_dagster.clients.openai_client import OpenAICompatibleClient
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.records import Request
from tests.helpers import free_port
from tests.servers.openai_protocol_server import OpenAIProtocolTestServer
from tests.servers.transformers_serve import transformers_serve as serve


def _gen(prompt: str, i: int = 0, max_tokens: int = 8) -> Request:
    return Request(
        request_id=f"g{i}", instance_id=f"i{i}", kind="generate", prompt=prompt, max_tokens=max_tokens, stop=("\n",)
    )


PROMPTS = [
    f"Apply the rules.\n\nRule: A + B\nSubstitute: A = {w}, B = dog\nAnswer:"
    for w in ("cat", "moon", "fish", "tree", "lamp", "bird")
]


@pytest.fixture(scope="module")
def server(tuned_client):
    with OpenAIProtocolTestServer(tuned_client, api_key="sk-test-not-a-real-key") as s:
        yield s


@pytest.fixture(scope="module")
def untrained_server(untrained_client):
    """The same server in front of the untrained demo model, for what does not depend on the model's answers
    (faults, keys): these tests need no training run."""
    with OpenAIProtocolTestServer(untrained_client, api_key="sk-test-not-a-real-key") as s:
        yield s


def _client(server, monkeypatch, **overrides) -> OpenAICompatibleClient:
    monkeypatch.setenv("TEST_SERVER_KEY", server.api_key)
    spec = {
        "name": "remote",
        "backend": "openai",
        "path": "demo-llama-tuned",
        "base_url": server.base_url,
        "api_key_env": "TEST_SERVER_KEY",
        "max_concurrency": 3,
        "timeout_s": 1.0,
        "max_attempts": 4,
        "prompt_logprobs": True,
        **overrides,
    }
    return OpenAICompatibleClient(ModelSpec(**spec))


def test_generation_over_http_equals_the_local_model(server, tuned_client, monkeypatch):
    client = _client(server, monkeypatch)
    remote = client.generate([_gen(p, i) for i, p in enumerate(PROMPTS)])
    local = tuned_client.generate([_gen(p, i) for i, p in enumerate(PROMPTS)])
    assert [c.text for c in remote] == [c.text for c in local]
    assert [c.error for c in remote] == [""] * len(PROMPTS)
    assert remote[0].logprob == pytest.approx(local[0].logprob, abs=1e-3)
    assert 2 <= server.max_in_flight <= 3  # concurrent, and never past the bound
    assert server.auth_failures == 0


def test_prompt_logprobs_over_http_equal_local_scoring(server, tuned_client, monkeypatch):
    client = _client(server, monkeypatch)
    requests = [
        Request(
            request_id=f"s{i}", instance_id="i", kind="score", prompt="Question: Grass colour?\nAnswer:", continuation=c
        )
        for i, c in enumerate((" green", " a pale pink"))
    ]
    remote, local = client.score(requests), tuned_client.score(requests)
    for got, want in zip(remote, local):
        assert got.error == "" and got.logprob == pytest.approx(want.logprob, abs=1e-4)


def test_faults_are_retried_with_backoff_and_failures_become_error_rows(untrained_server, monkeypatch):
    server = untrained_server
    client = _client(server, monkeypatch)
    prompts = {m: f"{m} Rule: A\nAnswer:" for m in ("FAULT429", "FAULT500", "SLOW", "MALFORMED", "ALWAYS500")}
    started = time.monotonic()
    results = dict(zip(prompts, client.generate([_gen(p, i, 4) for i, p in enumerate(prompts.values())])))
    elapsed = time.monotonic() - started
    assert {m: server.hits[p] for m, p in prompts.items()} == {
        "FAULT429": 2,
        "FAULT500": 3,
        "SLOW": 2,
        "MALFORMED": 1,
        "ALWAYS500": 4,
    }
    for marker in ("FAULT429", "FAULT500", "SLOW"):
        assert results[marker].error == "" and results[marker].num_completion_tokens > 0
    assert results["MALFORMED"].error.startswith("PermanentError: malformed response")
    assert results["ALWAYS500"].error.startswith("TransientError: gave up after 4 attempts; last error: HTTP 500")
    assert elapsed >= 1.0  # the SLOW request waited out its 1 s timeout before its retry


def test_a_wrong_key_is_a_permanent_error_and_the_key_is_never_described(untrained_server, monkeypatch):
    server = untrained_server
    client = _client(server, monkeypatch)
    assert server.api_key not in json.dumps(client.describe())
    monkeypatch.setenv("TEST_SERVER_KEY", "sk-wrong")
    (c,) = OpenAICompatibleClient(client.spec).generate([_gen(PROMPTS[0])])
    assert c.error.startswith("PermanentError: HTTP 401")


def test_requests_carry_the_sdks_headers(untrained_server, monkeypatch):
    """The SDK configures (auth, organization and project from its environment variables, its user agent);
    aiohttp sends."""
    monkeypatch.setenv("OPENAI_ORG_ID", "org-holistic-test")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-holistic-test")
    (c,) = _client(untrained_server, monkeypatch).generate([_gen(PROMPTS[0])])
    assert c.error == ""
    headers = untrained_server.last_headers
    assert headers["authorization"] == f"Bearer {untrained_server.api_key}"
    assert headers["openai-organization"] == "org-holistic-test"
    assert headers["openai-project"] == "proj-holistic-test"
    assert headers["user-agent"].startswith("AsyncOpenAI/Python ")


def test_provenance_names_the_server_the_requests_go_to(untrained_server, monkeypatch):
    """OPENAI_BASE_URL (the SDK's variable) applies when the registry names no server: the requests and the
    recorded model_path (part of the completion cache's key) both name it."""
    monkeypatch.setenv("OPENAI_BASE_URL", untrained_server.base_url)
    client = _client(untrained_server, monkeypatch, base_url=None)
    assert client.describe()["model_path"] == f"{untrained_server.base_url.rstrip('/')} demo-llama-tuned"
    prompt = f"{PROMPTS[2]} (server from the environment)"
    (c,) = client.generate([_gen(prompt)])
    assert c.error == "" and untrained_server.hits[prompt] == 1
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert _client(untrained_server, monkeypatch, base_url=None).describe()["model_path"] == (
        "https://api.openai.com/v1 demo-llama-tuned"
    )
    assert _client(untrained_server, monkeypatch).describe()["model_path"].startswith(untrained_server.base_url)


def test_proxies_and_their_exceptions_come_from_the_environment(untrained_server, monkeypatch):
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{free_port()}")  # a proxy that is down
    prompt = f"{PROMPTS[1]} (through a proxy)"
    (c,) = _client(untrained_server, monkeypatch, max_attempts=1).generate([_gen(prompt)])
    assert c.error.startswith("TransientError: gave up after 1 attempts; last error: ClientProxyConnectionError")
    assert untrained_server.hits[prompt] == 0  # it went to the proxy, not the server
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1")
    (c,) = _client(untrained_server, monkeypatch, max_attempts=1).generate([_gen(prompt)])
    assert c.error == "" and untrained_server.hits[prompt] == 1


def test_backoff_honours_retry_after_and_grows_with_jitter():
    policy, rng = RetryPolicy(initial_delay_s=0.5, max_delay_s=4.0), random.Random(0)
    assert backoff_delay(0, policy, 2.5, rng) == 2.5 and backoff_delay(0, policy, 60, rng) == 4.0
    for attempt, top in ((0, 0.5), (1, 1.0), (2, 2.0), (5, 4.0)):
        delays = [backoff_delay(attempt, policy, None, rng) for _ in range(50)]
        assert all(top / 2 <= d <= top for d in delays) and len(set(delays)) > 1


@pytest.fixture(scope="module")
def transformers_serve(tuned_client):
    with serve(tuned_client.path) as base_url:
        yield base_url


@pytest.mark.slow  # starts the real `transformers serve`
def test_against_transformers_serve(transformers_serve, tuned_client):
    spec = ModelSpec(
        name="served",
        backend="openai",
        path=tuned_client.path,
        base_url=transformers_serve,
        max_concurrency=4,
        timeout_s=60,
    )
    client = OpenAICompatibleClient(spec)
    assert not client.supports_prompt_logprobs
    remote = client.generate([_gen(p, i) for i, p in enumerate(PROMPTS)])
    local = tuned_client.generate([_gen(p, i) for i, p in enumerate(PROMPTS)])
    assert [c.error for c in remote] == [""] * len(PROMPTS)
    assert [c.text for c in remote] == [c.text for c in local]
    assert all(c.num_prompt_tokens > 0 for c in remote)
    chat = OpenAICompatibleClient(spec.model_copy(update={"chat": True}))
    assert [c.text for c in chat.generate([_gen(p, i) for i, p in enumerate(PROMPTS)])] == [c.text for c in local]
    # a model the server cannot load is a permanent error row, not a crash
    (bad,) = OpenAICompatibleClient(spec.model_copy(update={"path": "/no/such/model"})).generate([_gen(PROMPTS[0])])
    assert bad.error
