"""The local transformers backend on real (tiny, offline-built) models, checked against naive computation."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from holistic_dagster.records import Request, request_id


def _score_request(prompt: str, continuation: str) -> Request:
    return Request(
        request_id=request_id(
            kind="score", prompt=prompt, continuation=continuation, max_tokens=0, temperature=0.0, stop=()
        ),
        instance_id="i",
        kind="score",
        prompt=prompt,
        continuation=continuation,
    )


def _naive_logprob(client, prompt: str, continuation: str) -> float:
    """Full forward pass over the whole sequence, log-softmax everywhere, sum the continuation's tokens."""
    tok = client.tokenizer
    ctx = tok(prompt.rstrip(), add_special_tokens=False)["input_ids"]
    cont = tok(prompt[len(prompt.rstrip()) :] + continuation, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([ctx + cont])
    with torch.no_grad():
        logprobs = torch.log_softmax(client.model(ids).logits[0].float(), dim=-1)
    return sum(float(logprobs[len(ctx) + k - 1, t]) for k, t in enumerate(cont))


# (a fixture looked up by name is not among the test's fixturenames: the trained model's case is marked here)
@pytest.mark.parametrize("client_name", ["untrained_client", pytest.param("tuned_client", marks=pytest.mark.slow)])
def test_scoring_equals_the_naive_computation_in_any_batch(client_name, request):
    client = request.getfixturevalue(client_name)
    pairs = [
        ("Question: Grass colour?\nAnswer:", " green"),
        ("Question: Grass colour?\nAnswer:", " a pale pink"),
        ("Rule: A + B\nSubstitute: A = cat, B = dog\nAnswer:", " cat + dog"),
        ("Answer:", " green"),
    ]
    together = client.score([_score_request(p, c) for p, c in pairs])
    for (prompt, continuation), result in zip(pairs, together):
        alone = client.score([_score_request(prompt, continuation)])[0]
        naive = _naive_logprob(client, prompt, continuation)
        assert result.logprob == pytest.approx(naive, abs=1e-4)
        assert alone.logprob == pytest.approx(naive, abs=1e-4)
        assert len(result.logprobs) == len(result.tokens) > 0 and result.finish_reason == "scored"


def test_greedy_generation_matches_a_manual_argmax_loop(untrained_client):
    client = untrained_client
    prompt = "Expression: cat + dog\nWhich rule produced it?\nAnswer:"
    req = Request(request_id="g", instance_id="i", kind="generate", prompt=prompt, max_tokens=6)
    (completion,) = client.generate([req])
    ids = client.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    expected_lps = []
    with torch.no_grad():
        for _ in range(6):
            lp = torch.log_softmax(client.model(torch.tensor([ids])).logits[0, -1].float(), dim=-1)
            nxt = int(lp.argmax())
            expected_lps.append(float(lp[nxt]))
            ids.append(nxt)
    generated = ids[-6:]
    assert completion.text == client.tokenizer.decode(generated)
    assert list(completion.logprobs) == pytest.approx(expected_lps, abs=1e-4)
    assert completion.num_completion_tokens == 6 and completion.finish_reason == "length"


def test_sampled_generation_records_each_tokens_top_alternatives_with_its_own_log_probability(tuned_client):
    """temperature > 0 (transformers' generate): per token, at most TOP_K alternatives, best first, none above the
    distribution's best, and a sampled token among them carries the same log-probability there as its own."""
    prompts = ["Expression: cat + dog\nWhich rule produced it?\nAnswer:", "Expression: red blue\nAnswer:", "Answer:"]
    requests = [
        Request(request_id=f"s{i}", instance_id=f"i{i}", kind="generate", prompt=p, max_tokens=8, temperature=0.9)
        for i, p in enumerate(prompts * 8)
    ]
    torch.manual_seed(0)  # transformers samples from torch's generator
    completions = tuned_client.generate(requests)
    found = 0
    for c in completions:
        assert len(c.top_logprobs) == len(c.logprobs) == len(c.tokens)
        for token, lp, top in zip(c.tokens, c.logprobs, c.top_logprobs):
            values = list(top.values())
            assert 0 < len(values) <= 5 and values == sorted(values, reverse=True) and values[0] <= 0
            assert lp <= values[0] + 1e-4
            if token in top:
                found += 1
                assert top[token] == pytest.approx(lp, abs=1e-4)  # transformers' own normalization of the scores
    assert found > 0


def test_two_alternatives_with_the_same_text_keep_the_better_log_probability(tuned_client):
    """The demo tokenizer decodes some ids to the same text: an alternative's text keeps the first (best) value, and
    the alternatives stay best first."""
    texts: dict[str, list[int]] = {}
    for token_id in range(len(tuned_client.tokenizer)):
        texts.setdefault(tuned_client._token_text(token_id), []).append(token_id)
    same = next(ids for ids in texts.values() if len(ids) > 1)
    other = next(ids[0] for text, ids in texts.items() if len(ids) == 1)
    got = tuned_client._alternatives([same[0], other, same[1]], [-0.1, -0.5, -0.9])
    assert got == {tuned_client._token_text(same[0]): -0.1, tuned_client._token_text(other): -0.5}
    assert list(got.values()) == [-0.1, -0.5]


def test_generation_stops_at_the_stop_sequence_and_is_batch_invariant(tuned_client):
    prompts = [
        "Apply the rules.\n\nRule: A + B\nSubstitute: A = cat, B = dog\nAnswer:",
        "Apply the rules.\n\nExpression: moon * moon - fish\nWhich rule produced it?\nAnswer:",
    ]
    reqs = [
        Request(
            request_id=f"g{i}",
            instance_id="i",
            kind="generate",
            prompt=p,
            max_tokens=12,
            stop=("\n",),
            num_prompt_tokens=tuned_client.count_tokens(p),
        )
        for i, p in enumerate(prompts)
    ]
    batch = tuned_client.generate(reqs)
    for req, completion in zip(reqs, batch):
        assert "\n" not in completion.text and completion.text.strip()
        alone = tuned_client.generate([req])[0]
        assert alone.text == completion.text
        assert alone.logprob == pytest.approx(completion.logprob, abs=1e-3)


def test_token_counting_and_left_truncation(untrained_client):
    text = "one two three four five six seven"
    n = untrained_client.count_tokens(text)
    kept = untrained_client.truncate_left(text, 3)
    assert untrained_client.count_tokens(kept) <= 3 and text.endswith(kept.strip())
    assert untrained_client.truncate_left(text, n) == text
    texts = [text, kept, "", "naïve café ☕ " * 20]
    assert untrained_client.count_tokens_many(texts) == [untrained_client.count_tokens(t) for t in texts]
    assert untrained_client.count_tokens_many([]) == []


def test_describe_records_backend_revision_and_versions(untrained_client):
    info = untrained_client.describe()
    assert info["backend"] == "transformers" and info["model_revision"].startswith("sha256:")
    assert set(info["library_versions"]) == {"torch", "transformers"} and info["batch_size"] == 16


@pytest.mark.parametrize(
    "scenario, method",
    [
        ("openbookqa", "multiple_choice_separate_calibrated"),  # 4 choices + 4 null-prompt ones per question
        ("mmlu", "multiple_choice_separate_original"),  # 5-shot: every question starts with the same few-shot block
    ],
)
def test_shared_context_scoring_equals_independent_scoring_on_real_prompts(tuned_client, catalog, scenario, method):
    from holistic_dagster.adaptation.adapter import TokenBudget, build_requests
    from holistic_dagster.scenarios import load_instances, sample_instances
    from holistic_dagster.scenarios.spec import SuiteScenario

    spec = catalog.scenario(scenario)
    spec = spec.model_copy(
        update={
            "subsets": spec.subsets[:2] if scenario == "mmlu" else spec.subsets,
            "adapter": spec.adapter.model_copy(update={"method": method}),
        }
    )
    instances = sample_instances(spec, SuiteScenario(max_eval_instances=4, seed=3), load_instances(spec))
    budget = TokenBudget(tuned_client.max_context, tuned_client.count_tokens, tuned_client.truncate_left)
    requests = list(
        {r.request_id: r for r in build_requests(instances, spec.adapter, catalog.templates_dir, budget, 0)}.values()
    )
    shared = tuned_client.score(requests, share_context=True)
    independent = tuned_client.score(requests, share_context=False)
    assert len({r.prompt for r in requests}) < len(requests)  # contexts really are shared
    if scenario == "mmlu":  # and each subject's questions share their few-shot block, run once
        from holistic_dagster.clients.batching import clusters_by_prefix as _clusters_by_prefix

        encoded = [tuned_client._encode_pair(r) for r in requests]
        contexts = list(dict.fromkeys(tuple(ids[: len(ids) - n]) for ids, n in encoded))
        clusters = _clusters_by_prefix(contexts)
        assert len(clusters) == 2 and all(len(members) == 4 and prefix > 200 for members, prefix in clusters)
    for a, b in zip(shared, independent):
        assert a.request_id == b.request_id and a.tokens == b.tokens
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
        assert list(a.logprobs) == pytest.approx(list(b.logprobs), abs=1e-4)


def _argmax_loop(client, prompt: str, steps: int) -> tuple[list[int], list[float]]:
    """Greedy decoding the slow way: a full forward pass over the whole sequence at every step."""
    ids = client.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    new, lps = [], []
    with torch.no_grad():
        for _ in range(steps):
            lp = torch.log_softmax(client.model(torch.tensor([ids + new])).logits[0, -1].float(), dim=-1)
            new.append(int(lp.argmax()))
            lps.append(float(lp.max()))
            if new[-1] == client.tokenizer.eos_token_id or "\n" in client.tokenizer.decode(new):
                break
    return new, lps


@pytest.mark.parametrize("scenario, subsets, max_tokens", [("mmlu", 2, 1), ("synthetic_reasoning", 1, 12)])
def test_greedy_answers_reuse_the_few_shot_prefix_and_equal_a_full_forward(
    tuned_client, catalog, scenario, subsets, max_tokens
):
    """Greedy generation runs each subset's shared few-shot block once and continues every question from its
    key/value cache, in batches whose prompts are padded between the block and the question. The answers
    must be what full forward passes over each whole prompt give: same tokens, log-probabilities within 1e-4."""
    from holistic_dagster.adaptation.adapter import TokenBudget, build_requests
    from holistic_dagster.clients.batching import clusters_by_prefix as _clusters_by_prefix
    from holistic_dagster.scenarios import load_instances, sample_instances
    from holistic_dagster.scenarios.spec import SuiteScenario

    spec = catalog.scenario(scenario)
    spec = spec.model_copy(update={"subsets": spec.subsets[:subsets]})
    assert spec.adapter.max_train_instances >= 3 and spec.adapter.max_tokens == max_tokens
    instances = sample_instances(spec, SuiteScenario(max_eval_instances=3, seed=3), load_instances(spec))
    budget = TokenBudget(tuned_client.max_context, tuned_client.count_tokens, tuned_client.truncate_left)
    requests = build_requests(instances, spec.adapter, catalog.templates_dir, budget, 0)
    # two prompts with no shared prefix, of different lengths: one batch, the shorter padded on the left
    requests.append(dataclasses.replace(requests[0], request_id="short", prompt="Answer:"))
    requests.append(dataclasses.replace(requests[0], request_id="other", prompt="Rule: A + B\nAnswer:"))
    encoded = [(tuned_client.tokenizer(r.prompt, add_special_tokens=False)["input_ids"], 0) for r in requests]
    clusters = _clusters_by_prefix([ids for ids, _ in encoded])
    assert sorted(len(members) for members, prefix in clusters if prefix > 30) == [3] * subsets  # a block each

    answers = tuned_client.generate(requests)
    for req, completion, (ids, _) in zip(requests, answers, encoded):
        new, lps = _argmax_loop(tuned_client, req.prompt, max_tokens)
        text = tuned_client.tokenizer.decode(new)
        kept = len(completion.tokens)
        assert completion.num_prompt_tokens == len(ids)
        assert completion.text == text.split("\n")[0].removesuffix(tuned_client.tokenizer.eos_token)
        assert list(completion.logprobs) == pytest.approx(lps[:kept], abs=1e-4)
        if kept:  # the top alternatives of the first token, in order
            with torch.no_grad():
                lp = torch.log_softmax(tuned_client.model(torch.tensor([ids])).logits[0, -1].float(), dim=-1)
            top_lps, top_ids = lp.topk(5)
            assert list(completion.top_logprobs[0]) == [tuned_client.tokenizer.decode([t]) for t in top_ids.tolist()]
            assert list(completion.top_logprobs[0].values()) == pytest.approx(top_lps.tolist(), abs=1e-4)


def test_long_prompts_run_in_smaller_batches():
    """Rows x the longest row's tokens stay within the token budget (4096): prompts of 3000, 1500, ... tokens are
    not padded to the longest together; short ones still fill the rows."""
    from holistic_dagster.clients.batching import BatchLimits, padded_batches

    lengths = [5000, 3000, 1500, 1400, 1000, 1000, 900, 100, 100, 100, 100, 100, 100, 50]
    order = list(range(len(lengths)))
    batches = list(padded_batches(order, lambda i: lengths[i], BatchLimits(rows=4, tokens=4096)))
    # 5000 alone (over the budget), 3000 alone (4096 // 3000 = 1), 1500 with 1400 (4096 // 1500 = 2),
    # 1000 x 4 rows fits (4096 // 1000 = 4): 1000, 1000, 900, 100; then batch_size caps the short ones
    assert batches == [[0], [1], [2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13]]
    assert [i for b in batches for i in b] == order


def test_long_prompts_within_the_attention_bound_run_alone_and_short_ones_fill_the_rows():
    """With an attention bound (rows x queries x width, 2**22 on a CPU): the demo's RAFT prompts of 2,112, 1,753
    and 1,741 tokens (30 answer tokens each) run one at a time, the next four together, and 0-shot prompts of 150
    tokens 64 to a pass; where only the last tokens are computed (a shared prefix in the cache), wide rows batch."""
    from holistic_dagster.clients.batching import BatchLimits, padded_batches

    limits = BatchLimits(rows=64, tokens=16384, attention=2**22)
    prompts = [2112, 1753, 1741, 903, 815, 814, 409] + [150] * 70
    order = list(range(len(prompts)))
    batches = list(padded_batches(order, lambda i: prompts[i] + 30, limits, lambda i: prompts[i]))
    # 2**22 // (2142 x 2112) = 0: alone; 2**22 // (933 x 903) = 4, where 16384 // 933 = 17: the attention bound
    # decides (903, 815, 814, 409); 2**22 // (180 x 150) = 155: the rows (64) do
    assert [len(b) for b in batches] == [1, 1, 1, 4, 64, 6]
    assert [i for b in batches for i in b] == order
    cached = list(padded_batches(order[:3], lambda i: prompts[i] + 30, limits, lambda i: 20))
    assert cached == [[0, 1, 2]]  # 3 x 20 x 2142 scores: one pass
    assert list(padded_batches(order[:3], lambda i: prompts[i] + 30, limits)) == [[0, 1, 2]]  # no queries: no bound
    assert BatchLimits(8, 4096, 2**22).halved() == BatchLimits(4, 2048, 2**21)


def test_a_client_without_its_weights_yet_counts_describes_and_then_loads_them(untrained_client):
    """The model's process answers the prompts stage (token counts, the context window, the description) before
    the weights load; what it then generates is what the eagerly loaded client generates."""
    from holistic_dagster.clients.transformers_client import TransformersClient

    lazy = TransformersClient(untrained_client.spec, load_model=False)
    assert lazy._model is None
    assert lazy.max_context == untrained_client.max_context and lazy.describe() == untrained_client.describe()
    assert lazy.count_tokens_many(["a b c", ""]) == [3, 0]
    assert lazy._model is None  # none of that needed the weights
    req = Request(request_id="g", instance_id="i", kind="generate", prompt="Answer:", max_tokens=4)
    assert lazy.generate([req])[0].tokens == untrained_client.generate([req])[0].tokens
    assert lazy.eos_ids == untrained_client.eos_ids
