"""HELM's language_modeling adapter and its metrics: documents split into windows that fit the context, the
log-likelihood metrics by hand, a suite pin turning any scenario into a corpus, and one run through the real
transformers path."""

from __future__ import annotations

import math
import re
import shutil
from types import SimpleNamespace

import pytest

from holistic_dagster.adaptation.adapter import TokenBudget, build_requests
from holistic_dagster.adaptation.methods.language_modeling import document_windows
from holistic_dagster.adaptation.spec import AdapterSpec
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.errors import CapabilityError
from holistic_dagster.metrics.scoring import metrics_per_instance, score_instances
from holistic_dagster.records import Completion, Instance, Reference, SourceFile
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.stages.prompts import adapter_for
from tests.conftest import write

SRC = SourceFile("test://", "0", "test")
LM = AdapterSpec(method="language_modeling")


def words(max_context: int) -> TokenBudget:
    """One token per word; truncation keeps the text from its n-th last word on (whitespace as it was)."""

    def truncate_left(text: str, n: int) -> str:
        starts = [m.start() for m in re.finditer(r"\S+", text)]
        return text[starts[-n] :] if len(starts) > n else text

    return TokenBudget(max_context, lambda t: len(t.split()), truncate_left)


def chars(max_context: int) -> TokenBudget:
    """One token per character."""
    return TokenBudget(max_context, len, lambda t, n: t[-n:])


def doc(iid: str, text: str) -> Instance:
    return Instance(iid, "test", text, (Reference("unused", True),), SRC, iid)


def check_windows(text: str, budget: TokenBudget) -> list[tuple[str, str]]:
    """Every window fits (at most max_context - 1 new tokens, with its context within max_context), the
    continuations are the text exactly once, and each context is the end of the text before its window."""
    windows = document_windows(text, budget)
    assert "".join(c for _, c in windows) == text
    assert windows[0][0] == ""  # the first window is scored after the model's start token
    start = 0
    for prompt, continuation in windows:
        assert 1 <= budget.count_tokens(continuation) <= budget.max_context - 1
        assert budget.count_tokens(prompt) + budget.count_tokens(continuation) <= budget.max_context
        assert text[:start].endswith(prompt)
        start += len(continuation)
    return windows


def test_a_long_document_is_split_into_windows_that_fit_and_cover_it_once():
    text = " ".join(f"w{i}" for i in range(23))
    windows = check_windows(text, words(8))
    # HELM's windows: 7 new tokens each (one position for context), the last 2 after as many as fit (6)
    assert [len(c.split()) for _, c in windows] == [7, 7, 7, 2]
    assert [len(p.split()) for p, _ in windows] == [0, 1, 1, 6]
    assert windows[1] == ("w6", " w7 w8 w9 w10 w11 w12 w13")  # the whitespace opens the next window
    assert windows[3] == ("w15 w16 w17 w18 w19 w20", " w21 w22")


def test_a_document_that_fits_is_one_window_and_a_word_longer_than_a_window_is_cut():
    assert document_windows("a short text", words(8)) == [("", "a short text")]
    assert document_windows("", words(8)) == [("", "")]
    windows = check_windows("abcdefghij klm nopq", chars(5))
    assert [c for _, c in windows] == ["abcd", "efgh", "ij", " klm", " nop", "q"]


def test_windows_with_newlines_and_unicode_cover_the_text():
    text = ("Überraschung!  Ein Satz.\n\nNoch einer – mit Gedankenstrich… " * 12).strip()
    check_windows(text, chars(40))
    check_windows(text, words(6))


def test_the_adapter_scores_each_window_without_template_or_examples(catalog):
    text = " ".join(f"w{i}" for i in range(10))
    train = Instance("t", "train", "a training text", (Reference("x", True),), SRC, "t")
    requests = build_requests([train, doc("d", text)], LM, catalog.templates_dir, words(6), seed=0)
    assert [(r.kind, r.prompt, r.continuation, r.num_train_instances) for r in requests] == [
        ("score", "", "w0 w1 w2 w3 w4", 0),
        ("score", "w4", " w5 w6 w7 w8 w9", 0),
    ]


def lm_completion(request_id: str, logprobs: list[float]) -> Completion:
    return Completion(request_id, "", logprobs=tuple(logprobs), logprob=sum(logprobs), finish_reason="scored")


