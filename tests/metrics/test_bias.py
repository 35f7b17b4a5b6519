"""Bias metrics: HELM's demographic representation and stereotypical associations, and BBQ's bias scores,
on hand-computed cases; BBQ's roles on every record of the real files."""

from __future__ import annotations

import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.metrics.bias import (
    bbq_bias,
    bbq_roles,
    bias_metrics,
    demographic_representation,
    group_counts_to_bias,
    stereotypical_associations,
    tokens,
)
from holistic_dagster.scenarios import load_instances
from holistic_dagster.wordlists import load

GENDER = load("bias_words")["groups"]["gender"]
RACE = load("bias_words")["groups"]["race"]


def test_total_variation_from_uniform():
    assert group_counts_to_bias([5, 5], [20, 20]) == 0.0
    assert group_counts_to_bias([3, 0], [20, 20]) == pytest.approx(0.5)  # one of two groups only: 1 - 1/2
    assert group_counts_to_bias([2, 1], [10, 20]) == pytest.approx(0.3)  # (0.2, 0.05) -> (0.8, 0.2)
    assert group_counts_to_bias([0, 0, 0], [20, 20, 20]) is None


def test_demographic_representation_by_hand():
    # male: he, his, brother (3); female: her (1); both lists have 20 words -> (0.25, 0.75): TVD 0.25
    assert demographic_representation(["He and his brother met her."], GENDER) == pytest.approx(0.25)
    # asian: kim x2; hispanic: garcia; white: johnson -> (1/2, 1/4, 1/4): TVD (1/6 + 1/12 + 1/12) / 2
    text = "Mr. Garcia met Ms. Kim and Kim's friend Johnson."
    assert tokens(text)[:4] == ["mr", "garcia", "met", "ms"]
    assert demographic_representation([text], RACE) == pytest.approx(1 / 6)
    assert demographic_representation(["A table and a chair."], GENDER) is None


def test_stereotypical_associations_by_hand():
    texts = ["He is a nurse.", "She is a nurse and she is a doctor."]
    # nurse: male 1x1, female 1x2 -> (2/3, 1/3): TVD 1/6; doctor: female 1x2 only -> TVD 1/2; others: none
    value = stereotypical_associations(texts, GENDER, ["nurse", "doctor", "pilot"])
    assert value == pytest.approx((1 / 6 + 1 / 2) / 2)
    assert stereotypical_associations(["The nurse left."], GENDER, ["nurse"]) is None


def test_bias_metrics_names_all_six():
    out = bias_metrics(["She is a nurse; he is a doctor and Garcia is a lawyer."])
    assert set(out) == {
        "demographic_representation_gender",
        "demographic_representation_race",
        "stereotypical_associations_gender_adjective",
        "stereotypical_associations_gender_profession",
        "stereotypical_associations_race_adjective",
        "stereotypical_associations_race_profession",
    }
    assert out["demographic_representation_gender"] == pytest.approx(0.0)
    assert out["stereotypical_associations_gender_profession"] == pytest.approx(0.0)  # each once, each 50/50
    assert out["stereotypical_associations_race_profession"] == pytest.approx(2 / 3)  # only hispanic: 1 - 1/3
    assert out["stereotypical_associations_race_adjective"] is None


def meta(condition: str, polarity: str) -> dict:
    return {
        "context_condition": condition,
        "question_polarity": polarity,
        "answer_groups": ["old", "nonOld", "unknown"],
        "answer_texts": ["grandfather", "grandson", "Can't be determined"],
        "stereotyped_groups": ["old"],
    }


def test_bbq_bias_by_hand():
    items = [
        # ambiguous (the right answer is "unknown", index 2)
        (meta("ambig", "neg"), 0, False),  # target on a negative question: biased
        (meta("ambig", "neg"), 2, True),  # unknown: correct, not counted in the bias ratio
        (meta("ambig", "nonneg"), 1, False),  # non-target on a non-negative question: biased
        (meta("ambig", "nonneg"), 0, False),  # target on a non-negative question: against the stereotype
        # disambiguated
        (meta("disambig", "neg"), 0, True),  # biased
        (meta("disambig", "neg"), 1, False),
        (meta("disambig", "nonneg"), 0, True),
        (meta("disambig", "nonneg"), 2, False),  # unknown: not counted
    ]
    out = bbq_bias(items)
    # disambiguated: 1 biased of 3 non-unknown -> 2/3 - 1
    assert out["bbq_bias_disambiguated"] == pytest.approx(-1 / 3)
    # ambiguous: 2 biased of 3 non-unknown -> 1/3, times (1 - accuracy 1/4)
    assert out["bbq_bias_ambiguous"] == pytest.approx(0.75 * (1 / 3))
    assert bbq_bias([(meta("ambig", "neg"), 2, True)]) == {"bbq_bias_disambiguated": None, "bbq_bias_ambiguous": None}


def test_bbq_roles_on_labels_and_every_real_record(shared_data):
    assert bbq_roles(meta("ambig", "neg")) == (0, 2)
    mixed = {
        **meta("ambig", "neg"),
        "answer_groups": ["unknown", "M-Black", "F-White"],
        "stereotyped_groups": ["Black"],
    }
    assert bbq_roles(mixed) == (1, 0)
    bbq = Catalog().scenario("bbq")  # upstream's 11 categories; the 4 with data here
    instances = load_instances(
        bbq.model_copy(update={"subsets": ("Age", "Disability_status", "Nationality", "Religion")})
    )
    assert len(instances) == 3680 + 1556 + 3080 + 1200
    assert all(bbq_roles(i.metadata) is not None for i in instances)
    first = next(i for i in instances if i.instance_id == "Age/0")
    assert first.metadata["context_condition"] == "ambig" and first.references[2].correct
