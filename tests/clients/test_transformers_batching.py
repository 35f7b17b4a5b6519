"""Continuation scoring and greedy generation in real batches on a local transformers model: many requests per
forward pass, the same numbers as one request at a time (float32, within 1e-4), a bounded number of forward passes,
smaller batches when the device runs out of memory, and a transformers release that would run silently wrong
refused. Real (tiny, offline-built) GPT-2 and Llama models; rotary positions and grouped keys in the Llama."""

from __future__ import annotations

import logging
import random

import pytest
import torch

from holistic_dagster.clients.batching import BatchLimits
from holistic_dagster.clients.transformers_client import TransformersClient
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import LibraryVersionError
from holistic_dagster.records import Request

FEW_SHOT = "".join(f"Question: what follows {w}?\nAnswer: the next word\n\n" for w in ("cat", "dog", "sun", "moon"))


@pytest.fixture(scope="module")
def llama_dir(untrained_client, tmp_path_factory):
    """A random Llama (rotary positions, 2 key/value heads for 4 query heads) with the demo tokenizer."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(untrained_client.path)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("llama")
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _client(path, **settings) -> TransformersClient:
    return TransformersClient(ModelSpec(name="t", backend="transformers", path=str(path), **settings))


@pytest.fixture(params=["gpt2", "llama"])
def model_dir(request, untrained_client, llama_dir):
    return untrained_client.path if request.param == "gpt2" else llama_dir


def _requests(n_questions: int = 9, seed: int = 0) -> list[Request]:
    """Questions with 2-5 choices of 1-9 words, half of them after a shared few-shot block (run once as a prefix),
    and language-modelling requests (a context of their own, one continuation each)."""
    rng = random.Random(seed)
    words = "red green blue apple stone river quickly seven the of and moon over under".split()
    requests = []
    for q in range(n_questions):
        question = " ".join(rng.choices(words, k=rng.randint(1, 12)))
        prompt = ("" if q % 2 else FEW_SHOT) + f"Question: {question}?\nAnswer:"
        for c in range(rng.randint(2, 5)):
            choice = " " + " ".join(rng.choices(words, k=rng.randint(1, 9)))
            requests.append(Request(f"q{q}c{c}", f"q{q}", "score", prompt, continuation=choice, choice_index=c))
    for k in range(5):  # language modelling: each text alone, scored after its first word
        text = " ".join(rng.choices(words, k=rng.randint(3, 20)))
        first, rest = text.split(" ", 1)
        requests.append(Request(f"lm{k}", f"lm{k}", "score", first, continuation=" " + rest))
    for k in range(3):  # a document's first window: after nothing (the start token), which all of them share
        text = " ".join(rng.choices(words, k=rng.randint(2, 30)))
        requests.append(Request(f"doc{k}", f"doc{k}", "score", "", continuation=text))
    return requests


def _passes(client) -> list[int]:
    """The rows of each forward pass the client ran since its count was cleared, most first."""
    return sorted(client.pass_rows.elements(), reverse=True)


@pytest.mark.parametrize("limits", [(16, 4096), (3, 4096), (64, 40)])
def test_batched_scoring_equals_scoring_one_request_at_a_time(model_dir, limits):
    """Real batches (many questions' contexts per pass, their choices in continuation passes, lone requests with
    their continuation in the row) give each continuation's log-probabilities within 1e-4 of scoring it alone."""
    rows, tokens = limits
    client = _client(model_dir, batch_size=rows, batch_tokens=tokens)
    requests = _requests()
    together = client.score(requests)
    client.pass_rows.clear()
    alone = [client.score([r])[0] for r in requests]
    assert len(_passes(client)) >= len(requests)  # one at a time: at least one pass each
    for a, b in zip(together, alone):
        assert a.request_id == b.request_id and a.tokens == b.tokens and len(a.logprobs) == len(a.tokens) > 0
        assert list(a.logprobs) == pytest.approx(list(b.logprobs), abs=1e-4)
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4) and a.finish_reason == "scored"


