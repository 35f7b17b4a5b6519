"""Bradley-Terry ratings, their prompt bootstrap, online Elo and win rates: by hand, against choix, and on
battles simulated from known strengths."""

from __future__ import annotations

import math

import choix
import numpy as np
import pandas as pd
import pytest

from holistic_dagster.arena.ratings import (
    ELO_ANCHOR,
    ELO_SCALE,
    bootstrap_ratings,
    bradley_terry,
    online_elo,
    predicted_win_rate,
    win_rate_matrix,
)

GAP_3_TO_1 = 400 * math.log10(3)  # Elo gap of a model expected to score 3/4: 190.85


def battles(*rows: tuple[str, str, str]) -> pd.DataFrame:
    """Battles (model_a, model_b, winner), each on its own prompt."""
    frame = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])
    return frame.assign(prompt=[f"p{i}" for i in range(len(frame))])


def simulate(
    true_elo: dict[str, float], num_prompts: int, per_prompt: int, rng: np.random.Generator, tie_rate: float = 0.0
) -> pd.DataFrame:
    """Battles drawn from the Bradley-Terry model: random pairs, A wins with sigmoid(theta_A - theta_B); with
    tie_rate, that share of battles is a tie instead."""
    models = np.array(sorted(true_elo))
    theta = np.array([true_elo[m] for m in models]) / ELO_SCALE
    n = num_prompts * per_prompt
    a = rng.integers(0, len(models), n)
    b = (a + rng.integers(1, len(models), n)) % len(models)
    p_a = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    winner = np.where(rng.random(n) < p_a, "a", "b")
    winner = np.where(rng.random(n) < tie_rate, "tie", winner)
    prompt = np.repeat([f"q{i}" for i in range(num_prompts)], per_prompt)
    return pd.DataFrame({"model_a": models[a], "model_b": models[b], "winner": winner, "prompt": prompt})


TRUE_ELO = {f"m{i}": 60.0 * i for i in range(6)}  # 300 Elo points from m0 to m5


def anchored_truth(baseline: str) -> dict[str, float]:
    return {m: ELO_ANCHOR + r - TRUE_ELO[baseline] for m, r in TRUE_ELO.items()}


# --- Bradley-Terry by hand --------------------------------------------------------------------------------------


def test_three_wins_to_one_is_a_gap_of_ln_3():
    fit = bradley_terry(battles(*[("A", "B", "a")] * 3, ("A", "B", "b")), baseline="B", alpha=0)
    assert fit.models == ["A", "B"]
    assert fit.theta[0] - fit.theta[1] == pytest.approx(math.log(3), abs=1e-8)
    assert fit.theta.sum() == pytest.approx(0, abs=1e-12)
    assert fit.ratings["B"] == ELO_ANCHOR
    assert fit.ratings["A"] == pytest.approx(ELO_ANCHOR + GAP_3_TO_1, abs=1e-6)
    assert GAP_3_TO_1 == pytest.approx(190.85, abs=0.01)
    # the Elo scale is the logistic's: the fitted ratings predict the observed share
    assert predicted_win_rate(fit.ratings["A"], fit.ratings["B"]) == pytest.approx(0.75, abs=1e-9)
    assert fit.num_battles == 4 and fit.unbounded == {"A": False, "B": False} and fit.style == {}


def test_a_tie_is_half_a_win_for_each_side():
    # A scores 1 + 1/2 of 2: the same 3:1 odds as three wins to one
    fit = bradley_terry(battles(("A", "B", "a"), ("B", "A", "tie")), baseline="B", alpha=0)
    assert fit.ratings["A"] - fit.ratings["B"] == pytest.approx(GAP_3_TO_1, abs=1e-6)
    # order within a row does not matter: B as model_a losing is A winning
    flipped = bradley_terry(battles(("B", "A", "b"), ("A", "B", "tie")), baseline="B", alpha=0)
    assert flipped.ratings["A"] == pytest.approx(fit.ratings["A"], abs=1e-9)


def test_the_baseline_is_anchored_at_1000_and_gaps_do_not_depend_on_it():
    data = simulate(TRUE_ELO, 50, 6, np.random.default_rng(1))
    by_m0, by_m3 = bradley_terry(data, "m0"), bradley_terry(data, "m3")
    assert by_m0.ratings["m0"] == by_m3.ratings["m3"] == ELO_ANCHOR
    for m in by_m0.models:
        gap = by_m0.ratings[m] - by_m0.ratings["m0"]
        assert by_m3.ratings[m] - by_m3.ratings["m0"] == pytest.approx(gap, abs=1e-8)
        assert by_m0.ratings[m] == pytest.approx(
            ELO_ANCHOR + ELO_SCALE * (by_m0.theta[by_m0.models.index(m)] - by_m0.theta[0]), abs=1e-9
        )


