"""Summarization metrics against hand-computed values: ROUGE-L, and Grusky et al.'s (2018, Newsroom) extractive
fragments with the coverage, density and compression HELM reports (|f|: a fragment's length in tokens,
|S| the summary's, |A| the article's)."""

from __future__ import annotations

import pytest

from holistic_dagster.metrics import get_reference_metric, metric, scorers
from holistic_dagster.metrics.scoring import score_instances
from holistic_dagster.metrics.summarization import (
    COMPRESSION,
    COVERAGE,
    DENSITY,
    extractive_fragments,
    rouge_2,
    rouge_l,
    summarization_stats,
    tokenize,
)
from holistic_dagster.records import Completion, Instance, Reference, Request
from tests.adaptation.test_adaptation import SRC

SUMMARIZATION = (COVERAGE, DENSITY, COMPRESSION)


def stats(article: str, summary: str) -> tuple[float, float, float]:
    values = summarization_stats(article, summary)
    return values[COVERAGE], values[DENSITY], values[COMPRESSION]


def test_rouge_l_is_the_lcs_f_measure():
    # gold: the cat sat on the mat (6 tokens); prediction: the cat lay on a soft mat (7 tokens)
    # longest common subsequence: the cat . on . mat = 4 tokens -> P = 4/7, R = 4/6
    # F = 2PR / (P + R) = 2 * (4/7) * (2/3) / (4/7 + 2/3) = (16/21) / (26/21) = 8/13
    assert rouge_l("the cat sat on the mat", "the cat lay on a soft mat") == pytest.approx(8 / 13)
    # Porter stemming: cats -> cat, running and runs -> run; "cat run" is common: P = R = 2/3
    assert rouge_l("Cats running fast", "the cat runs") == pytest.approx(2 / 3)
    assert rouge_l("the cat sat", "") == 0.0


def test_rouge_2_and_rouge_l_share_one_scorer():
    # bigrams of the gold: the-cat cat-sat sat-on on-the the-mat (5); of the prediction: the-cat cat-lay lay-on
    # on-a a-soft soft-mat (6); common: the-cat -> P = 1/6, R = 1/5, F = 2 (1/30) / (11/30) = 2/11
    assert rouge_2("the cat sat on the mat", "the cat lay on a soft mat") == pytest.approx(2 / 11)
    assert get_reference_metric("rouge_l").fn is rouge_l
    assert get_reference_metric("rouge_2").fn is rouge_2


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("The cat sat on the mat.", ["the", "cat", "sat", "on", "the", "mat", "."]),
        ("Don't stop: it's well-known", ["do", "n't", "stop", ":", "it", "'s", "well", "-", "known"]),
        ("The U.S. paid $1,500,000 at 18:00.", ["the", "u.s.", "paid", "$", "1,500,000", "at", "18:00", "."]),
        ("Mr. O'Neill cannot go (Calif.)", ["mr.", "o'neill", "can", "not", "go", "(", "calif.", ")"]),
        ("He fell ill.", ["he", "fell", "ill", "."]),  # "Ill." (Illinois) keeps its period, "ill." does not
        # as spaCy: a single space separates; any other run of whitespace is a token of its own
        ("One.\nTwo  three", ["one", ".", "\n", "two", " ", "three"]),
    ],
)
def test_tokenize_follows_spacys_english_rules(text, tokens):
    assert tokenize(text) == tokens


def test_a_fully_extractive_summary_is_one_fragment():
    article = tokenize("The cat sat on the mat.")  # the cat sat on the mat . (7 tokens)
    summary = tokenize("the cat sat")  # 3 tokens, all one run of the article
    assert extractive_fragments(article, summary) == [["the", "cat", "sat"]]
    # coverage 3/3 = 1; density 3^2 / 3 = 3 (the fragment's length); compression 7/3
    assert stats("The cat sat on the mat.", "the cat sat") == pytest.approx((1.0, 3.0, 7 / 3))


