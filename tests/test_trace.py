"""`holistic trace`: from a score back to completion, prompt, instance (and its original), source file, run."""

from __future__ import annotations

import json

import pytest

from holistic_dagster.errors import HolisticError
from holistic_dagster.results.trace import trace_score
from tests.conftest import SUITE
from tests.test_cli import run


def _worst_from_a_perturbation(wh):
    return wh.df(
        "SELECT s.model, s.scenario, s.instance_id FROM instance_scores s JOIN prompts p "
        "ON p.model = s.model AND p.version = s.version AND p.scenario = s.scenario AND p.request_id = s.request_id "
        "WHERE s.version = ? AND s.family = 'robustness' AND s.perturbation = 'worst' AND p.instance_id LIKE '%~%' "
        "ORDER BY ALL LIMIT 1",
        [SUITE],
    ).iloc[0]


def test_trace_follows_a_worst_case_score_to_its_perturbed_prompt_and_source(suite_run):
    wh = suite_run["wh"]
    row = _worst_from_a_perturbation(wh)
    metric = wh.df(
        "SELECT metric FROM instance_scores WHERE model = ? AND scenario = ? AND instance_id = ? "
        "AND family = 'robustness' LIMIT 1",
        [row.model, row.scenario, row.instance_id],
    ).iat[0, 0]
    chain = trace_score(wh, row.model, SUITE, row.scenario, row.instance_id, metric, "robustness")
    evaluated = chain["evaluated_instance"]
    assert evaluated["original_instance_id"] == row.instance_id and evaluated["perturbation"]
    assert evaluated["input"] in chain["prompt"]["prompt"]  # the exact prompt holds the perturbed text
    assert chain["instance"]["instance_id"] == row.instance_id and not chain["instance"]["perturbation"]
    assert len(chain["source_file"]["sha256"]) == 64 and chain["source_file"]["uri"] == chain["instance"]["source_uri"]
    assert chain["completion"]["request_id"] and chain["score"]["perturbation"] == "worst"
    run_ids = {r.result.run_id for r in suite_run["runs"]}
    assert chain["provenance"]["dagster_run_id"] in run_ids
    with pytest.raises(HolisticError, match="pass --family"):
        trace_score(wh, row.model, SUITE, row.scenario, row.instance_id, metric)
    with pytest.raises(HolisticError, match=r"no score 'bleu' .*this instance has: accuracy/"):
        trace_score(wh, row.model, SUITE, row.scenario, row.instance_id, "bleu")


def test_trace_command_prints_the_chain(suite_run):
    wh = suite_run["wh"]
    row = wh.df(
        "SELECT model, scenario, instance_id FROM instance_scores WHERE version = ? AND scenario = 'gsm8k' "
        "AND metric = 'final_number_exact_match' ORDER BY ALL LIMIT 1",
        [SUITE],
    ).iloc[0]
    args = [
        "trace",
        row.model,
        "gsm8k",
        row.instance_id,
        "final_number_exact_match",
        "--version",
        SUITE,
        "--db",
        str(suite_run["path"]),
    ]
    out = run(*args)
    assert out.returncode == 0, out.stderr
    for section in ("score", "completion", "prompt: generation", "instance:", "source file", "produced by"):
        assert section in out.stdout
    assert "gsm8k/test.jsonl, record line" in out.stdout
    chain = json.loads(run(*args, "--json").stdout)
    assert chain["completion"]["tokens"] and {"token", "logprob", "top"} <= set(chain["completion"]["tokens"][0])
    assert chain["prompt"]["adapter_method"] == "generation" and 0 < chain["prompt"]["num_train_instances"] <= 3


def test_trace_follows_a_score_of_a_small_suite_to_its_prompt_source_and_run(small_run):
    """The fast tier's trace test, on suite s1 (the tests above trace suite v2's scores: slow)."""
    wh = small_run["wh"]
    row = wh.df(
        "SELECT model, instance_id, request_id FROM instance_scores WHERE version = 's1' AND family = 'accuracy' "
        "AND metric = 'exact_match' ORDER BY ALL LIMIT 1"
    ).iloc[0]
    chain = trace_score(wh, row.model, "s1", "boolq", row.instance_id, "exact_match", "accuracy")
    assert chain["score"]["family"] == "accuracy" and chain["score"]["value"] in (0.0, 1.0)
    assert chain["completion"]["request_id"] == row.request_id and chain["completion"]["tokens"]
    assert chain["instance"]["instance_id"] == row.instance_id and chain["evaluated_instance"] is None  # unperturbed
    assert chain["instance"]["input"] in chain["prompt"]["prompt"]  # the exact prompt holds the instance
    assert chain["prompt"]["adapter_method"] == "generation" and chain["prompt"]["kind"] == "generate"
    assert chain["source_file"]["uri"] == chain["instance"]["source_uri"] and len(chain["source_file"]["sha256"]) == 64
    assert chain["provenance"]["dagster_run_id"] in {r.result.run_id for r in small_run["runs"]}
    with pytest.raises(HolisticError, match=r"exists in families accuracy, robustness .*pass --family"):
        trace_score(wh, row.model, "s1", "boolq", row.instance_id, "exact_match")
    with pytest.raises(HolisticError, match=r"no score 'bleu' .*this instance has: accuracy/"):
        trace_score(wh, row.model, "s1", "boolq", row.instance_id, "bleu")
