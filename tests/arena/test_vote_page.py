"""The human vote page in headless Chromium: anonymous answers, votes that land as rows with the voter's id,
the models revealed only after each vote, progress; then the arena_votes sensor asks for the ratings again."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from dagster import SkipReason, build_sensor_context

from holistic_dagster.config.deployment import Deployment
from holistic_dagster.stages.context import StageContext
from holistic_dagster.vote import invitations, vote_app
from tests.arena.conftest import QA
from tests.helpers import chromium_page
from tests.servers import LoopbackServer

pytestmark = pytest.mark.slow  # a browser

MODELS = ("oracle", "wrong", "demo-gpt2-untrained")


def _choice(question: str, first: str, second: str) -> str:
    """What the rule judge would say: the one answer containing the reference is better, else a tie."""
    answer = next(q["a"] for q in QA if q["q"] == question.strip())
    right = [answer in first, answer in second]
    return "first" if right == [True, False] else "second" if right == [False, True] else "tie"


def test_votes_cast_in_a_browser_land_as_rows_and_the_ratings_follow(arena_world):
    wh, resource, instance = arena_world["wh"], arena_world["resource"], arena_world["instance"]
    stage = StageContext(wh, arena_world["catalog"], Deployment.of(models=Path(resource.models_file)))
    key = b"test-key-not-a-secret"
    alice = invitations.invitation(key, "a1", "alice")
    with LoopbackServer(vote_app(stage, "a1", key)) as server, chromium_page(1200, 900) as page:
        base = f"http://127.0.0.1:{server.port}"
        assert requests.get(f"{base}/").status_code == 403  # no invitation: the page says how to get one
        elsewhere = requests.post(
            f"{base}/vote",
            data={"t": alice, "battle_id": "x", "choice": "first"},
            headers={"Origin": "http://evil.example"},
        )
        assert elsewhere.status_code == 403  # another site's form cannot vote
        page.goto(f"{base}/?t={alice}")
        for k in range(15):
            assert page.inner_text("#progress") == f"{k} of 15 voted"
            # anonymous before the vote: no model name anywhere but in the reveal of the previous vote
            html = page.evaluate(
                "() => document.documentElement.outerHTML.replace("
                "document.getElementById('reveal')?.outerHTML ?? '', '')"
            )
            assert not [m for m in MODELS if m in html]
            choice = _choice(page.inner_text("#question"), page.inner_text("#answer-1"), page.inner_text("#answer-2"))
            page.click(f"#vote-{choice}")
            page.wait_for_selector("#reveal")
            revealed = page.inner_text("#reveal")
            assert sum(m in revealed for m in MODELS) == 2  # the two models behind the answers, after the vote
        assert page.inner_text("#progress") == "15 of 15 voted" and page.is_visible("#finished")
    votes = wh.df("SELECT * FROM votes WHERE version = 'a1'")
    assert len(votes) == 15 and set(votes["voter"]) == {"alice"}
    judged = wh.df("SELECT battle_id, winner FROM battles WHERE version = 'a1' AND judge = 'rule-judge'")
    # alice voted as the rule judge judges: the same winner in every battle, whatever order she saw
    assert dict(zip(votes["battle_id"], votes["winner"])) == dict(zip(judged["battle_id"], judged["winner"]))
    assert 0 < (votes["shown_first"] == votes["model_a"]).sum() < 15

    sensor = arena_world["defs"].get_sensor_def("arena_votes")
    tick = sensor(build_sensor_context(instance=instance, resources={"holistic": resource}))
    assert [r.partition_key for r in tick.run_requests] == ["a1"]
    job = arena_world["defs"].resolve_job_def(tick.run_requests[0].job_name)
    assert job.execute_in_process(partition_key="a1", instance=instance).success
    ratings = wh.df(
        "SELECT judge, model, rating, ci_low, ci_high FROM arena_ratings WHERE version = 'a1' "
        "AND method = 'bradley_terry' AND judge IN ('human', 'rule-judge') ORDER BY model"
    )
    human, rule = (ratings[ratings["judge"] == j].reset_index(drop=True) for j in ("human", "rule-judge"))
    assert len(human) == 3  # the same verdicts as the rule judge's: the same ratings and intervals
    assert human[["model", "rating", "ci_low", "ci_high"]].equals(rule[["model", "rating", "ci_low", "ci_high"]])
    again = sensor(build_sensor_context(instance=instance, resources={"holistic": resource}, cursor=tick.cursor))
    assert isinstance(again, SkipReason) and "no new votes" in str(again.skip_message)