def test_a_fully_novel_summary_has_no_fragments():
    # article: the cat sat on the mat (6); summary: dogs bark loudly (3), none of them in the article
    assert extractive_fragments(tokenize("the cat sat on the mat"), tokenize("dogs bark loudly")) == []
    # coverage 0/3, density 0/3, compression 6/3
    assert stats("the cat sat on the mat", "dogs bark loudly") == pytest.approx((0.0, 0.0, 2.0))


def test_a_mixed_summary_with_two_fragments():
    article = "the quick brown fox jumps over the lazy dog"  # 9 tokens
    summary = "a quick brown fox leaps over the lazy cat"  # 9 tokens
    # a: not in the article; quick brown fox (stops at leaps != jumps); leaps: not in the article;
    # over the lazy (stops at cat != dog); cat: not in the article
    assert extractive_fragments(tokenize(article), tokenize(summary)) == [
        ["quick", "brown", "fox"],
        ["over", "the", "lazy"],
    ]
    # coverage (3 + 3) / 9 = 2/3; density (3^2 + 3^2) / 9 = 2; compression 9 / 9 = 1
    assert stats(article, summary) == pytest.approx((2 / 3, 2.0, 1.0))


def test_greedy_takes_the_longest_run_for_each_start():
    # summary "the mat": "the" occurs at article positions 0 (run "the", as "cat" != "mat") and 4 (run "the mat");
    # the longer one is taken: one fragment of 2, not "the" and "mat"
    assert extractive_fragments(tokenize("the cat sat on the mat"), tokenize("the mat")) == [["the", "mat"]]
    # coverage 2/2 = 1; density 2^2 / 2 = 2 (two fragments of 1 would give 1); compression 6/2 = 3
    assert stats("the cat sat on the mat", "the mat") == pytest.approx((1.0, 2.0, 3.0))


def test_the_scan_resumes_after_each_run_as_published():
    # Grusky et al.'s Algorithm 1 (and HELM through summ_eval) resumes the article scan after a measured run:
    # summary a a b, article a a a b: from article position 0 the run is "a a" (then b != a); the scan resumes
    # at position 2: run "a" (then a != b); the run "a a b" at position 1 is never measured
    assert extractive_fragments(["a", "a", "a", "b"], ["a", "a", "b"]) == [["a", "a"], ["b"]]
    # coverage (2 + 1) / 3 = 1; density (4 + 1) / 3 = 5/3; compression 4/3
    assert stats("a a a b", "a a b") == pytest.approx((1.0, 5 / 3, 4 / 3))


def test_compression_counts_article_tokens_per_summary_token():
    article = "Rain fell in Paris on Monday, and the river rose."  # 12 tokens (the comma and the period count)
    # summary: paris rain (2): fragments "paris" and "rain": coverage 1, density (1 + 1) / 2 = 1
    assert stats(article, "Paris rain") == pytest.approx((1.0, 1.0, 6.0))  # 12 / 2


def test_matching_ignores_case_and_punctuation_are_tokens():
    # article: rain fell in paris on monday . (7); summary: dogs bark . (3): only "." is copied
    # coverage 1/3, density 1/3, compression 7/3
    assert stats("Rain fell in Paris on Monday.", "Dogs bark.") == pytest.approx((1 / 3, 1 / 3, 7 / 3))
    assert stats("THE CAT SAT", "the cat sat") == pytest.approx((1.0, 3.0, 1.0))


def test_line_breaks_count_in_the_summary_not_in_the_article():
    # HELM's scenarios collapse the document's whitespace; a line break in the summary is a token (spaCy's)
    # that no fragment contains. Article: rain fell . roads flooded . (6, the blank line dropped)
    # summary: rain fell . \n roads flooded . (7): fragments "rain fell ." and "roads flooded ."
    # coverage 6/7; density (9 + 9) / 7 = 18/7; compression 6/7
    assert stats("Rain fell.\n\nRoads flooded.", "Rain fell.\nRoads flooded.") == pytest.approx((6 / 7, 18 / 7, 6 / 7))


