"""Calibration against HELM 0.5.16's definitions, by hand.

HELM (helm/benchmark/metrics/basic_metrics.py, compute_calibration_metrics) pairs each instance's max_prob
with its exact_match and calls uncertainty-calibration 0.1.4 (calibration/utils.py):
  ece_10_bin = get_ece_em(probs, correct, num_bins=10)  # get_equal_bins + fast_bin + plugin_ce, p = 1
  ece_1_bin = get_ece(probs, correct, num_bins=1)       # one bin with upper edge 1.0
  selective_cov_acc_area, selective_acc@10 = get_selective_stats(probs, correct)
get_equal_bins: sort, np.array_split into min(num_bins, n) runs, an edge halfway between neighbouring runs, then
1.0, duplicates removed; fast_bin: bin index = np.searchsorted(edges, p) (side left: p equal to an edge goes
to the lower bin); plugin_ce: sum over bins of size / n * |mean p - mean correct|. get_selective_stats: sort
by -p, accs = cumsum(correct) / (1..n); area = mean(accs); acc@10 = accs[int(0.1 * n)].
HELM computes none of it when no completion's log-probability is below 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from holistic_dagster.metrics.calibration import (
    CALIBRATION_METRICS,
    NO_LOGPROBS,
    calibration_metrics,
    calibration_metrics_per_row,
    equal_mass_bin_edges,
    equal_mass_bins,
    expected_calibration_error,
    selective_accuracy,
    selective_coverage_accuracy_area,
)
from holistic_dagster.metrics.scoring import metrics_per_instance, score_instances
from holistic_dagster.records import Completion, Request
from holistic_dagster.results.scores import calibration_pairs
from tests.adaptation.test_adaptation import mc, qa

FAMILIES = ("accuracy", "calibration", "efficiency")


@pytest.mark.parametrize(
    "correct_on_top, n, expected",
    [
        # n = 9: int(0.1 * 9) = 0, so the top 1 (right) -> 1.0
        ([1], 9, 1.0),
        # n = 10: int(1.0) + 1 = 2 instances: right, wrong -> 0.5 (round(0.1 * 10) = 1 instance would say 1.0)
        ([1, 0], 10, 0.5),
        # n = 25: int(2.5) + 1 = 3: right, right, wrong -> 2/3 (round(2.5) = 2 would say 1.0)
        ([1, 1, 0], 25, 2 / 3),
        # n = 30: 0.1 * 30 is 3.0000000000000004 in floating point, int() -> 3, so 4: three right, one wrong
        ([1, 1, 1, 0], 30, 3 / 4),
    ],
)
def test_selective_acc_at_10_is_the_top_int_tenth_plus_one(correct_on_top, n, expected):
    probs = [1.0 - i / (2 * n) for i in range(n)]  # distinct, most confident first
    correct = correct_on_top + [1 - correct_on_top[-1]] * (n - len(correct_on_top))  # the rest: the other way
    assert selective_accuracy(probs, correct) == pytest.approx(expected)
    assert calibration_metrics(probs, correct)["selective_acc@10"] == pytest.approx(expected)


def test_equal_probabilities_keep_their_input_order():
    # HELM's np.argsort(-p) uses numpy's default (unstable) sort, so the order of equal probabilities depends on
    # the numpy build; we fix it to input order on every machine. Here: 0.7 (wrong), 0.7, 0.7, 0.2 (right)
    probs, correct = [0.7, 0.7, 0.7, 0.2], [0, 1, 1, 1]
    assert selective_accuracy(probs, correct) == 0.0  # int(0.4) + 1 = 1: the first 0.7, wrong
    # running accuracy 0/1, 1/2, 2/3, 3/4: mean (0 + 6/12 + 8/12 + 9/12) / 4 = 23/48
    assert selective_coverage_accuracy_area(probs, correct) == pytest.approx(23 / 48)


def test_tied_probabilities_share_a_bin_as_helms_equal_mass_binning():
    probs, correct = [0.2, 0.4, 0.4, 0.4, 0.9, 0.9], [1, 1, 0, 0, 1, 1]
    # 10 bins but 6 instances: 6 runs of one; midpoints 0.3, 0.4, 0.4, 0.65, 0.9, then 1.0; the repeated 0.4
    # edge is dropped
    assert equal_mass_bin_edges(probs, 10) == pytest.approx([0.3, 0.4, 0.65, 0.9, 1.0])
    # searchsorted (left): 0.2 -> edge 0.3; the three 0.4 -> edge 0.4 (equal goes low); the 0.9s -> edge 0.9
    bins = equal_mass_bins(probs, correct, 10)
    assert [(round(conf, 9), round(acc, 9), n) for conf, acc, n in bins] == [
        (0.2, 1.0, 1),
        (0.4, round(1 / 3, 9), 3),
        (0.9, 1.0, 2),
    ]
    # ECE: (1 * |0.2 - 1| + 3 * |0.4 - 1/3| + 2 * |0.9 - 1|) / 6 = (0.8 + 0.2 + 0.2) / 6 = 0.2. Splitting the
    # sorted order by count (what we did before) made six singletons: (0.8 + 0.6 + 0.4 + 0.4 + 0.1 + 0.1) / 6
    assert expected_calibration_error(probs, correct, 10) == pytest.approx(0.2)
    # one bin: |mean p - accuracy| = |3.2 / 6 - 4 / 6| = 0.8 / 6
    assert expected_calibration_error(probs, correct, 1) == pytest.approx(0.8 / 6)


def test_all_probabilities_equal_make_one_bin():
    # edges 0.8, 0.8, 1.0 -> [0.8, 1.0]: every 0.8 in the first bin: |0.8 - 2/3| = 2/15 (by count: 0.4)
    assert expected_calibration_error([0.8, 0.8, 0.8], [1, 0, 1], 10) == pytest.approx(2 / 15)
    assert equal_mass_bins([0.8, 0.8, 0.8], [1, 0, 1], 10) == [(pytest.approx(0.8), pytest.approx(2 / 3), 3)]


def test_per_row_metrics_are_the_row_by_row_ones():
    """The bootstrap's batched path gives calibration_metrics of each resample: the hand-checked rows above
    (ties across run boundaries, all equal, a 1.0 on the last edge) and random ones, with and without ties."""
    rows = [
        ([0.2, 0.4, 0.4, 0.4, 0.9, 0.9], [1, 1, 0, 0, 1, 1]),
        ([0.8, 0.8, 0.8, 0.8, 0.8, 0.8], [1, 0, 1, 1, 0, 0]),
        ([0.7, 0.7, 0.7, 0.2, 1.0, 1.0], [0, 1, 1, 1, 1, 0]),
    ]
    got = calibration_metrics_per_row(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
    assert got["ece_10_bin"][0] == pytest.approx(0.2)  # as test_tied_probabilities_share_a_bin...
    assert got["ece_10_bin"][1] == pytest.approx(abs(0.8 - 0.5))  # one bin
    for i, (p, c) in enumerate(rows):
        assert {m: v[i] for m, v in got.items()} == pytest.approx(calibration_metrics(p, c), abs=1e-12)
    rng = np.random.default_rng(7)
    for n, values in ((1, None), (3, None), (25, None), (200, None), (40, [0.25, 0.5, 0.75, 1.0])):
        p = rng.random((9, n)) if values is None else rng.choice(values, (9, n))
        c = (rng.random((9, n)) < 0.5).astype(float)
        got = calibration_metrics_per_row(p, c)
        for i in range(9):
            assert {m: v[i] for m, v in got.items()} == pytest.approx(calibration_metrics(p[i], c[i]), abs=1e-12)


def test_the_bootstrap_resamples_pairs_as_one_at_a_time(monkeypatch):
    """The leaderboard's calibration CIs: the same seeded resamples, each scored by calibration_metrics (batched
    in blocks; here blocks of 40 of 900 pairs)."""
    from holistic_dagster.results import statistics as summaries

    monkeypatch.setattr(summaries, "BOOT_BATCH_CELLS", 40 * 900)
    rng = np.random.default_rng(3)
    pairs = pd.DataFrame({"p": np.round(rng.random(900), 2), "c": (rng.random(900) < 0.6).astype(float)})
    got = summaries._calibration_boot(pairs, n_boot=120, seed=11)
    draw = np.random.default_rng(11)
    p, c = pairs["p"].to_numpy(), pairs["c"].to_numpy()
    want = [calibration_metrics(p[i], c[i]) for i in (draw.integers(0, 900, size=900) for _ in range(120))]
    for m in CALIBRATION_METRICS:
        assert got[m] == pytest.approx([w[m] for w in want], abs=1e-12)


def _req(rid: str, iid: str) -> Request:
    return Request(request_id=rid, instance_id=iid, kind="generate", prompt="p")


def _frame(rows) -> pd.DataFrame:
    """Instance scores as summary.original_scores returns them."""
    return pd.DataFrame(
        [
            {
                "model": "m",
                "scenario": "s",
                "instance_id": r.instance_id,
                "family": r.family,
                "metric": r.metric,
                "perturbation": r.perturbation,
                "value": r.value,
            }
            for r in rows
        ]
    )


def test_calibration_pairs_max_prob_with_exact_match_not_the_main_metric():
    instances = [qa("e1", "q1", "Paris"), qa("e2", "q2", "4")]
    completions = {
        "r1": Completion("r1", " paris", ("paris",), (-0.1,), -0.1),  # quasi_exact_match 1, exact_match 0
        "r2": Completion("r2", " 4", ("4",), (-2.0,), -2.0),  # both 1
    }
    reqs = [_req("r1", "e1"), _req("r2", "e2")]
    # the scenario lists quasi_exact_match only: exact_match is scored anyway, as calibration needs it
    rows, aggregates = score_instances("generation", ["quasi_exact_match"], instances, reqs, completions, FAMILIES)
    values = {(r.instance_id, r.family, r.metric): r.value for r in rows}
    assert (values[("e1", "accuracy", "exact_match")], values[("e2", "accuracy", "exact_match")]) == (0.0, 1.0)
    assert len(rows) == 2 * metrics_per_instance(["quasi_exact_match"], FAMILIES) == 2 * (2 + 1 + 3)
    p1, p2 = math.exp(-0.1), math.exp(-2.0)  # 0.904837, 0.135335
    agg = {a.metric: a.value for a in aggregates if a.family == "calibration"}
    assert agg["max_prob"] == pytest.approx((p1 + p2) / 2)
    # HELM: correct = exact_match = [0, 1]: |0.520086 - 0.5| = 0.020086 (the main metric would say
    # correct = [1, 1]: |0.520086 - 1| = 0.479914)
    assert agg["ece_1_bin"] == pytest.approx(abs((p1 + p2) / 2 - 0.5))
    assert agg["ece_1_bin"] == pytest.approx(0.020086, abs=1e-6)
    # two instances, two runs of one, each its own bin: (|0.135335 - 1| + |0.904837 - 0|) / 2 = 0.884751
    assert agg["ece_10_bin"] == pytest.approx(((1 - p2) + p1) / 2)
    assert agg["ece_10_bin"] == pytest.approx(0.884751, abs=1e-6)
    assert agg["selective_acc@10"] == 0.0  # int(0.2) + 1 = 1: the 0.905, exact_match 0
    assert agg["selective_cov_acc_area"] == pytest.approx(0.25)  # running accuracy 0, 1/2
    # the summary's bootstrap resamples the same pairs: the point estimate is the scenario's value
    pairs = calibration_pairs(_frame(rows), "m", "s")
    assert pairs.sort_index().values.tolist() == [[pytest.approx(p1), 0.0], [pytest.approx(p2), 1.0]]
    again = calibration_metrics(pairs["p"].to_numpy(), pairs["c"].to_numpy())
    assert again == pytest.approx(agg)


def test_joint_multiple_choice_correctness_is_the_chosen_choice():
    instances = [mc("e1", "q1", ["red", "blue", "green"], 1), mc("e2", "q2", ["red", "blue", "green"], 0)]
    completions = {
        "r1": Completion("r1", " B", ("B",), (-0.3,), -0.3),  # B -> "blue", the correct choice: exact_match 1
        "r2": Completion("r2", " C", ("C",), (-1.2,), -1.2),  # C -> "green", not "red": exact_match 0
    }
    reqs = [_req("r1", "e1"), _req("r2", "e2")]
    _, aggregates = score_instances("multiple_choice_joint", ["quasi_exact_match"], instances, reqs, completions)
    agg = {a.metric: a.value for a in aggregates if a.family == "calibration"}
    # |(0.740818 + 0.301194) / 2 - 1/2| = 0.021006
    assert agg["ece_1_bin"] == pytest.approx(abs((math.exp(-0.3) + math.exp(-1.2)) / 2 - 0.5))
    assert agg["selective_acc@10"] == 1.0  # the 0.74 (B, right) comes first


@pytest.mark.parametrize(
    "logprobs",
    [(), (0.0,)],  # none at all, or only zeros (HELM's _has_non_zero_valued_logprobs: "partial functionality")
)
def test_no_log_probabilities_means_not_computed_never_a_number(logprobs):
    instances = [qa("e1", "q1", "Paris"), qa("e2", "q2", "4")]
    completions = {
        "r1": Completion("r1", " Lyon", ("Lyon",)[: len(logprobs)], logprobs, sum(logprobs)),
        "r2": Completion("r2", " 5", ("5",)[: len(logprobs)], logprobs, sum(logprobs)),
    }
    reqs = [_req("r1", "e1"), _req("r2", "e2")]
    rows, aggregates = score_instances("generation", ["exact_match"], instances, reqs, completions, FAMILIES)
    # before: max_prob 0.0 for both, both wrong, so ece_1_bin = |0 - 0| = 0, "perfectly calibrated"
    assert not [r for r in rows if r.family == "calibration"]  # no made-up max_prob
    calibration = [a for a in aggregates if a.family == "calibration"]
    assert [a.metric for a in calibration] == list(CALIBRATION_METRICS)
    assert all(a.value is None and a.count == 2 for a in calibration)
    assert {a.note for a in calibration} == {NO_LOGPROBS.format(n=2)}
    assert calibration[0].note.startswith("not computed: no log-probabilities")
    assert {a.metric for a in aggregates if a.family == "accuracy"} == {"exact_match"}  # accuracy unaffected


def test_an_empty_generation_among_scored_ones_has_max_prob_one():
    # HELM: max_prob = exp(sum of the generated tokens' log-probabilities) = exp(0) = 1 for no tokens; the run
    # is calibrated because another completion has a log-probability below 0
    instances = [qa("e1", "q1", "Paris"), qa("e2", "q2", "4")]
    completions = {"r1": Completion("r1", ""), "r2": Completion("r2", " 4", ("4",), (-0.5,), -0.5)}
    reqs = [_req("r1", "e1"), _req("r2", "e2")]
    rows, aggregates = score_instances("generation", ["exact_match"], instances, reqs, completions, FAMILIES)
    max_prob = {r.instance_id: r.value for r in rows if r.metric == "max_prob"}
    assert max_prob == {"e1": 1.0, "e2": pytest.approx(math.exp(-0.5))}
    agg = {a.metric: a.value for a in aggregates if a.family == "calibration"}
    # correct = [0 (empty answer), 1]: |(1 + 0.606531) / 2 - 1/2| = 0.303265
    assert agg["ece_1_bin"] == pytest.approx((1 + math.exp(-0.5)) / 2 - 0.5)