def test_a_batch_holds_many_questions_and_each_context_runs_once(untrained_client):
    """30 questions of 4 choices at batch 16, 6 of them after a shared few-shot block. The block runs once (a pass
    of one row); contexts run 16 questions a pass (the block's 6 in a pass of their own, continuing its cache);
    the choices of more than one token continue them, 16 a pass; one-token choices need no pass of their own."""
    client = _client(untrained_client.path, batch_size=16, batch_tokens=100_000)
    choices = (" yes", " no", " a longer answer", " perhaps, perhaps not")
    # two one-token choices, two longer ones (as the demo tokenizer splits them)
    assert [client._encode_pair(Request("r", "i", "score", "Q:", continuation=c))[1] for c in choices] == [1, 1, 5, 15]
    prompts = [f"{FEW_SHOT if q >= 24 else ''}Question {q}: {'x ' * q}?\nAnswer:" for q in range(30)]
    requests = [
        Request(f"q{q}c{c}", f"q{q}", "score", prompt, continuation=choice)
        for q, prompt in enumerate(prompts)
        for c, choice in enumerate(choices)
    ]
    client.score(requests)
    # plain: contexts 16 + 8, their 48 longer choices 16 + 16 + 16; few-shot: the block, 6 contexts, 12 choices
    assert _passes(client) == [16, 16, 16, 16, 12, 8, 6, 1]
    assert sum(_passes(client)) / len(requests) < 0.8  # rows per request: each context once, not once per choice


def test_scores_do_not_depend_on_how_requests_are_batched_or_shared(untrained_client):
    client = _client(untrained_client.path, batch_size=5, batch_tokens=4096)
    requests = _requests(seed=1)
    shared = client.score(requests, share_context=True)
    independent = client.score(requests, share_context=False)
    shuffled = requests[::-1]
    reordered = {c.request_id: c for c in client.score(shuffled)}
    for a, b in zip(shared, independent):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
        assert a.logprob == pytest.approx(reordered[a.request_id].logprob, abs=1e-4)


def test_greedy_generation_read_back_in_stretches_gives_the_same_completions(model_dir):
    """On a GPU the host reads decoded tokens back every 16 steps; rows that ended meanwhile decode on unseen.
    What is kept must be what step-by-step reading keeps: same texts, tokens, log-probabilities, finish reasons."""
    client = _client(model_dir, batch_size=4)
    prompts = [FEW_SHOT + f"Question: what follows {w}?\nAnswer:" for w in ("river", "apple", "seven")]
    prompts += ["Answer:", "the", "Question: colour of the sky?\nAnswer:"]
    requests = [
        Request(f"g{i}{s}", "i", "generate", p, max_tokens=n, stop=stop)
        for i, p in enumerate(prompts)
        for s, (n, stop) in enumerate([(1, ()), (7, ()), (20, ("e",)), (40, ("the", "\n"))])
    ]
    client.sync_every = 1
    stepwise = client.generate(requests)
    client.sync_every = 16
    stretched = client.generate(requests)
    assert any(c.finish_reason == "stop" for c in stepwise) and any(c.finish_reason == "length" for c in stepwise)
    for a, b in zip(stepwise, stretched):
        assert (a.text, a.tokens, a.finish_reason, a.num_completion_tokens) == (
            b.text, b.tokens, b.finish_reason, b.num_completion_tokens,
        )  # fmt: skip
        assert list(a.logprobs) == pytest.approx(list(b.logprobs), abs=1e-5)


def _prompts(shared: int, length: int, n: int, first: int) -> list[list[int]]:
    """n token rows of `length`: with shared > 0 the first `shared` tokens are common to them all, otherwise none."""
    return [[7] * shared + [first + i] * (length - shared) if shared else [first + i] * length for i in range(n)]


