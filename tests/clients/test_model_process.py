"""A local model in a process of its own (what `holistic evaluate` uses) answers exactly as the in-process
client: the same completions, log-probabilities, token counts and description; errors keep their message."""

from __future__ import annotations

import os
import signal

import pytest

from holistic_dagster.clients.model_process import ModelProcessClient, ModelProcessError
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Request, request_id

pytestmark = pytest.mark.slow  # each client spawns a process that imports torch and transformers

PROMPTS = [
    "Question: What is 2 + 2?\nAnswer:",
    "Question: Name a colour.\nAnswer:",
    "Question: What is the capital of France?\nAnswer:",
    "The quick brown fox",
    "Once upon a time",
]


def _generate(prompt: str, max_tokens: int = 5) -> Request:
    rid = request_id(kind="generate", prompt=prompt, continuation="", max_tokens=max_tokens, temperature=0.0, stop=())
    return Request(request_id=rid, instance_id=prompt[:8], kind="generate", prompt=prompt, max_tokens=max_tokens)


def _score(prompt: str, continuation: str) -> Request:
    rid = request_id(kind="score", prompt=prompt, continuation=continuation, max_tokens=0, temperature=0.0, stop=())
    return Request(request_id=rid, instance_id=prompt[:8], kind="score", prompt=prompt, continuation=continuation)


@pytest.fixture(scope="module")
def remote():
    client = ModelProcessClient(Deployment().model("demo-gpt2-untrained"))
    yield client
    client.close()


def _same(a, b) -> None:
    assert [c.request_id for c in a] == [c.request_id for c in b]
    for x, y in zip(a, b):
        assert (x.text, x.tokens, x.finish_reason, x.error) == (y.text, y.tokens, y.finish_reason, y.error)
        assert x.logprob == pytest.approx(y.logprob, abs=1e-6)
        assert x.logprobs == pytest.approx(y.logprobs, abs=1e-6)
        assert (x.num_prompt_tokens, x.num_completion_tokens) == (y.num_prompt_tokens, y.num_completion_tokens)


def test_answers_as_the_in_process_client(remote, untrained_client):
    requests = [_generate(p) for p in PROMPTS]
    batches = []
    answered = remote.generate(requests, batches.append)
    _same(answered, untrained_client.generate(requests))
    # finished batches arrive as they finish, each request once
    assert sorted(c.request_id for batch in batches for c in batch) == sorted(r.request_id for r in requests)

    scored = [_score(p, " yes") for p in PROMPTS] + [_score(PROMPTS[0], " 4")]
    _same(remote.score(scored), untrained_client.score(scored))

    texts = [*PROMPTS, "", "naïve café ☕ " * 20]
    for text in texts:
        assert remote.count_tokens(text) == untrained_client.count_tokens(text)
    fresh = [text + " again" for text in texts]  # not counted yet: one call for all of them
    assert remote.count_tokens_many([*fresh, fresh[0], texts[1]]) == [
        untrained_client.count_tokens(text) for text in [*fresh, fresh[0], texts[1]]
    ]
    assert remote.truncate_left(PROMPTS[2], 4) == untrained_client.truncate_left(PROMPTS[2], 4)
    assert remote.max_context == untrained_client.max_context
    assert remote.describe() == untrained_client.describe()
    # plain values only: the evaluating process must not import torch to read the description
    assert {type(v) for v in remote.describe()["library_versions"].values()} == {str}
    assert remote.generate([]) == [] and remote.score([]) == []


def test_a_model_that_cannot_load_fails_at_first_use_with_its_own_message(tmp_path):
    spec = ModelSpec(name="missing", backend="transformers", path=str(tmp_path / "no-such-model"))
    client = ModelProcessClient(spec)
    client.start()
    with pytest.raises(Exception) as raised:
        client.max_context
    assert "no-such-model" in str(raised.value)
    client.close()


def test_a_killed_model_process_is_an_error_naming_the_model(untrained_client):
    client = ModelProcessClient(Deployment().model("demo-gpt2-untrained"))
    assert client.count_tokens("hello world") == untrained_client.count_tokens("hello world")
    os.kill(client._process.pid, signal.SIGKILL)
    with pytest.raises(ModelProcessError, match="process of model 'demo-gpt2-untrained' ended unexpectedly") as e:
        client.generate([_generate(PROMPTS[0])])
    assert isinstance(e.value, HolisticError)  # the CLI prints it as one line
    client.close()


def test_the_next_model_starts_when_the_one_before_has_its_weights():
    second = ModelProcessClient(Deployment().model("demo-gpt2-untrained"))
    first = ModelProcessClient(Deployment().model("demo-gpt2-untrained"), then=second)
    first.start()
    assert second._process is None  # not started while the first one loads
    assert first.max_context > 0 and first.count_tokens("a b c") == 3  # ready with its tokenizer
    assert second._process is None  # its weights may still be loading
    assert first.generate([_generate(PROMPTS[0])])[0].num_completion_tokens > 0
    assert second._process is not None
    assert second.count_tokens("a b c") == first.count_tokens("a b c")
    first.close()
    second.close()


def test_a_call_interrupted_mid_answer_leaves_the_client_usable(untrained_client):
    """on_done raising (the completion cache's disk is full, say) leaves the rest of that answer in the pipe:
    the next call must not read it as its own."""
    client = ModelProcessClient(Deployment().model("demo-gpt2-untrained"))
    requests = [_generate(p) for p in PROMPTS]

    def full_disk(_):
        raise OSError("No space left on device")

    with pytest.raises(OSError, match="No space left"):
        client.generate(requests, full_disk)
    _same(client.generate(requests), untrained_client.generate(requests))
    scored = [_score(PROMPTS[1], " blue")]
    _same(client.score(scored), untrained_client.score(scored))
    client.close()