def test_the_metrics_by_hand_from_known_token_logprobs(catalog):
    """Per document its logprob, tokens and bytes; for the scenario HELM's ratios over the sums."""
    docs = [doc("a", "one two three four five"), doc("b", "é ok")]  # "é" is 2 bytes in UTF-8
    requests = build_requests(docs, LM, catalog.templates_dir, words(4), seed=0)
    assert [(r.instance_id, r.continuation) for r in requests] == [
        ("a", "one two three"),
        ("a", " four five"),
        ("b", "é ok"),
    ]
    token_lps = {0: [-1.0, -2.0, -0.5], 1: [-3.0, -1.5], 2: [-4.0, -2.0]}
    completions = {r.request_id: lm_completion(r.request_id, token_lps[i]) for i, r in enumerate(requests)}
    rows, aggregates = score_instances(
        "language_modeling", LM_METRICS, docs, requests, completions, families=("accuracy", "efficiency")
    )
    per = {(r.instance_id, r.metric): r.value for r in rows if r.family == "accuracy"}
    assert per == {
        ("a", "logprob"): -8.0,
        ("a", "num_perplexity_tokens"): 5,
        ("a", "num_bytes"): 23,
        ("b", "logprob"): -6.0,
        ("b", "num_perplexity_tokens"): 2,
        ("b", "num_bytes"): 5,
    }
    value = {m.metric: m.value for m in aggregates if m.family == "accuracy"}
    assert value["bits_per_byte"] == pytest.approx(14.0 / (28 * math.log(2)))
    assert value["logprob_per_byte"] == pytest.approx(-14.0 / 28)
    assert value["perplexity"] == pytest.approx(math.exp(14.0 / 7))
    assert value["logprob"] == pytest.approx(-7.0)  # per-document rows: their mean
    assert value["num_bytes"] == pytest.approx(14.0)
    # no reference metric is scored (no exact_match), and the row count is what the quality check expects
    assert not {r.metric for r in rows} & {"exact_match", "rouge_2"}
    expected = metrics_per_instance(LM_METRICS, ("accuracy", "efficiency"), "language_modeling")
    assert sum(1 for r in rows if r.instance_id == "a") == expected
    assert {r.metric for r in rows if r.instance_id == "a"} >= {"logprob", "num_bytes", "runtime_s"}
    carriers = {r.request_id for r in rows if r.instance_id == "a"}
    assert carriers == {requests[0].request_id}  # the first window carries the document's rows


LM_METRICS = ("bits_per_byte", "logprob_per_byte", "perplexity", "logprob", "num_perplexity_tokens", "num_bytes")

SUITE = """
version: lm1
perturbations: {robustness: [lowercase], fairness: [dialect]}
scenarios:
  xsum: {max_eval_instances: 2, seed: 4, method: language_modeling}
  imdb: {max_eval_instances: 2, seed: 4}
"""


@pytest.fixture
def lm_catalog(tmp_path) -> Catalog:
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(tmp_path / "assets" / "suites" / "lm1.yaml", SUITE)
    return Catalog(tmp_path / "assets")


def test_a_language_modeling_pin_reports_the_lm_metrics_instead_of_the_listed_ones(lm_catalog):
    spec, _ = lm_catalog.resolved_scenario("lm1", "xsum")
    assert spec.adapter.method == "language_modeling" and spec.adapter.max_train_instances == 0
    assert spec.main_metric == "bits_per_byte" and spec.metrics == LM_METRICS
    assert spec.families == ("accuracy", "efficiency") and spec.extra_metrics == ()
    assert lm_catalog.perturbations("lm1", "xsum") == {}  # nothing to perturb: no robustness or fairness
    assert lm_catalog.main_metrics("lm1") == {"xsum": "bits_per_byte", "imdb": "quasi_exact_match"}
    assert lm_catalog.scenario("xsum").main_metric == "rouge_2"  # the scenario itself is unchanged
    assert set(lm_catalog.perturbations("lm1", "imdb")) == {"robustness", "fairness"}


def test_language_modeling_needs_prompt_logprobs_and_has_no_fallback():
    client = SimpleNamespace(supports_prompt_logprobs=False, spec=SimpleNamespace(name="m", backend="openai"))
    with pytest.raises(CapabilityError, match="cannot return prompt log-probabilities.*language_modeling"):
        adapter_for(client, "xsum", LM, fallback_method="generation")
    client.supports_prompt_logprobs = True
    assert adapter_for(client, "xsum", LM, None) is LM


