"""The arena through Dagster: contestants answer a question-answer scenario (a real transformers model and
scripted HTTP models), battles are built from their stored completions, judges judge them in both orders through
the OpenAI client and the completion cache, and the ratings land in DuckDB with lineage back to the answers."""

from __future__ import annotations

import pytest

from holistic_dagster.defs.runner import RunFailed, run_arena
from tests.arena.conftest import QA
from tests.conftest import write
from tests.helpers import edit_file


def test_every_pair_that_answered_an_instance_battles_once_per_judge(arena_world):
    wh = arena_world["wh"]
    battles = wh.df("SELECT * FROM battles WHERE version = 'a1' AND judge = 'rule-judge'")
    assert len(battles) == 3 * len(QA)  # 3 pairs of contestants x 5 instances
    assert set(zip(battles["model_a"], battles["model_b"])) == {
        ("demo-gpt2-untrained", "oracle"),
        ("demo-gpt2-untrained", "wrong"),
        ("oracle", "wrong"),
    }
    assert (battles["error"] == "").all() and battles["consistent"].all()
    # the rule: the one answer containing the reference wins; neither (untrained vs wrong) is a tie
    winner = {(r.model_a, r.model_b): r.winner for r in battles.itertuples()}
    assert winner[("oracle", "wrong")] == "a" and winner[("demo-gpt2-untrained", "oracle")] == "b"
    assert set(battles.loc[battles["model_b"] == "wrong", "winner"].where(battles["model_a"] != "oracle").dropna()) == {
        "tie"
    }
    # both position orders were asked: the drawn order shows a's answer first in about half of the battles
    assert 0 < battles["a_first"].sum() < len(battles)


def test_a_verdict_that_flips_with_the_order_is_a_tie_and_counted(arena_world):
    wh = arena_world["wh"]
    biased = wh.df("SELECT * FROM battles WHERE version = 'a1' AND judge = 'biased-judge'")
    assert len(biased) == 15 and (biased["winner"] == "tie").all() and not biased["consistent"].any()
    # always [[A]]: the first order's verdict is whichever model was shown first
    first = biased.apply(lambda r: "a" if r.a_first else "b", axis=1)
    assert (biased["verdict_first"] == first).all() and (biased["verdict_second"] != first).all()
    evaluations = {(e.asset_key.path[-1], e.check_name): e for e in arena_world["result"].get_asset_check_evaluations()}
    assert evaluations[("battles", "verdicts_parse")].passed and evaluations[("battles", "battles_traceable")].passed
    assert evaluations[("ratings", "ratings_consistent")].passed


def test_ratings_follow_the_verdicts_with_the_baseline_at_1000(arena_world):
    wh = arena_world["wh"]
    bt = wh.df(
        "SELECT * FROM arena_ratings WHERE version = 'a1' AND judge = 'rule-judge' AND method = 'bradley_terry'"
    ).set_index("model")
    assert bt.loc["wrong", "rating"] == pytest.approx(1000.0) and bt.loc["wrong", ["ci_low", "ci_high"]].tolist() == [
        pytest.approx(1000.0),
        pytest.approx(1000.0),
    ]
    # untrained and wrong lost every battle to the oracle and tied each other: the same rating
    assert bt.loc["demo-gpt2-untrained", "rating"] == pytest.approx(1000.0, abs=1e-3)
    assert bt.loc["oracle", "rating"] > 1500 and bt.loc["oracle", "note"].startswith("unbounded")
    assert bt.loc["oracle", ["num_battles", "wins"]].tolist() == [10, 10.0]
    assert bt.loc["wrong", ["num_battles", "wins"]].tolist() == [10, 2.5]  # five ties against the untrained
    assert bt.loc["oracle", "mean_answer_tokens"] == 1.0
    assert set(wh.df("SELECT DISTINCT method FROM arena_ratings")["method"]) == {
        "bradley_terry",
        "bradley_terry_style",
        "online_elo",
    }
    # the biased judge names the first answer shown whatever it is: refused for ratings, its verdicts kept
    assert wh.df("SELECT * FROM arena_ratings WHERE judge = 'biased-judge'").empty
    judges = wh.df("SELECT * FROM arena_judges WHERE version = 'a1'").set_index("judge")
    assert judges["qualified"].to_dict() == {"rule-judge": True, "biased-judge": False}
    assert judges.loc["biased-judge", ["agreement", "position_consistency"]].tolist() == [0.5, 0.0]
    rates = wh.df("SELECT * FROM arena_win_rates WHERE judge = 'rule-judge'").set_index(["model", "opponent"])
    assert rates.loc[("oracle", "wrong"), "win_rate"] == 1.0 and rates.loc[("wrong", "oracle"), "win_rate"] == 0.0
    assert rates.loc[("wrong", "demo-gpt2-untrained"), "win_rate"] == 0.5
    assert (rates["num_battles"] == 5).all()


