"""The arena section of the HTML report's first page: per judge the ratings with their CIs, the unbounded marker,
the counts of battles and the win-rate matrix, as the warehouse holds them; no section without ratings."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import lxml.html
import pandas as pd
import pytest

from holistic_dagster.config.deployment import Deployment
from holistic_dagster.report import build_report
from holistic_dagster.report.arena import arena_tables
from holistic_dagster.stages import arena, summaries
from holistic_dagster.stages.context import StageContext
from holistic_dagster.stages.scores import compute_scores
from holistic_dagster.warehouse import Warehouse
from tests.arena.conftest import CONTESTANTS

MAIN_METRIC = {"mini_qa": "exact_match"}


@pytest.fixture(scope="module")
def scored_once(arena_world, tmp_path_factory) -> Path:
    """A copy of the arena's warehouse with the contestants' scores and the leaderboard (which the report needs
    and the arena world does not make), computed once for this module."""
    wh = Warehouse(shutil.copy(arena_world["wh"].path, tmp_path_factory.mktemp("scored") / "warehouse.duckdb"))
    stage = StageContext(wh, arena_world["catalog"], Deployment.of(models=Path(arena_world["resource"].models_file)))
    for model in CONTESTANTS:
        compute_scores(stage, "a1", "mini_qa", model)
    summaries.summarize(stage, "a1")
    return wh.path


@pytest.fixture
def scored(scored_once, tmp_path) -> Warehouse:
    """Each test's own copy (some add votes or drop tables)."""
    return Warehouse(shutil.copy(scored_once, tmp_path / "warehouse.duckdb"))


def text(element) -> str:
    return " ".join(" ".join(element.itertext()).split())


def first_line(td) -> str:
    """A cell's value without the small print under it."""
    return (td.text or "").strip()


def index_page(wh: Warehouse, folder: Path):
    build_report(wh, "a1", MAIN_METRIC, folder, predictions_per_scenario=2)
    return lxml.html.fromstring((folder / "index.html").read_text(encoding="utf-8"))


def test_the_first_page_shows_each_judges_ratings_and_win_rates_as_stored(scored, tmp_path):
    index = index_page(scored, tmp_path / "report")
    (section,) = index.xpath('//section[@id="arena"]')
    assert index.xpath('//nav/a[@href="#arena"]')
    # after the family tables, before the regressions
    assert section.getprevious().get("class") == "family" and section.getnext().get("id") == "regressions"
    tables = section.xpath('.//table[@class="arena"]')
    # the qualified judge first, with its ratings; the biased judge, refused, has its agreement and no table
    assert [t.get("data-judge") for t in tables] == ["rule-judge"]
    assert [text(h) for h in section.xpath(".//h3")] == ["judge rule-judge", "judge biased-judge"]
    shown = {p.get("data-judge"): text(p) for p in section.xpath('.//p[@class="qualification"]')}
    stored = scored.df("SELECT * FROM arena_judges WHERE version = 'a1'").set_index("judge")
    rule_agreement = stored.loc["rule-judge", "agreement"]
    assert shown["rule-judge"].startswith(f"qualified judge: agreement {rule_agreement:.2f}, position consistency")
    assert shown["biased-judge"].startswith("unqualified judge: agreement 0.50, position consistency 0.00")
    refused = section.xpath('.//p[@class="qualification"][@data-judge="biased-judge"]')[0].getnext()
    assert text(refused).startswith("No ratings from this judge: its 15 battles' verdicts are kept")
    ratings = scored.df("SELECT * FROM arena_ratings WHERE version = 'a1'")
    for table in tables:
        judge = table.get("data-judge")
        part = ratings[ratings["judge"] == judge]
        bt = part[part["method"] == "bradley_terry"].set_index("model")
        style = part[part["method"] == "bradley_terry_style"].set_index("model")
        online = part[part["method"] == "online_elo"].set_index("model")
        rows = table.xpath("./tbody/tr")
        models = [r.xpath("./th")[0].text for r in rows]
        assert sorted(models) == sorted(CONTESTANTS)
        assert models == sorted(models, key=lambda m: (-bt.loc[m, "rating"], m))  # best Bradley-Terry first
        for row, model in zip(rows, models):
            cells = row.xpath("./td")
            r = bt.loc[model]
            star = "*" if r["note"].startswith("unbounded") else ""
            assert first_line(cells[0]) == f"{r['rating']:.0f}{star}"
            assert text(cells[0].xpath('./span[@class="ci"]')[0]) == f"[{r['ci_low']:.0f}, {r['ci_high']:.0f}]"
            assert first_line(cells[1]).rstrip("*") == f"{style.loc[model, 'rating']:.0f}"
            assert first_line(cells[2]) == f"{online.loc[model, 'rating']:.0f}"
            assert [text(c) for c in cells[3:]] == [
                str(r["num_battles"]), f"{r['wins']:g}", f"{r['mean_answer_tokens']:.1f}"
            ]  # fmt: skip
    (rule,) = tables
    # the oracle beat everyone: first, bold, and marked unbounded with the footnote saying what that means
    top = rule.xpath("./tbody/tr")[0]
    assert top.xpath("./th")[0].text == "oracle" and top.xpath("./td")[0].get("class") == "best"
    assert first_line(top.xpath("./td")[0]).endswith("*") and top.xpath("./td")[0].get("title").startswith("unbounded")
    assert [first_line(r.xpath("./td")[0]) for r in rule.xpath("./tbody/tr")[1:]] == ["1000", "1000"]
    legend = text(rule.getparent().getnext())
    assert "wrong = 1000" in legend and "bootstrap over prompts" in legend and "* unbounded" in legend
    assert "15 battles: 0 without a verdict (not votes); position inconsistency 0.0%" in legend

    wins = scored.df("SELECT * FROM arena_win_rates WHERE version = 'a1'")
    grids = {}
    for matrix in section.xpath('.//table[@class="arena-wins"]'):
        judge = matrix.get("data-judge")
        stored = wins[wins["judge"] == judge].set_index(["model", "opponent"])
        columns = [text(th) for th in matrix.xpath("./thead/tr/th")[1:]]
        (table,) = section.xpath(f'.//table[@class="arena"][@data-judge="{judge}"]')
        assert columns == [r.xpath("./th")[0].text for r in table.xpath("./tbody/tr")]  # the ratings' order
        grid = grids[judge] = {}
        for row in matrix.xpath("./tbody/tr"):
            model = row.xpath("./th")[0].text
            for opponent, td in zip(columns, row.xpath("./td"), strict=True):
                grid[model, opponent] = first_line(td)
                if model == opponent:
                    assert text(td) == "-" and td.get("title") is None
                    continue
                r = stored.loc[(model, opponent)]
                assert first_line(td) == f"{r['win_rate']:.2f}"
                assert td.get("title") == f"{model} against {opponent}: {r['num_battles']} battle(s)"
    assert sorted(grids) == ["rule-judge"]
    rule = grids["rule-judge"]
    assert rule["oracle", "wrong"] == "1.00" and rule["wrong", "oracle"] == "0.00"
    assert rule["wrong", "demo-gpt2-untrained"] == "0.50" and rule["oracle", "oracle"] == "-"