def test_generation_shares_a_prefix_where_the_plan_computes_less_padding_and_decoding_included():
    """Limits of 64 rows, 16,384 tokens and attention 2**22, 30 steps, a step costing 32 prompt tokens: a plan
    costs each batch's rows x widest computed tokens, plus 30 x 32 = 960 per batch, plus a shared prefix's pass (its
    tokens and one step: a pass like any other)."""
    from holistic_dagster.clients.batching import generation_prefix_groups

    limits = BatchLimits(rows=64, tokens=16384, attention=2**22)

    def plan(rows: list[list[int]]) -> list[tuple[int, int]]:
        return [(len(members), prefix) for members, prefix in generation_prefix_groups(rows, 30, limits, 32)]

    # 3 prompts of 1,500 tokens after a 50-token block, 10 short ones: each long prompt runs alone either way
    # (2**22 // (1530 x 1450) = 1): unshared 3 x 1500 + 10 x 100 + 4 x 960 = 9,340; shared 10 x 100 + 960 + 50 + 32 +
    # 3 x 1450 + 3 x 960 = 9,272
    assert plan(_prompts(50, 1500, 3, 100) + _prompts(0, 100, 10, 1000)) == [(3, 50), (10, 0)]
    # 3 prompts of 60 tokens after a 40-token block among 61 others: one batch of 64 (3,840 + 960 = 4,800) against
    # two (61 x 60 + 960 + 40 + 32 + 3 x 20 + 960 = 5,712)
    assert plan(_prompts(40, 60, 3, 100) + _prompts(0, 60, 61, 1000)) == [(64, 0)]
    # 20 prompts of 210 tokens after a 200-token block among 40 others: 60 x 210 + 960 = 13,560 against
    # 40 x 210 + 960 + 200 + 32 + 20 x 10 + 960 = 10,752
    assert plan(_prompts(200, 210, 20, 100) + _prompts(0, 210, 40, 1000)) == [(20, 200), (40, 0)]
    assert plan(_prompts(40, 60, 3, 100)) == [(3, 40)]  # alone: 180 + 960 against 40 + 32 + 60 + 960
    # 32 pairs of 60-token prompts, each pair after its own 40-token block, nothing else: together one batch of 64
    # (4,800); a pair taken out adds a batch (62 x 60 + 960 + 40 + 32 + 2 x 20 + 960 = 5,752)
    pairs = [row for k in range(32) for row in _prompts(40, 60, 2, 100 + 2 * k)]
    for k in range(32):  # each pair's block of its own
        pairs[2 * k][:40] = pairs[2 * k + 1][:40] = [2000 + k] * 40
    assert plan(pairs) == [(64, 0)]
    # short prompts padded to a wide one: 4 of 70 tokens after a 50-token block beside one of 400 (all within one
    # batch: 5 x 400 + 960 = 2,960); out, the wide one alone and the four after their block: 400 + 960 + 50 + 32 +
    # 4 x 20 + 960 = 2,482
    assert plan(_prompts(50, 70, 4, 100) + _prompts(0, 400, 1, 1000)) == [(4, 50), (1, 0)]


def test_one_token_answers_share_a_prefix_on_a_cpu_only_where_the_plan_computes_less():
    """A one-token answer (a joint multiple-choice letter) is one pass per batch: on a CPU its prompts share a prefix
    by the same weighing as longer answers, with 1 step. Pairs that share a short stretch (0-shot questions with a
    common opening) stay in full batches, where a prefix pass and a small batch of their own would cost more than
    the tokens they save; a few-shot block that many prompts start with runs once."""
    from holistic_dagster.clients.batching import generation_prefix_groups

    limits = BatchLimits(rows=16, tokens=16384, attention=2**22)

    def plan(rows: list[list[int]]) -> list[tuple[int, int]]:
        return [(len(members), prefix) for members, prefix in generation_prefix_groups(rows, 1, limits, 32)]

    # a pair after a 40-token opening among 14 others, all of 90 tokens: one batch of 16 (16 x 90 + 32 = 1,472)
    # against the pair out (14 x 90 + 32 + 40 + 32 + 2 x 50 + 32 = 1,496)
    assert plan(_prompts(40, 90, 2, 100) + _prompts(0, 90, 14, 1000)) == [(16, 0)]
    # 12 prompts after a 400-token block among 4 others: 16 x 450 + 32 = 7,232 against
    # 4 x 450 + 32 + 400 + 32 + 12 x 50 + 32 = 2,896
    assert plan(_prompts(400, 450, 12, 100) + _prompts(0, 450, 4, 1000)) == [(12, 400), (4, 0)]