def test_each_verdict_traces_back_to_both_answers_and_the_instance(arena_world):
    wh = arena_world["wh"]
    trace = wh.df(
        'SELECT b.battle_id, b.winner, ca.text AS answer_a, cb.text AS answer_b, i.input, i."references"::VARCHAR AS '
        "refs, b.reason_first FROM battles b "
        "JOIN completions ca ON ca.version = b.version AND ca.model = b.model_a AND ca.request_id = b.request_a "
        "JOIN completions cb ON cb.version = b.version AND cb.model = b.model_b AND cb.request_id = b.request_b "
        "JOIN instances i ON i.version = b.version AND i.scenario = b.scenario AND i.instance_id = b.instance_id "
        "WHERE b.judge = 'rule-judge' AND b.model_a = 'oracle' AND b.model_b = 'wrong'"
    )
    assert len(trace) == len(QA)
    for r in trace.itertuples():
        answer = next(q["a"] for q in QA if q["q"] == r.input)
        assert r.answer_a.strip() == answer and r.answer_b.strip() == "Berlin" and answer in r.refs
        assert "[[" in r.reason_first


def test_a_rerun_sends_no_judgement_twice(arena_world):
    server = arena_world["server"]
    before = server.sent("rule-judge")
    assert before == 2 * 3 * len(QA) + 2 * 24  # both orders of every battle and qualification battle, once
    run_arena(arena_world["defs"], arena_world["instance"], "a1")
    assert server.sent("rule-judge") == before


def test_judgements_without_a_verdict_are_errors_never_votes_and_fail_the_check(arena_world):
    root, catalog = arena_world["root"], arena_world["catalog"]
    suite = root / "assets" / "suites" / "a1.yaml"
    edit_file(suite, "judges: [rule-judge, biased-judge]", "judges: [mute-judge]")
    try:
        with pytest.raises(RunFailed) as failed:
            run_arena(arena_world["defs"], arena_world["instance"], "a1")
        assert "verdicts_parse" in str(failed.value) and "mute-judge" in str(failed.value)
        mute = arena_world["wh"].df("SELECT * FROM battles WHERE judge = 'mute-judge'")
        assert len(mute) == 15 and (mute["winner"] == "").all()
        assert mute["error"].str.contains("has no verdict").all()
    finally:
        edit_file(suite, "judges: [mute-judge]", "judges: [rule-judge, biased-judge]")
    assert catalog.suite("a1").arena.judges == ("rule-judge", "biased-judge")


A0_SUITE = "version: a0\nscenarios:\n  mini_qa: {max_eval_instances: 2}\n"  # a suite without `arena:`


def test_a_suite_without_arena_says_what_to_add(arena_world, tmp_path):
    write(arena_world["root"] / "assets" / "suites" / "a0.yaml", A0_SUITE)
    with pytest.raises(RunFailed) as failed:
        run_arena(arena_world["defs"], arena_world["instance"], "a0")
    assert "has no `arena:` section" in str(failed.value)