@pytest.mark.parametrize("summary", ["", "  \n ", "{}"])
def test_an_empty_summary_scores_zero_as_in_helm(summary):
    # Newsroom answers 0 to a zero denominator (coverage, density) and to a division by zero (compression)
    assert stats("The cat sat on the mat.", summary) == (0.0, 0.0, 0.0)


def test_braces_around_the_summary_are_dropped_as_in_helm():
    assert stats("The cat sat on the mat.", "{the cat sat}") == stats("The cat sat on the mat.", "the cat sat")


def test_declarations():
    assert metric(COVERAGE).bounds == (0.0, 1.0)
    for name in SUMMARIZATION:
        m = metric(name)
        assert (m.family, m.per_instance, m.mean_of_instances, m.lower_is_better, m.headline) == (
            "accuracy",
            True,
            True,
            False,
            False,
        )
    assert metric(DENSITY).in_bounds(12.5) and metric(COMPRESSION).in_bounds(40.0)
    s = scorers()["summarization"]
    assert (s.family, s.metrics, s.extra, s.methods, s.open_ended) == ("accuracy", SUMMARIZATION, True, None, True)


def _summaries():
    instances = [
        Instance("d1", "test", "The cat sat on the mat.", (Reference("A cat sat.", True),), SRC, "d1"),
        Instance("d2", "test", "Rain fell in Paris on Monday.", (Reference("Paris had rain.", True),), SRC, "d2"),
    ]
    requests = [Request("r1", "d1", "generate", "p"), Request("r2", "d2", "generate", "p")]
    completions = {"r1": Completion("r1", " the cat sat"), "r2": Completion("r2", " Dogs bark.")}
    return instances, requests, completions


def _score(method: str, extra_metrics=("summarization",)):
    instances, requests, completions = _summaries()
    return instances, *score_instances(
        method, ["rouge_2"], instances, requests, completions, families=("accuracy",), extra_metrics=extra_metrics
    )


def test_the_scorer_writes_three_rows_per_prediction():
    instances, rows, aggregates = _score("generation")
    ours = [r for r in rows if r.metric in SUMMARIZATION]
    assert len(ours) == 3 * len(instances)
    assert len(rows) == 4 * len(instances)  # and each instance's rouge_2
    values = {(r.instance_id, r.metric): r.value for r in ours}
    # d1: article the cat sat on the mat . (7), summary the cat sat (3): one fragment of 3
    assert values[("d1", COVERAGE)] == 1.0 and values[("d1", DENSITY)] == 3.0
    assert values[("d1", COMPRESSION)] == pytest.approx(7 / 3)
    # d2: article rain fell in paris on monday . (7), summary dogs bark . (3): one fragment "."
    assert values[("d2", COVERAGE)] == pytest.approx(1 / 3) and values[("d2", DENSITY)] == pytest.approx(1 / 3)
    assert values[("d2", COMPRESSION)] == pytest.approx(7 / 3)
    d1 = next(r for r in ours if r.instance_id == "d1")
    assert (d1.family, d1.request_id, d1.prediction, d1.perturbation) == ("accuracy", "r1", " the cat sat", "")
    # the scenario values: the means of the per-instance rows
    means = {a.metric: a for a in aggregates if a.metric in SUMMARIZATION}
    assert means[COVERAGE].value == pytest.approx((1 + 1 / 3) / 2) and means[COVERAGE].count == 2
    assert means[DENSITY].value == pytest.approx((3 + 1 / 3) / 2)
    assert means[COMPRESSION].value == pytest.approx(7 / 3)


def test_the_scorer_is_opt_in_and_for_generation_only():
    _, rows, _ = _score("generation", extra_metrics=())
    assert {r.metric for r in rows} == {"rouge_2"}
    _, rows, _ = _score("multiple_choice_joint")
    assert {r.metric for r in rows} == {"rouge_2"}