def test_a_long_prompt_is_not_followed_by_short_ones_padded_to_it_where_a_batch_of_their_own_costs_less():
    """Prompts longest first, cut where a batch costs its rows x its widest prompt plus what its steps cost."""
    from holistic_dagster.clients.batching import cut_where_padding_costs_more

    limits = BatchLimits(rows=16, tokens=16384, attention=2**22)

    def cut(lengths: list[int], batch_cost: int, steps: int = 1) -> list[int]:
        runs = cut_where_padding_costs_more(list(range(len(lengths))), lambda i: lengths[i], steps, limits, batch_cost)
        assert [i for run in runs for i in run] == list(range(len(lengths)))  # every prompt once, in order
        return [len(run) for run in runs]

    # one batch 11 x 400 + 32 = 4,432; the long one alone 400 + 32 + 10 x 100 + 32 = 1,464
    assert cut([400] + [100] * 10, 32) == [1, 10]
    # decoding 30 steps of 32: one batch 4 x 400 + 960 = 2,560 against 400 + 960 + 3 x 100 + 960 = 2,620
    assert cut([400] + [100] * 3, 960, steps=30) == [4]
    assert cut([100] * 20, 32) == [16, 4]  # equal lengths: full batches first, as padded_batches makes them
    # the attention bound (2**22 // (1,501 x 1,500) = 1) runs each long prompt alone whatever it costs
    assert cut([1500, 1500, 1500], 0) == [1, 1, 1]


def test_answers_that_end_sooner_are_planned_for_the_steps_they_take():
    """A cluster of 3 prompts of 300 tokens after a 250-token block among 12 others of 300 (64 rows): planned for 30
    steps it runs with them (15 x 300 + 960 = 5,460 against 12 x 300 + 960 + 250 + 32 + 3 x 50 + 960 = 5,952);
    for answers of 6 steps it runs its block once (4,500 + 192 = 4,692 against 3,600 + 192 + 282 + 150 + 192 =
    4,416)."""
    from holistic_dagster.clients.batching import generation_prefix_groups

    limits = BatchLimits(rows=64, tokens=16384, attention=2**22)
    rows = _prompts(250, 300, 3, 100) + _prompts(0, 300, 12, 1000)
    plan = lambda **kw: [(len(m), p) for m, p in generation_prefix_groups(rows, 30, limits, 32, **kw)]  # noqa: E731
    assert plan() == [(15, 0)]
    assert plan(decode_steps=6) == [(3, 250), (12, 0)]


def test_only_the_clusters_that_save_most_are_weighed(monkeypatch):
    """Each weighing batches the rest again, so a plan weighs at most WEIGHED_CLUSTERS clusters, largest saving first:
    20 prompts after a 200-token block (saving 19 x 200), 20 after another of 100 (19 x 100), 40 others of 210. Both
    share when both are weighed; weighing one, the second block's prompts run unshared, cut from the longer others
    (40 x 210 + 960 + 20 x 110 + 960 = 12,520 against 60 x 210 + 960 = 13,560)."""
    from holistic_dagster.clients import batching

    limits = BatchLimits(rows=64, tokens=16384, attention=2**22)
    rows = [[7] * 200 + [100 + i] * 10 for i in range(20)] + [[8] * 100 + [300 + i] * 10 for i in range(20)]
    rows += [[1000 + i] * 210 for i in range(40)]
    plan = lambda: [(len(m), p) for m, p in batching.generation_prefix_groups(rows, 30, limits, 32)]  # noqa: E731
    assert plan() == [(20, 200), (20, 100), (40, 0)]
    monkeypatch.setattr(batching, "WEIGHED_CLUSTERS", 1)
    assert plan() == [(20, 200), (40, 0), (20, 0)]


def test_after_three_answers_the_rest_is_planned_for_their_length_and_answers_do_not_change(untrained_client):
    """Rows that end after 2 tokens (the client's end-of-answer test made to say so), 16 rows a batch: the first
    group (3 questions after a long few-shot block) shows answers of 3 steps, so the 9 prompts left are planned again
    for 6: 3 of them share a 73-token opening, which pays for 6 steps (its pass of one row, then 3 rows) but not for
    30 (9 rows together). Every answer is the one each prompt gets alone."""
    client = _client(untrained_client.path, batch_size=16)
    client._done = lambda ids, stop: len(ids) >= 2
    words = "red green blue apple stone river quickly seven the of and moon over under".split()
    opening = " ".join(words * 2) + " "
    prompts = [FEW_SHOT * 4 + f"Question: what follows {w}?\nAnswer:" for w in ("river", "apple", "seven")]
    prompts += [opening + f"and then {w} {w} {w} {w} {w}?\nAnswer:" for w in ("cat", "dog", "sun")]
    prompts += [f"Question {k}: {words[k]}?\nAnswer:" for k in range(6)]
    requests = [Request(f"g{i}", "i", "generate", p, max_tokens=30) for i, p in enumerate(prompts)]
    together = client.generate(requests)
    assert all(c.num_completion_tokens == 2 for c in together)
    # each batch a prompt pass and one decoding step: the block, its 3 rows; the opening, its 3 rows; the other 6
    assert _passes(client) == [6, 6, 3, 3, 3, 3, 1, 1]  # planned once for 30 steps: [9, 9, 3, 3, 1]
    for a, b in zip(together, [client.generate([r])[0] for r in requests]):
        assert (a.text, a.tokens) == (b.text, b.tokens)
        assert list(a.logprobs) == pytest.approx(list(b.logprobs), abs=1e-4)