@pytest.mark.slow  # the arena job through Dagster from the command; the fast tier keeps the stage tests
def test_holistic_arena_judges_and_prints_the_ratings(arena_world, tmp_path):
    from typer.testing import CliRunner

    from holistic_dagster.cli import app

    env = {
        "HOLISTIC_CATALOG": str(arena_world["catalog"].root),
        "HOLISTIC_RESOURCES": str(arena_world["root"] / "resources"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
    }
    db = str(arena_world["wh"].path)
    sent = arena_world["server"].sent("rule-judge")
    out = CliRunner().invoke(app, ["arena", "--version", "a1", "--db", db], env=env)
    assert out.exit_code == 0, out.stderr
    assert arena_world["server"].sent("rule-judge") == sent  # every judgement came from the completion cache
    assert "judge rule-judge: qualified judge: agreement" in out.stdout
    rule = out.stdout.split("arena ratings, judge rule-judge")[1]
    table = rule.split("win rate of row")[0]
    lines = {line.split()[1]: line for line in table.splitlines() if line.startswith("│ ") and len(line.split()) > 2}
    oracle = arena_world["wh"].df(
        "SELECT rating FROM arena_ratings WHERE judge = 'rule-judge' AND method = 'bradley_terry' AND model = 'oracle'"
    )
    assert lines["oracle"].split("│")[2].strip().startswith(f"{oracle.iat[0, 0]:.0f}* [")
    assert "wrong = 1000" in rule and "position inconsistency 0.0%" in rule and "* unbounded: never lost" in rule
    biased = out.stdout.split("judge biased-judge")[1]
    assert "unqualified judge: agreement 0.50, position consistency 0.00" in biased and "no ratings" in biased
    assert "win rate of row against column" in rule
    shown = CliRunner().invoke(app, ["arena", "--version", "a1", "--db", db, "--show"], env=env)
    assert shown.exit_code == 0 and "judge rule-judge" in shown.stdout
    # a judge taken out of the suite keeps its battles, not its ratings
    suite = arena_world["root"] / "assets" / "suites" / "a1.yaml"
    edit_file(suite, "judges: [rule-judge, biased-judge]", "judges: [rule-judge]")
    try:
        fewer = CliRunner().invoke(app, ["arena", "--version", "a1", "--db", db], env=env)
    finally:
        edit_file(suite, "judges: [rule-judge]", "judges: [rule-judge, biased-judge]")
        run_arena(arena_world["defs"], arena_world["instance"], "a1")  # the world's ratings, for the other tests
    assert fewer.exit_code == 0 and "judge rule-judge" in fewer.stdout and "biased-judge" not in fewer.stdout
    write(arena_world["root"] / "assets" / "suites" / "a0.yaml", A0_SUITE)  # (the fast tier's test writes it too)
    none = CliRunner().invoke(app, ["arena", "--version", "a0", "--db", db], env=env)
    assert none.exit_code == 1 and "has no `arena:` section" in none.stderr


def test_a_local_transformers_model_judges_through_the_same_path(arena_world):
    """A judge through the transformers backend (the untrained demo model: it writes no verdict, so every battle is
    an error row, and a max_failure_rate of 1 lets the check pass)."""
    suite = arena_world["root"] / "assets" / "suites" / "a1.yaml"
    edit_file(
        suite,
        "judges: [rule-judge, biased-judge]",
        "judges: [demo-gpt2-untrained]\n  max_tokens: 4\n  max_failure_rate: 1.0",
    )
    try:
        result = run_arena(arena_world["defs"], arena_world["instance"], "a1")
    finally:
        edit_file(
            suite,
            "judges: [demo-gpt2-untrained]\n  max_tokens: 4\n  max_failure_rate: 1.0",
            "judges: [rule-judge, biased-judge]",
        )
        run_arena(arena_world["defs"], arena_world["instance"], "a1")  # the world's ratings, for the other tests
    assert result.success
    wh = arena_world["wh"]
    local = wh.df("SELECT * FROM battles WHERE judge = 'demo-gpt2-untrained'")
    assert len(local) == 15 and (local["winner"] == "").all() and local["error"].str.contains("no verdict").all()
    cached = wh.df(
        "SELECT count(*) FROM completion_cache WHERE request_id IN (SELECT judge_request_first FROM battles "
        "WHERE judge = 'demo-gpt2-untrained' UNION SELECT judge_request_second FROM battles WHERE judge = "
        "'demo-gpt2-untrained')"
    ).iat[0, 0]
    assert cached == 30  # both orders of every battle, answered by the local model and cached
    decoding = wh.df("SELECT decoding FROM provenance WHERE model = 'demo-gpt2-untrained'")["decoding"]
    assert decoding.str.contains('"arena_judge"').any()
