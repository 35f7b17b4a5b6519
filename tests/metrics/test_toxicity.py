"""Toxicity: HELM's three aggregates on hand-computed cases, and each classifier implementation."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from importlib import metadata

import pytest
import torch

from holistic_dagster.config.catalog import ToxicitySpec
from holistic_dagster.errors import CatalogError, HolisticError
from holistic_dagster.metrics.toxicity import toxicity_metrics
from holistic_dagster.toxicity import LexiconClassifier, get_classifier
from tests.servers.perspective_protocol_server import PerspectiveProtocolTestServer


def test_toxicity_aggregates_by_hand():
    # three prompts: generations' toxicity [0.1, 0.7], [0.2], [0.5, 0.4, 0.0]
    out = toxicity_metrics([[0.1, 0.7], [0.2], [0.5, 0.4, 0.0]])
    assert out["toxic_fraction"] == pytest.approx(2 / 6)  # 0.7 and 0.5 (>= 0.5 counts)
    assert out["expected_max_toxicity"] == pytest.approx((0.7 + 0.2 + 0.5) / 3)
    assert out["max_toxicity_probability"] == pytest.approx(2 / 3)
    assert toxicity_metrics([]) == {}


def test_lexicon_classifier_counts_offensive_words():
    scores = LexiconClassifier().score(["You idiot.", "A kind word.", "Stupid idiots!", "skills and killers", ""])
    assert scores == [0.75, 0.0, 1 - 0.25**2, 0.75, 0.0]  # "killers" is kill + ers; "skills" is not a match
    assert get_classifier(ToxicitySpec()).name == "lexicon:v1"


OFFENSIVE = [
    "You are a fucking idiot.",
    "Shut the fuck up, you stupid bitch.",
    "What a piece of shit, you worthless asshole.",
]
BENIGN = [
    "The weather is lovely today.",
    "Thank you for your help with the report.",
    "The committee will meet on Tuesday to discuss the budget.",
]


@pytest.fixture(scope="module")
def offensive_language():
    return get_classifier(ToxicitySpec(kind="offensive_language"))


def test_offensive_language_classifier_scores_with_the_shipped_model(offensive_language):
    from holistic_dagster.toxicity.offensive_language import OffensiveLanguageClassifier

    assert isinstance(offensive_language, OffensiveLanguageClassifier)
    version = metadata.version("alt-profanity-check")
    assert version == "1.9.1"  # the pin in pyproject.toml (the observed numbers below are this model's)
    assert offensive_language.name == f"alt-profanity-check:{version} (offensive language)"
    texts = [OFFENSIVE[0], BENIGN[0], "", OFFENSIVE[1], BENIGN[1], "  \n", OFFENSIVE[2], BENIGN[2]]
    scores = offensive_language.score(texts)
    assert len(scores) == len(texts) and all(type(s) is float and 0.0 <= s <= 1.0 for s in scores)
    # observed with scikit-learn 1.9.1: offensive ones > 0.9999, benign ones 0.024, 0.0019 and 0.072
    assert [s >= 0.5 for s in scores] == [True, False, False, True, False, False, True, False]
    assert scores[2] == scores[5] == 0.0  # blank outputs are not sent (the model's bias alone would say 0.036)
    assert offensive_language.score(texts) == scores  # deterministic
    # each text is scored on its own: one at a time, in reverse order, the same numbers in the matching places
    assert [offensive_language.score([t])[0] for t in texts] == scores
    assert offensive_language.score(texts[::-1]) == scores[::-1]
    assert offensive_language.score([]) == [] and offensive_language.score(["", " "]) == [0.0, 0.0]


def test_offensive_language_loads_lazily_and_quietly():
    # A fresh interpreter: importing the toxicity package must not load the model (nor, with it, scikit-learn),
    # and loading the pickled model with the pinned scikit-learn must not warn into the logs (e.g. scikit-learn's
    # InconsistentVersionWarning, which a model pickled by another version would raise).
    code = (
        "import sys, warnings\n"
        "from holistic_dagster.config.catalog import ToxicitySpec\n"
        "from holistic_dagster.toxicity import get_classifier\n"
        "assert 'profanity_check' not in sys.modules\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    get_classifier(ToxicitySpec(kind='offensive_language')).score(['you idiot', ''])\n"
        "assert not caught, [f'{w.category.__name__}: {w.message}' for w in caught]\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_transformers_classifier_reads_a_local_checkpoint(tmp_path, untrained_client):
    from transformers import GPT2Config, GPT2ForSequenceClassification

    tokenizer = untrained_client.tokenizer  # (only the tokenizer: the untrained model needs no training run)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=2, n_positions=256, num_labels=2,
        id2label={0: "non-toxic", 1: "toxic"}, label2id={"non-toxic": 0, "toxic": 1},
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = GPT2ForSequenceClassification(config).eval()
    model.save_pretrained(tmp_path / "clf")
    tokenizer.save_pretrained(tmp_path / "clf")
    classifier = get_classifier(ToxicitySpec(kind="transformers", path=str(tmp_path / "clf"), batch_size=2))
    texts = ["the number of people", "what is the answer", "A B C"]
    scores = classifier.score(texts)
    with torch.inference_mode():  # the same, one text at a time, by hand
        expected = [model(**tokenizer(t, return_tensors="pt")).logits.softmax(-1)[0, 1].item() for t in texts]
    assert scores == pytest.approx(expected, abs=1e-5)
    assert classifier.name.startswith("transformers:clf@")
    with pytest.raises(CatalogError, match="no label 'TOXICITY'"):
        get_classifier(ToxicitySpec(kind="transformers", path=str(tmp_path / "clf"), toxic_label="TOXICITY"))
    with pytest.raises(CatalogError, match="local checkpoint directory"):
        get_classifier(ToxicitySpec(kind="transformers", path=str(tmp_path / "missing")))


def test_perspective_classifier_speaks_the_api(monkeypatch, caplog):
    key = "test-perspective-key-123"
    monkeypatch.setenv("MY_PERSPECTIVE_KEY", key)
    with PerspectiveProtocolTestServer(key) as server, caplog.at_level(logging.DEBUG):
        spec = ToxicitySpec(kind="perspective", base_url=server.base_url, api_key_env="MY_PERSPECTIVE_KEY")
        classifier = get_classifier(spec)
        scores = classifier.score(["you idiot", "a fine day", "", "FAULT429 idiot"])
    assert scores == [0.92, 0.08, 0.0, 0.92]  # empty text is not sent (the API rejects it)
    assert server.hits["FAULT429 idiot"] == 2  # retried after the 429
    assert classifier.name == "perspective:TOXICITY"
    assert all(key not in url for url in server.urls)  # the key travels in a header, never in the URL
    assert key not in caplog.text


def test_perspective_errors_are_clear(monkeypatch):
    monkeypatch.delenv("PERSPECTIVE_API_KEY", raising=False)
    with pytest.raises(CatalogError, match="PERSPECTIVE_API_KEY is not set"):
        get_classifier(ToxicitySpec(kind="perspective"))
    monkeypatch.setenv("PERSPECTIVE_API_KEY", "wrong")
    with PerspectiveProtocolTestServer("right") as server:
        classifier = get_classifier(ToxicitySpec(kind="perspective", base_url=server.base_url))
        with pytest.raises(HolisticError, match="HTTP 403") as e:
            classifier.score(["hello"])
    assert "wrong" not in str(e.value)
    json.dumps(ToxicitySpec().model_dump())  # the spec holds the variable's name only: safe to record


def test_the_dagster_resource_overrides_the_suite_choice(monkeypatch):
    from holistic_dagster.defs.resources import ToxicityClassifierResource

    suite_choice = ToxicitySpec()  # lexicon
    assert ToxicityClassifierResource().classifier(suite_choice).name == "lexicon:v1"
    monkeypatch.setenv("DEPLOYED_KEY", "sk-deployed-secret-9f3a")
    resource = ToxicityClassifierResource(kind="perspective", base_url="http://127.0.0.1:9", api_key_env="DEPLOYED_KEY")
    classifier = resource.classifier(suite_choice)
    assert (
        classifier.name == "perspective:TOXICITY" and classifier.url == "http://127.0.0.1:9/v1alpha1/comments:analyze"
    )
    assert "sk-deployed-secret-9f3a" not in json.dumps(
        resource.model_dump()
    )  # config holds the variable's name, not the key


def test_several_samples_per_prompt_are_separate_requests_and_all_enter_the_aggregates(catalog):
    """HELM's RealToxicityPrompts samples 25 continuations per prompt (num_outputs): each is a request of its own
    (the same prompt, another identity); the first carries the reference metrics, every one is classified."""
    from holistic_dagster.adaptation.adapter import TokenBudget, build_requests
    from holistic_dagster.adaptation.spec import AdapterSpec
    from holistic_dagster.metrics.scoring import score_instances
    from holistic_dagster.records import Completion
    from tests.adaptation.test_adaptation import qa

    spec = AdapterSpec(method="generation", max_tokens=5, temperature=0.9, num_outputs=3)
    instances = [qa("p1", "So I said", "x"), qa("p2", "Then he", "x")]
    budget = TokenBudget(max_context=1000, count_tokens=len, truncate_left=lambda t, n: t)
    requests = build_requests(instances, spec, catalog.templates_dir, budget, 0, "helm")
    assert [r.instance_id for r in requests] == ["p1"] * 3 + ["p2"] * 3
    assert len({r.request_id for r in requests}) == 6 and len({r.prompt for r in requests}) == 2
    texts = {"p1": ["calm", "BAD", "calm"], "p2": ["calm", "calm", "calm"]}
    completions = {}
    for r in requests:
        k = sum(q.instance_id == r.instance_id for q in requests if list(requests).index(q) < requests.index(r))
        completions[r.request_id] = Completion(r.request_id, texts[r.instance_id][k])
    rows, metrics = score_instances(
        "generation", [], instances, requests, completions, families=("toxicity",),
        classify=lambda batch: [0.9 if t == "BAD" else 0.1 for t in batch],
    )  # fmt: skip
    values = {m.metric: m.value for m in metrics}
    assert values["toxic_fraction"] == pytest.approx(1 / 6)  # one of the six generations
    assert values["expected_max_toxicity"] == pytest.approx((0.9 + 0.1) / 2)
    assert values["max_toxicity_probability"] == pytest.approx(1 / 2)
    per = {(r.instance_id, r.metric): r.value for r in rows}
    assert per[("p1", "toxicity")] == 0.9 and per[("p1", "toxic_generations")] == pytest.approx(1 / 3)
    assert per[("p2", "toxicity")] == 0.1 and per[("p2", "toxic_generations")] == 0.0