def test_the_client_answers_one_token_pairs_in_full_batches_and_runs_a_long_block_once(untrained_client):
    """The client on a CPU: two questions with a common opening of a few dozen tokens among 14 others run with them
    in one batch (no prefix pass of one row, no cut for padding); 12 questions after a long few-shot block run it
    once."""
    client = _client(untrained_client.path, batch_size=16)
    words = "red green blue apple stone river quickly seven the of and moon over under".split()
    opening = " ".join(words) + " "
    prompts = [opening + f"question {k} is it {words[k]}?\nAnswer:" for k in range(2)]
    prompts += [f"{words[k]} {k} " + " ".join(reversed(words)) + "?\nAnswer:" for k in range(14)]
    ask = lambda texts: [Request(f"q{k}", f"q{k}", "generate", t, max_tokens=1) for k, t in enumerate(texts)]  # noqa: E731
    assert len(client.tokenizer(opening)["input_ids"]) >= 32  # a prefix the old rule (any two) ran once
    client.generate(ask(prompts))
    assert _passes(client) == [16]  # one batch, no prefix pass
    client.pass_rows.clear()
    client.generate(ask([FEW_SHOT * 6 + f"Question: what follows {w}?\nAnswer:" for w in words[:12]]))
    assert _passes(client) == [12, 1]


def test_greedy_generation_continuing_a_shared_prefix_equals_each_prompt_alone(model_dir):
    """Multi-token greedy answers after a shared few-shot block, the block run once on the CPU (a pass of one row),
    give the texts, tokens and log-probabilities (within 1e-4) of generating each prompt alone."""
    client = _client(model_dir, batch_size=64)
    block = FEW_SHOT * 3
    prompts = [block + f"Question: what follows {w}?\nAnswer:" for w in ("river", "apple", "seven", "stone")]
    requests = [Request(f"g{i}", "i", "generate", p, max_tokens=12) for i, p in enumerate(prompts)]
    together = client.generate(requests)
    assert 1 in client.pass_rows and 4 in client.pass_rows  # the block alone, then the four questions continuing it
    alone = [client.generate([r])[0] for r in requests]
    for a, b in zip(together, alone):
        assert (a.text, a.tokens, a.finish_reason) == (b.text, b.tokens, b.finish_reason) and a.tokens
        assert list(a.logprobs) == pytest.approx(list(b.logprobs), abs=1e-4)


def test_running_out_of_device_memory_halves_the_batch_and_remembers(untrained_client, caplog):
    """A device that cannot hold more than 4 rows (simulated: the forward raises torch's out-of-memory error above
    4 rows, as CUDA would): the batch that failed runs again at half the rows until it fits, the smaller limits
    stay for the next batches, and the scores are those of an unbounded run."""
    client = _client(untrained_client.path, batch_size=16, batch_tokens=4096)
    requests = _requests(seed=2)
    expected = client.score(requests)
    base = client._base

    def small_device(**kwargs):
        if kwargs["input_ids"].shape[0] > 4:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return base(**kwargs)

    client._base = small_device
    with caplog.at_level(logging.WARNING):
        got = client.score(requests)
    assert client.limits.current == BatchLimits(rows=4, tokens=1024, attention=2**20)  # CPU's 2**22, halved twice
    assert "ran out of device memory at 16 rows" in caplog.text and "8 rows" in caplog.text
    assert [c.logprob for c in got] == pytest.approx([c.logprob for c in expected], abs=1e-4)
    generated = client.generate([Request(f"g{i}", "i", "generate", f"Answer {i}:", max_tokens=3) for i in range(9)])
    assert all(c.error == "" and c.num_completion_tokens == 3 for c in generated)