def test_unknown_baseline_and_bad_verdicts_are_refused():
    data = battles(("A", "B", "a"), ("B", "A", "a"))
    with pytest.raises(ValueError, match=r"baseline 'Z'.*\['A', 'B'\]"):
        bradley_terry(data, "Z")
    with pytest.raises(ValueError, match=r"baseline 'Z'"):
        bootstrap_ratings(data, "Z", n_boot=10)
    with pytest.raises(ValueError, match=r"baseline 'Z'"):
        online_elo(data, baseline="Z")
    with pytest.raises(ValueError, match="winner must be one of"):
        bradley_terry(battles(("A", "B", "model_a")), "A")
    with pytest.raises(ValueError, match="cannot battle itself"):
        bradley_terry(battles(("A", "A", "a")), "A")
    with pytest.raises(ValueError, match="prompt"):
        bootstrap_ratings(data.drop(columns="prompt"), "A", n_boot=10)


def test_a_model_that_never_lost_is_flagged_unbounded():
    data = battles(("A", "B", "a"), ("A", "C", "a"), ("C", "A", "b"), ("B", "C", "a"), ("C", "B", "a"))
    for alpha in (0, 1e-6):
        fit = bradley_terry(data, "B", alpha=alpha)
        assert fit.unbounded == {"A": True, "B": False, "C": False}
        assert fit.ratings["A"] > 2500  # infinite in the limit; only the prior (or the stopping rule) bounds it
    weaker_prior = bradley_terry(data, "B", alpha=1e-8).ratings["A"]
    assert weaker_prior > bradley_terry(data, "B", alpha=1e-6).ratings["A"] + 500
    # a tie is half a loss: A then has a finite rating
    assert not bradley_terry(battles(("A", "B", "a"), ("A", "B", "tie")), "B", alpha=0).unbounded["A"]
    # never won, from the baseline's side: everyone else is unbounded relative to it
    assert bradley_terry(data, "A").unbounded == {"A": False, "B": True, "C": True}


def test_a_group_that_always_beats_another_is_unbounded_although_each_member_lost_once():
    data = battles(("A", "B", "a"), ("B", "A", "a"), ("C", "D", "a"), ("D", "C", "a"), ("A", "C", "a"), ("D", "B", "b"))
    fit = bradley_terry(data, "A")
    assert fit.unbounded == {"A": False, "B": False, "C": True, "D": True}
    assert fit.ratings["C"] < 0 and fit.ratings["D"] < 0


# --- against choix ----------------------------------------------------------------------------------------------


def choix_data(data: pd.DataFrame, models: list[str]) -> list[tuple[int, int]]:
    """Ties in choix's (winner, loser) pairs: every decisive battle twice, a tie once in each direction, so the
    doubled likelihood is exactly twice ours."""
    index = {m: i for i, m in enumerate(models)}
    pairs = []
    for a, b, winner in data[["model_a", "model_b", "winner"]].itertuples(index=False):
        ia, ib = index[a], index[b]
        pairs += {"a": [(ia, ib)] * 2, "b": [(ib, ia)] * 2, "tie": [(ia, ib), (ib, ia)]}[winner]
    return pairs


@pytest.fixture(scope="module")
def tied_battles() -> pd.DataFrame:
    data = simulate(TRUE_ELO, 150, 4, np.random.default_rng(7), tie_rate=0.15)
    met = pd.crosstab(data["model_a"], data["model_b"])
    assert ((met + met.T).to_numpy() + np.eye(6) > 0).all()  # every pair met
    assert 0.1 < (data["winner"] == "tie").mean() < 0.2
    return data


@pytest.mark.parametrize("alpha", [1e-6, 0.05])
def test_theta_equals_choix_map_with_twice_alpha_on_doubled_data(tied_battles, alpha):
    fit = bradley_terry(tied_battles, "m0", alpha=alpha)
    theirs = choix.opt_pairwise(6, choix_data(tied_battles, fit.models), alpha=2 * alpha, tol=1e-12)
    # the MAP sums to 0 on both sides, so theta itself (not only its differences) must agree
    np.testing.assert_allclose(fit.theta, theirs, atol=1e-5)
    np.testing.assert_allclose(np.diff(fit.theta), np.diff(theirs), atol=1e-5)