@pytest.mark.slow  # the real transformers path end to end
def test_xsum_as_a_corpus_through_the_pipeline(lm_catalog, tmp_path, monkeypatch, shared_data):
    """XSum articles (the real test.jsonl) scored by the untrained demo model through the real transformers
    path, its context cut to 128 tokens so that each article takes several windows: bits per byte on the
    leaderboard, near what uniform guessing over its vocabulary gives, and every stage's quality checks pass."""
    from holistic_dagster import quality
    from holistic_dagster.stages import StageContext
    from holistic_dagster.stages.completions import run_completions
    from holistic_dagster.stages.dataset import build_dataset
    from holistic_dagster.stages.prompts import build_prompts
    from holistic_dagster.stages.scores import compute_scores
    from holistic_dagster.warehouse import Warehouse
    from holistic_dagster.warehouse.access import Prompts

    model, version = "demo-gpt2-short", "lm1"
    models = write(
        tmp_path / "models.yaml",
        f"models:\n  {model}: {{backend: transformers, path: 'demo:gpt2-untrained', max_context: 128}}\n",
    )
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(shared_data))
    stage = StageContext(Warehouse(tmp_path / "wh.duckdb"), lm_catalog, deployment=Deployment.of(models=models))
    assert build_dataset(stage, version, "xsum")["num_test"] == 2
    build_prompts(stage, version, "xsum", model)
    run_completions(stage, version, "xsum", model)
    compute_scores(stage, version, "xsum", model)

    client = stage.client(model)
    requests = Prompts(stage.warehouse).requests(version, "xsum", model)
    documents = {i.instance_id: i.input for i in _tests(stage, version)}
    assert len(requests) > 4 * len(documents)  # the articles run past the context: several windows each
    assert max(client.count_tokens(r.prompt) + client.count_tokens(r.continuation) for r in requests) <= 128
    for iid, text in documents.items():
        windows = [r for r in requests if r.instance_id == iid]
        assert sum(len(r.continuation) for r in windows) == len(text)
        # the windows tokenize as the whole article does: every token is scored exactly once
        assert sum(client.count_tokens(r.continuation) for r in windows) == client.count_tokens(text)

    board = stage.warehouse.df(
        "SELECT family, metric, value, count FROM leaderboard WHERE version = ? AND scenario = 'xsum'", [version]
    )
    values = dict(zip(board["metric"], board["value"]))
    assert {"bits_per_byte", "logprob_per_byte", "perplexity", "logprob", "runtime_s"} <= set(values)
    assert "rouge_2" not in values and "toxic_fraction" not in values
    not_applicable = {"calibration", "robustness", "fairness", "bias", "toxicity", "safety"}
    assert set(board[board["metric"] == ""]["family"]) == not_applicable
    scores = stage.warehouse.df(
        "SELECT metric, sum(value) AS total FROM instance_scores WHERE version = ? AND scenario = 'xsum' "
        "AND family = 'accuracy' GROUP BY metric",
        [version],
    ).set_index("metric")["total"]
    tokens, num_bytes = scores["num_perplexity_tokens"], scores["num_bytes"]
    assert num_bytes == sum(len(t.encode("utf-8")) for t in documents.values())
    # random weights: close to uniform over the vocabulary, log2(vocab) bits per token
    vocab = len(client.tokenizer)
    assert values["bits_per_byte"] == pytest.approx(math.log2(vocab) * tokens / num_bytes, rel=0.1)
    assert values["perplexity"] == pytest.approx(vocab, rel=0.25)
    assert values["bits_per_byte"] == pytest.approx(-values["logprob_per_byte"] / math.log(2))
    assert lm_catalog.main_metrics(version)["xsum"] == "bits_per_byte"

    for name in ("dataset", "prompts", "completions", "scores"):
        failed = [o for o in quality.check_stage(name, stage, version, "xsum", model) if not o.passed]
        assert not failed, failed


def _tests(stage, version):
    from holistic_dagster.warehouse.access import Instances

    return [i for i in Instances(stage.warehouse).records(version, "xsum") if i.split == "test" and not i.perturbation]