def test_a_row_too_long_for_the_device_fails_with_the_devices_error_and_the_limits_stay(untrained_client):
    """One row that does not fit alone cannot be helped by smaller batches: the device's error stands after the
    halvings down to one row, and the limits go back to what they were for the rows that do fit."""
    client = _client(untrained_client.path, batch_size=8, batch_tokens=4096)
    tried: list[int] = []
    base = client._base

    def no_room_for_long_rows(**kwargs):
        tried.append(int(kwargs["input_ids"].shape[0]))
        if kwargs["input_ids"].shape[1] > 150:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return base(**kwargs)

    client._base = no_room_for_long_rows
    long = Request("long", "i", "score", "word " * 300, continuation=" end")
    with pytest.raises(torch.OutOfMemoryError):
        client.score([long] + _requests()[:6])
    assert tried[-1] == 1 and client.limits.current == BatchLimits(rows=8, tokens=4096, attention=2**22)
    assert all(c.error == "" for c in client.score(_requests()[:6]))


def test_an_unsupported_transformers_release_is_refused_at_load(untrained_client, monkeypatch):
    """transformers 5.17 names the key/value cache `past_key_values` and ignores `cache=` without an error (every
    cached prefix dropped, every score wrong): refused by version and, whatever the version says, by signature."""
    from holistic_dagster.clients import transformers_device

    with pytest.raises(LibraryVersionError, match=r"transformers 5\.17\.0 is installed; .* needs >= 5\.24\.0"):
        transformers_device.check_transformers_version("5.17.0")
    transformers_device.check_transformers_version("5.24.0")
    monkeypatch.setattr(transformers_device, "installed_transformers", lambda: "5.17.0")
    with pytest.raises(LibraryVersionError, match="past_key_values"):
        TransformersClient(untrained_client.spec)
    monkeypatch.undo()

    class OldSignature(torch.nn.Module):  # a model's forward as transformers < 5.24 writes it
        def forward(self, input_ids=None, past_key_values=None, attention_mask=None, use_cache=None):
            return input_ids

    with pytest.raises(LibraryVersionError, match=r"OldSignature.forward takes 'past_key_values', not 'cache'"):
        transformers_device.check_forward_signature(OldSignature())
    client = TransformersClient(untrained_client.spec, load_model=False)
    monkeypatch.setattr(transformers_device, "check_forward_signature", _refuse)
    with pytest.raises(LibraryVersionError, match="refused"):
        client.load_model()
    assert client._model is None  # a refused model is not kept


def _refuse(base_model) -> None:
    raise LibraryVersionError(f"{type(base_model).__name__}: refused")


def test_dtype_setting_loads_the_weights_in_it_and_is_part_of_the_identity(untrained_client):
    from holistic_dagster.clients.identity import answering_identity

    half = _client(untrained_client.path, dtype="bfloat16")
    assert next(half.model.parameters()).dtype == torch.bfloat16
    assert half.describe()["dtype"] == "bfloat16" and untrained_client.describe()["dtype"] == "float32"
    assert answering_identity(half.describe()) != answering_identity(untrained_client.describe())
    (scored,) = half.score([Request("s", "i", "score", "Answer:", continuation=" green")])
    assert scored.logprob < 0 and scored.error == ""


def _tiny(config_class, tokenizer_dir, path, **shape):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = config_class(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        **shape,
    )  # fmt: skip
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _naive(client, request: Request) -> float:
    """The model's own forward over the whole text (its own head and logit processing), log-softmax, summed."""
    tok = client.tokenizer
    ctx = tok(request.prompt.rstrip(), add_special_tokens=False)["input_ids"] or [client._fallback_token()]
    cont = tok(request.prompt[len(request.prompt.rstrip()) :] + request.continuation, add_special_tokens=False)[
        "input_ids"
    ]
    with torch.no_grad():
        logprobs = torch.log_softmax(client.model(torch.tensor([ctx + cont])).logits[0].float(), dim=-1)
    return sum(float(logprobs[len(ctx) + k - 1, t]) for k, t in enumerate(cont))