def test_without_ties_alpha_means_what_it_means_in_choix():
    data = simulate(TRUE_ELO, 50, 6, np.random.default_rng(3))
    fit = bradley_terry(data, "m0", alpha=0.05)
    index = {m: i for i, m in enumerate(fit.models)}
    pairs = [
        (index[a], index[b]) if w == "a" else (index[b], index[a])
        for a, b, w in data[["model_a", "model_b", "winner"]].itertuples(index=False)
    ]
    np.testing.assert_allclose(fit.theta, choix.opt_pairwise(6, pairs, alpha=0.05, tol=1e-12), atol=1e-5)


def test_maximum_likelihood_equals_choix_ilsr(tied_battles):
    fit = bradley_terry(tied_battles, "m0", alpha=0)
    theirs = choix.ilsr_pairwise(6, choix_data(tied_battles, fit.models), alpha=0.0, tol=1e-10)
    np.testing.assert_allclose(fit.theta - fit.theta[0], theirs - theirs[0], atol=1e-4)


# --- known strengths ---------------------------------------------------------------------------------------------


def test_simulated_strengths_are_recovered_in_order():
    data = simulate(TRUE_ELO, 500, 6, np.random.default_rng(11))
    fit = bradley_terry(data, "m0")
    assert sorted(fit.models, key=fit.ratings.get) == sorted(TRUE_ELO, key=TRUE_ELO.get)
    truth = anchored_truth("m0")
    assert max(abs(fit.ratings[m] - truth[m]) for m in truth) < 40


def test_bootstrap_cis_cover_the_true_ratings_at_about_the_nominal_rate():
    truth = anchored_truth("m2")
    covered, total, widths = 0, 0, []
    for replicate in range(40):
        data = simulate(TRUE_ELO, 100, 4, np.random.default_rng(1000 + replicate))
        table = bootstrap_ratings(data, "m2", n_boot=200, seed=replicate).set_index("model").drop(index="m2")
        true = pd.Series(truth).reindex(table.index)
        covered += int(((table["ci_low"] <= true) & (true <= table["ci_high"])).sum())
        total += len(table)
        widths.append((table["ci_high"] - table["ci_low"]).mean())
    coverage = covered / total
    print(f"95% bootstrap CI coverage: {covered}/{total} = {coverage:.3f}, mean width {np.mean(widths):.0f} Elo")
    assert total == 200
    assert 0.85 <= coverage <= 1.0


def test_more_battles_narrow_the_intervals():
    def mean_width(num_prompts: int) -> float:
        table = bootstrap_ratings(simulate(TRUE_ELO, num_prompts, 4, np.random.default_rng(5)), "m0", n_boot=200)
        table = table[table["model"] != "m0"]
        return float((table["ci_high"] - table["ci_low"]).mean())

    few, many = mean_width(100), mean_width(400)
    assert many < 0.7 * few  # 4x the battles: about half the width


# --- bootstrap ---------------------------------------------------------------------------------------------------


def test_bootstrap_table_is_seeded_sorted_and_anchored():
    data = simulate(TRUE_ELO, 60, 5, np.random.default_rng(2), tie_rate=0.1)
    table = bootstrap_ratings(data, "m1", n_boot=300, seed=4)
    assert list(table.columns) == ["model", "rating", "ci_low", "ci_high", "num_battles", "unbounded"]
    assert table["rating"].is_monotonic_decreasing
    base = table.set_index("model").loc["m1"]
    assert (base["rating"], base["ci_low"], base["ci_high"]) == (1000.0, 1000.0, 1000.0)
    fit = bradley_terry(data, "m1")
    assert table.set_index("model")["rating"].to_dict() == pytest.approx(fit.ratings, abs=1e-9)
    counts = pd.concat([data["model_a"], data["model_b"]]).value_counts()
    assert table.set_index("model")["num_battles"].to_dict() == counts.to_dict()
    assert table["num_battles"].sum() == 2 * len(data)
    others = table[table["model"] != "m1"]
    assert ((others["ci_low"] < others["rating"]) & (others["rating"] < others["ci_high"])).all()
    pd.testing.assert_frame_equal(table, bootstrap_ratings(data, "m1", n_boot=300, seed=4))
    assert not table.equals(bootstrap_ratings(data, "m1", n_boot=300, seed=5))


def test_the_bootstrap_resamples_prompts_not_battles():
    # one prompt holds every battle: each resample would be the whole data set, a zero-width "interval" that
    # claims a certainty one prompt cannot give; there is none instead
    data = simulate(TRUE_ELO, 1, 300, np.random.default_rng(3))
    table = bootstrap_ratings(data, "m0", n_boot=50)
    assert table["ci_low"].isna().all() and table["ci_high"].isna().all() and table["rating"].notna().all()
    spread = bootstrap_ratings(simulate(TRUE_ELO, 30, 10, np.random.default_rng(3)), "m0", n_boot=50)
    others = spread[spread["model"] != "m0"]
    assert (others["ci_high"] - others["ci_low"] > 1).all()  # many prompts: real intervals