def test_peoples_votes_have_their_own_table_with_the_number_of_votes_and_voters(arena_world, scored, tmp_path):
    battles = scored.df("SELECT * FROM battles WHERE version = 'a1' AND judge = 'rule-judge' ORDER BY battle_id")
    votes = battles[VOTE_COLUMNS].assign(
        voter=["alice", "bob"] * 7 + ["alice"],
        shown_first=battles["model_a"],
        voted_at=pd.Timestamp("2026-01-01") + pd.to_timedelta(range(len(battles)), unit="s"),
    )
    votes.loc[0, "model_a"] = "<b>x</b>"  # a hostile name stays text
    scored.upsert("votes", votes)
    arena.rate(StageContext(scored, arena_world["catalog"]), "a1")
    people = {a.judge: a for a in arena_tables(scored, "a1")}["human"]
    assert people.label == "people's votes (holistic vote)" and (people.num_battles, people.num_voters) == (15, 2)
    index = index_page(scored, tmp_path / "report")
    (table,) = index.xpath('//table[@class="arena"][@data-judge="human"]')
    assert text(table.getparent().getprevious()) == "people's votes (holistic vote)"
    assert "Fitted on 15 vote(s) by 2 voter(s)." in text(table.getparent().getnext())
    assert "<b>x</b>" in [r.xpath("./th")[0].text for r in table.xpath("./tbody/tr")]
    # votes cast after the fit: the caption counts those the table was fitted on, and says more are waiting
    later = votes.assign(voter="carol", voted_at=votes["voted_at"] + pd.Timedelta(hours=1))
    scored.upsert("votes", later)
    people = {a.judge: a for a in arena_tables(scored, "a1")}["human"]
    assert (people.num_battles, people.num_cast, people.num_voters) == (15, 30, 3)
    index = index_page(scored, tmp_path / "report-later")
    (table,) = index.xpath('//table[@class="arena"][@data-judge="human"]')
    assert "Fitted on 15 vote(s); 30 cast so far by 3 voter(s)" in text(table.getparent().getnext())


VOTE_COLUMNS = ["version", "battle_id", "scenario", "instance_id", "model_a", "model_b", "request_a", "request_b",
                "tokens_a", "tokens_b", "winner"]  # fmt: skip


def test_no_arena_section_without_ratings(scored, tmp_path):
    assert arena_tables(scored, "nope") == []
    # a warehouse from before the arena tables: the report is built, without the section
    with duckdb.connect(str(scored.path)) as con:
        for table in ("arena_win_rates", "arena_ratings", "votes", "battles"):
            con.execute(f"DROP TABLE {table}")
    assert arena_tables(scored, "a1") == []
    index = index_page(scored, tmp_path / "report")
    assert not index.xpath('//*[@id="arena"]') and not index.xpath('//nav/a[@href="#arena"]')
    assert index.xpath('//table[@class="headline"]')


def test_a_rating_from_battles_on_one_prompt_says_it_has_no_interval():
    from holistic_dagster.arena.ratings import ONE_PROMPT
    from holistic_dagster.report.arena import _ratings

    frame = pd.DataFrame(
        {"rating": [1000.0, 1100.0], "ci_low": [None, None], "ci_high": [None, None], "note": [ONE_PROMPT] * 2},
        index=["base", "other"],
    )
    shown = _ratings(frame, ["other", "base"], ci=True)
    assert [(r.text, r.ci) for r in shown] == [("1100", "no CI: one prompt"), ("1000", "no CI: one prompt")]