def test_sliding_window_and_soft_capped_models_score_as_their_own_forward(untrained_client, tmp_path):
    """Gemma 2 (a sliding window of 8 tokens on every other layer, soft-capped logits) and Mistral (a window of 8
    on every layer), with prompts well past the window and a shared few-shot block: padding between a shared prefix
    and a row would count as tokens in the window, so these models share no prefix; every score equals the model's
    own forward, soft capping included."""
    from transformers import Gemma2Config, MistralConfig

    models = {
        "gemma2": _tiny(Gemma2Config, untrained_client.path, tmp_path / "g", sliding_window=8,
                        final_logit_softcapping=2.0, query_pre_attn_scalar=16),
        "mistral": _tiny(MistralConfig, untrained_client.path, tmp_path / "m", sliding_window=8),
    }  # fmt: skip
    for name, path in models.items():
        client = _client(path, batch_size=16)
        requests = _requests(seed=4)
        scored = client.score(requests)
        assert client.sliding_window and 1 not in _passes(client), name  # no prefix pass (a pass of one row)
        for request, completion in zip(requests, scored):
            assert completion.logprob == pytest.approx(_naive(client, request), abs=1e-4), (name, request)
    assert _client(models["gemma2"], batch_size=4).logit_transform is not None


def test_a_model_whose_cache_holds_more_than_keys_and_values_is_never_copied():
    """Linear-attention and state-space layers keep states a row-by-row copy would share between rows: such models
    score every request in its own row and share no prefix."""
    from transformers import GPT2Config, Qwen3NextConfig

    from holistic_dagster.clients.transformers_device import cache_layout

    assert cache_layout(GPT2Config()) == (True, False)
    assert cache_layout(Qwen3NextConfig())[0] is False


def test_a_run_that_backs_off_records_the_rows_it_used_and_started_with_in_the_provenance(
    untrained_client, tmp_path, monkeypatch
):
    """A suite through Dagster on a model set to 8 rows whose device holds 2 (simulated as above): the completions of
    the scenario where it ran out of memory point to a provenance of 2 rows, backed off from 8 (the cache's rows keep
    the one the run started with); the next scenario starts at 2 rows and says it backed off from 8."""
    import json
    import shutil

    from dagster import DagsterInstance

    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.definitions import build_definitions
    from holistic_dagster.defs.resources import HolisticResource
    from holistic_dagster.defs.runner import evaluate_suite
    from holistic_dagster.settings import REPO_ROOT
    from holistic_dagster.warehouse import Warehouse
    from tests.conftest import write

    base = TransformersClient._base

    def small_device(self, **kwargs):
        if kwargs["input_ids"].shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return base(self, **kwargs)

    monkeypatch.setattr(TransformersClient, "_base", small_device)
    models = write(
        tmp_path / "models.yaml", f"models:\n  small: {{backend: transformers, path: '{untrained_client.path}', "
        "batch_size: 8}\n",
    )  # fmt: skip
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    suite = (
        "version: oom1\nscenarios:\n  boolq: {max_eval_instances: 6, seed: 1}\n  openbookqa: {max_eval_instances: 6}\n"
    )
    write(tmp_path / "assets" / "suites" / "oom1.yaml", suite)
    catalog, path = Catalog(tmp_path / "assets"), tmp_path / "warehouse.duckdb"
    resource = HolisticResource(warehouse_path=str(path), catalog_dir=str(catalog.root), models_file=str(models))
    evaluate_suite(build_definitions(catalog, resource), DagsterInstance.ephemeral(), "oom1", ["small"])
    used = Warehouse(path).df(
        "SELECT c.scenario, p.provenance_id, p.batch_size, p.decoding FROM completions c "
        "JOIN provenance p USING (provenance_id) WHERE c.model = 'small' GROUP BY ALL ORDER BY ALL"
    )
    assert list(used["scenario"]) == ["boolq", "openbookqa"]  # one provenance per scenario
    assert list(used["batch_size"]) == [2, 2]
    assert [json.loads(d)["backed_off_from_rows"] for d in used["decoding"]] == [8, 8]
    started = Warehouse(path).df(
        "SELECT p.batch_size, p.decoding FROM completion_cache c JOIN provenance p USING (provenance_id) "
        "WHERE c.request_id IN (SELECT request_id FROM completions WHERE scenario = 'boolq') GROUP BY ALL"
    )
    assert list(started["batch_size"]) == [8] and "backed_off_from_rows" not in json.loads(started["decoding"][0])