# --- style control ----------------------------------------------------------------------------------------------


def test_style_control_removes_the_advantage_of_longer_answers():
    rng = np.random.default_rng(21)
    models = np.array(["plain", "terse", "verbose"])  # equally strong; verbose writes twice as long
    n = 3000
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(1, 3, n)) % 3
    mean_length = np.array([300.0, 300.0, 600.0])
    len_a = np.maximum(20.0, rng.normal(mean_length[a], 100.0))
    len_b = np.maximum(20.0, rng.normal(mean_length[b], 100.0))
    length = (len_a - len_b) / (len_a + len_b)
    winner = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-2.5 * length)), "a", "b")  # judges like length
    data = pd.DataFrame(
        {"model_a": models[a], "model_b": models[b], "winner": winner, "prompt": np.arange(n) // 3, "length": length}
    )
    raw = bradley_terry(data, "terse")
    controlled = bradley_terry(data, "terse", style=["length"])
    raw_gap = raw.ratings["verbose"] - 1000
    controlled_gap = controlled.ratings["verbose"] - 1000
    print(f"verbose - terse: {raw_gap:.0f} Elo raw, {controlled_gap:.0f} style-controlled")
    assert raw_gap > 80
    assert abs(controlled_gap) < 30 and abs(controlled_gap) < 0.25 * raw_gap
    assert abs(controlled.ratings["plain"] - 1000) < 30
    assert 1.8 < controlled.style["length"] < 3.2  # the judges' true taste: 2.5 logits per unit
    table = bootstrap_ratings(data, "terse", n_boot=50, style=["length"]).set_index("model")
    assert table.loc["verbose", "rating"] == pytest.approx(controlled.ratings["verbose"], abs=1e-9)
    assert table.loc["verbose", "ci_low"] < 1000 < table.loc["verbose", "ci_high"]


# --- online Elo and win rates ------------------------------------------------------------------------------------


def test_online_elo_by_hand():
    assert online_elo(battles(("A", "B", "a"))) == {"A": 1002.0, "B": 998.0}
    expected_b = 1 / (1 + 10 ** ((1002 - 998) / 400))  # B, rated 4 points lower, scores 0.4942
    gain = 4 * (1 - expected_b)
    ratings = online_elo(battles(("A", "B", "a"), ("A", "B", "b")))
    assert ratings == pytest.approx({"A": 1002 - gain, "B": 998 + gain}, abs=1e-12)
    assert ratings["B"] > ratings["A"]  # the last battle counts more
    tie = online_elo(battles(("A", "B", "tie")), k=32)
    assert tie == {"A": 1000.0, "B": 1000.0}
    assert online_elo(battles(("A", "B", "a"), ("B", "C", "a")), baseline="B")["B"] == 1000.0


def test_shuffling_changes_online_elo_but_not_bradley_terry():
    data = simulate(TRUE_ELO, 50, 6, np.random.default_rng(8), tie_rate=0.1)
    shuffled = data.sample(frac=1.0, random_state=0).reset_index(drop=True)
    assert bradley_terry(shuffled, "m0").ratings == pytest.approx(bradley_terry(data, "m0").ratings, abs=1e-8)
    before, after = online_elo(data, baseline="m0"), online_elo(shuffled, baseline="m0")
    assert max(abs(before[m] - after[m]) for m in before) > 1.0


def test_win_rate_matrix_by_hand():
    data = battles(("A", "B", "a"), ("B", "A", "b"), ("A", "B", "tie"), ("C", "B", "b"), ("B", "C", "tie"))
    rates, counts = win_rate_matrix(data)
    assert list(rates.index) == list(rates.columns) == ["A", "B", "C"]
    assert rates.loc["A", "B"] == pytest.approx(2.5 / 3) and rates.loc["B", "A"] == pytest.approx(0.5 / 3)
    assert rates.loc["B", "C"] == 0.75 and rates.loc["C", "B"] == 0.25
    assert np.isnan(rates.loc["A", "C"]) and np.isnan(rates.loc["C", "A"])  # never met
    assert np.isnan(np.diag(rates.to_numpy())).all()
    assert counts.to_numpy().tolist() == [[0, 3, 0], [3, 0, 2], [0, 2, 0]]


def test_predicted_win_rate():
    assert predicted_win_rate(1000, 1000) == 0.5
    assert predicted_win_rate(1400, 1000) == pytest.approx(10 / 11)
    assert predicted_win_rate(1000, 1000 + GAP_3_TO_1) == pytest.approx(0.25)
