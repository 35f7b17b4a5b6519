"""The HTML report (the `report` asset and `holistic report`): a folder of offline pages in three levels, the
headline tables per family, a page per scenario and its predictions, read back from the warehouse."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import lxml.html
import pandas as pd
import pytest
from dagster import AssetKey

from holistic_dagster.config.redaction import visible
from holistic_dagster.report import _write_folder, build_report, plots
from holistic_dagster.report.markdown import headline_markdown
from holistic_dagster.report.predictions import load_items, samples
from holistic_dagster.results.headline import headline_tables, number
from tests.conftest import MODELS, SUITE
from tests.test_cli import run

OFFLINE = re.compile(r'(src|href)="(https?:)?//')  # anything a page would fetch


def report_materialization(runs) -> dict:
    (materialization,) = [
        m
        for r in runs
        for m in r.result.asset_materializations_for_node("report")
        if m.asset_key == AssetKey(["report"])
    ]
    return {k: v.value for k, v in materialization.metadata.items()}


def page(path: Path):
    return lxml.html.fromstring(path.read_text(encoding="utf-8"))


def headline_grid(tree, family: str) -> dict[str, list[str]]:
    """A family's first-screen table: model -> its cells' text (mean win rate first)."""
    (table,) = tree.xpath(f'//table[@class="headline"][@data-family="{family}"]')
    return {
        row.xpath("./th")[0].text_content(): [" ".join(" ".join(td.itertext()).split()) for td in row.xpath("./td")]
        for row in table.xpath("./tbody/tr")
    }


def pre_text(element) -> str:
    """A <pre>'s text as the browser holds it (the HTML parser drops the newline right after <pre>, which the
    templates write so that text beginning with a newline keeps it)."""
    text = element.text_content()
    return text[1:] if text.startswith("\n") else text


# --- the small suite (fast tier) ------------------------------------------------------------------------------
def test_the_report_of_a_small_suite_is_a_folder_of_offline_pages(small_run):
    """Suite s1: BoolQ, four instances, two robustness perturbations, one model."""
    meta = report_materialization(small_run["runs"])
    folder = small_run["path"].parent / "reports" / "s1"
    assert meta["path"] == str(folder / "index.html") and meta["url"] == (folder / "index.html").resolve().as_uri()
    pages = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.html"))
    assert pages == ["index.html", "predictions/boolq.html", "scenarios/boolq.html"] and meta["num_pages"] == 3
    assert meta["num_bytes"] == sum(p.stat().st_size for p in folder.rglob("*.html"))
    assert meta["predictions_per_scenario"] == {"boolq": 4}
    for path in folder.rglob("*.html"):
        assert not OFFLINE.search(path.read_text(encoding="utf-8")), path

    index = page(folder / "index.html")
    families = [t.get("data-family") for t in index.xpath('//table[@class="headline"]')]
    assert families == ["accuracy", "calibration", "robustness", "efficiency"]  # the ones s1 fills, in order
    stats = small_run["wh"].df("SELECT * FROM leaderboard_stats WHERE version = 's1'")
    rates = small_run["wh"].df("SELECT * FROM win_rates WHERE version = 's1'")
    assert rates.empty  # one model beats no other: no mean win rate
    for family in families:
        grid = headline_grid(index, family)
        assert list(grid) == ["demo-gpt2-untrained"] and grid["demo-gpt2-untrained"][0] == "-"  # models as rows
    # the accuracy cell is the main metric's value with its CI; robustness's is its worst case
    for family, perturbation in (("accuracy", ""), ("robustness", "worst")):
        cell = stats[
            (stats["family"] == family)
            & (stats["metric"] == "quasi_exact_match")
            & (stats["perturbation"] == perturbation)
        ].iloc[0]
        expected = f"{number(cell['value'])} [{number(cell['ci_low'])}, {number(cell['ci_high'])}]"
        assert headline_grid(index, family)["demo-gpt2-untrained"][1] == expected
    legend = " ".join(index.xpath('//section[@id="accuracy"]//div[@class="legend"]')[0].text_content().split())
    assert "quasi_exact_match: equal after normalisation" in legend and "(higher is better)" in legend
    assert "ece_10_bin: expected calibration error" in index.text_content()
    assert "nothing to compare" in index.text_content()  # one model, no `previous` revision

    scenario = page(folder / "scenarios" / "boolq.html")
    rows = scenario.xpath('//table[@class="metrics"]/tbody/tr')
    assert len(rows) == len(stats[stats["scenario"] == "boolq"])  # every metric under every perturbation
    labels = [tuple(td.text_content() for td in r.xpath("./td")[:3]) for r in rows]
    assert ("robustness", "exact_match", "typos") in labels and ("calibration", "ece_10_bin", "") in labels
    assert scenario.xpath('//a[@href="../predictions/boolq.html"]')
    images = [img.get("alt") for img in scenario.xpath("//img")]
    assert images == ["boolq under perturbation", "boolq reliability diagram"] or "Not drawn" in scenario.text_content()


def test_the_predictions_page_shows_the_warehouse_rows_of_each_instance(small_run):
    folder = small_run["path"].parent / "reports" / "s1"
    tree = page(folder / "predictions" / "boolq.html")
    wh = small_run["wh"]
    articles = tree.xpath("//article")
    originals = wh.df("SELECT instance_id FROM instances WHERE version = 's1' AND split = 'test' AND perturbation = ''")
    assert sorted(a.get("data-id") for a in articles) == sorted(originals["instance_id"])
    rows = wh.df(
        "SELECT s.instance_id, s.request_id, p.prompt, c.text, c.tokens FROM instance_scores s "
        "JOIN prompts p USING (model, version, scenario, instance_id, request_id) "
        "JOIN completions c USING (model, version, scenario, request_id) "
        "WHERE s.version = 's1' AND s.metric = 'quasi_exact_match' AND s.perturbation != 'worst'"
    ).set_index("instance_id")
    variants = tree.xpath('//div[@class="variant"]')
    assert len(variants) == len(rows) == 4 * 3  # each original with its two perturbed copies
    for variant in variants:
        row = rows.loc[variant.get("data-id")]
        (prompt,) = variant.xpath('.//pre[@class="prompt-text"]')
        (completion,) = variant.xpath('.//section[@data-model="demo-gpt2-untrained"]//pre[@class="completion"]')
        # the untrained model's output holds control characters: shown as their control pictures
        assert pre_text(prompt) == visible(row["prompt"]) and pre_text(completion) == visible(row["text"])
        tokens = variant.xpath('.//table[@class="small tokens"]/tr')[1:]
        shown = [t.xpath("./td/code")[0].text_content() for t in tokens]
        assert len(tokens) == 5 and shown == [visible(t) for t in json.loads(row["tokens"])]
        tag = variant.xpath('./div/span[contains(@class, "tag")]')[0].text_content()
        perturbation = variant.get("data-perturbation")
        assert tag == (f"perturbation: {perturbation}" if perturbation else "original")
        assert perturbation in ("", "typos", "lowercase")
    assert "\x00" not in (folder / "predictions" / "boolq.html").read_text(encoding="utf-8")


def test_the_leaderboard_asset_shows_the_first_screen_tables_in_the_dagster_ui(small_run):
    (materialization,) = [
        m
        for r in small_run["runs"]
        for m in r.result.asset_materializations_for_node("leaderboard")
        if m.asset_key == AssetKey(["leaderboard"])
    ]
    metadata = materialization.metadata
    assert {"accuracy", "calibration", "robustness", "efficiency"} <= set(metadata)
    cell = (
        small_run["wh"]
        .df(
            "SELECT value, ci_low, ci_high FROM leaderboard_stats WHERE version = 's1' AND family = 'accuracy' "
            "AND metric = 'quasi_exact_match' AND perturbation = ''"
        )
        .iloc[0]
    )
    accuracy = metadata["accuracy"].value  # Markdown
    assert accuracy.splitlines()[0] == "| model | mean win rate | boolq (quasi_exact_match) |"
    row = f"| demo-gpt2-untrained | - | {number(cell['value'])} [{number(cell['ci_low'])}, {number(cell['ci_high'])}] |"
    assert row in accuracy and "quasi_exact_match: equal after normalisation" in accuracy


# --- the tables and plots, on hand-made statistics ------------------------------------------------------------
def cells_frame(rows: list[tuple]) -> pd.DataFrame:
    columns = ["family", "scenario", "metric", "perturbation", "model", "value", "ci_low", "ci_high"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.assign(version="t", n=10, ci_note="", bootstrap_seed=0, bootstrap_samples=100)


def test_headline_tables_put_models_in_rows_and_mark_each_columns_best():
    nan = float("nan")
    cells = cells_frame(
        [
            ("accuracy", "qa", "exact_match", "", "a", 0.5, 0.4, 0.6),
            ("accuracy", "qa", "f1_score", "", "a", 0.9, 0.8, 1.0),  # not the main metric: not a column
            ("accuracy", "qa", "exact_match", "", "b", 0.7, 0.6, 0.8),
            ("accuracy", "qa", "exact_match", "", "c", 0.7, 0.6, 0.8),
            ("calibration", "qa", "ece_10_bin", "", "a", 0.1, 0.05, 0.2),
            ("calibration", "qa", "ece_10_bin", "", "b", 0.3, 0.2, 0.4),
            ("calibration", "qa", "ece_10_bin", "", "c", 0.3, 0.2, 0.4),
            ("bias", "bbq", "bbq_bias_ambiguous", "", "a", -0.05, nan, nan),
            ("bias", "bbq", "bbq_bias_ambiguous", "", "b", 0.2, nan, nan),
            ("bias", "bbq", "bbq_bias_disambiguated", "", "a", 0.0, nan, nan),
            ("bias", "bbq", "bbq_bias_disambiguated", "", "b", 0.0, nan, nan),
        ]
    )
    rates = pd.DataFrame(
        {"family": ["accuracy"] * 3, "model": ["a", "b", "c"], "mean_win_rate": [0.0, 0.75, 0.75], "num_columns": 1}
    )
    applicability = pd.DataFrame(
        {"scenario": ["qa"], "family": ["bias"], "applies": [False], "detail": ["no demographic terms"]}
    )
    tables = {t.family: t for t in headline_tables(cells, rates, applicability, {"qa": "exact_match", "bbq": ""})}
    assert list(tables) == ["accuracy", "calibration", "bias"]
    accuracy = tables["accuracy"]
    assert [(c.scenario, c.metric) for c in accuracy.columns] == [("qa", "exact_match")]
    assert [(m, rate) for m, rate, _, _ in accuracy.rows] == [("b", 0.75), ("c", 0.75), ("a", 0.0)]  # best first
    assert [row[0].best for _, _, _, row in accuracy.rows] == [True, True, False]  # a tie for best: both
    assert accuracy.rows[0][3][0].ci == "[0.600, 0.800]"
    assert accuracy.legend == [("exact_match", accuracy.legend[0][1], "higher is better")]
    calibration = {m: row[0].best for m, _, _, row in tables["calibration"].rows}
    assert calibration == {"a": True, "b": False, "c": False}  # lower is better
    assert tables["calibration"].rows[0][1] is None  # no win rates given for calibration
    bias = tables["bias"]
    assert [c.metric for c in bias.columns] == ["bbq_bias_ambiguous", "bbq_bias_disambiguated"]
    by_model = {m: row for m, _, _, row in bias.rows}
    assert by_model["a"][0].best and not by_model["b"][0].best  # |-0.05| is closer to 0 than 0.2
    assert not by_model["a"][1].best and not by_model["b"][1].best  # all equal: nothing stands out
    assert by_model["c"] == [None, None]  # no value: shown as "-"
    assert bias.not_applicable == [("qa", "no demographic terms")]
    assert dict((m, d) for m, _, d in bias.legend)["bbq_bias_ambiguous"] == "closer to 0 is better"
    markdown = headline_markdown(accuracy)
    assert "| model | mean win rate | qa (exact_match) |" in markdown
    assert "| b | 0.750 | **0.700** [0.600, 0.800] |" in markdown and "| a | 0.000 | 0.500 [0.400, 0.600] |" in markdown


def test_the_perturbation_chart_is_omitted_with_a_reason_where_it_would_be_empty():
    zero = cells_frame(
        [
            ("accuracy", "qa", "exact_match", "", "a", 0.0, 0.0, 0.0),
            ("robustness", "qa", "exact_match", "typos", "a", 0.0, float("nan"), float("nan")),
            ("robustness", "qa", "exact_match", "worst", "a", float("nan"), float("nan"), float("nan")),
        ]
    )
    png, why = plots.perturbation_chart(zero, "qa", "exact_match")
    assert png is None and why.startswith("every exact_match value is zero or undefined")
    png, why = plots.perturbation_chart(zero.assign(value=[0.5, 0.25, 0.25]), "qa", "exact_match")
    assert png and not why
    png, why = plots.perturbation_chart(zero.iloc[:1], "qa", "exact_match")
    assert png is None and "no robustness or fairness perturbation" in why


@pytest.mark.slow  # a process of its own imports matplotlib
def test_plots_drawn_in_the_background_process_are_those_drawn_here(caplog):
    """`holistic evaluate` draws the report's plots in a low-priority process: the same PNG bytes; and a
    background process that died leaves the plots drawn here."""
    cells = cells_frame(
        [
            ("accuracy", "qa", "exact_match", "", "a", 0.5, 0.4, 0.6),
            ("robustness", "qa", "exact_match", "typos", "a", 0.25, 0.2, 0.3),
            ("robustness", "qa", "exact_match", "worst", "a", 0.25, 0.2, 0.3),
        ]
    )
    here = plots.perturbation_chart.__wrapped__(cells, "qa", "exact_match")
    plots.start_background()
    try:
        helper = plots._background.helper
        assert helper._process.is_alive()
        # the helper draws it (waiting for its warm-up), exactly as this process does
        assert helper.call("perturbation_chart", cells, "qa", "exact_match") == here
        assert helper.warm() and plots.perturbation_chart(cells, "qa", "exact_match") == here
        helper._process.kill()
        helper._process.join(timeout=10)
        with caplog.at_level(logging.WARNING, logger="holistic_dagster.report.plots"):
            assert plots.perturbation_chart(cells, "qa", "exact_match") == here
        assert plots._background.helper is None and "drawing in this process" in caplog.text
    finally:
        plots.stop_background()


def test_a_failed_write_leaves_the_previous_report_whole(tmp_path, monkeypatch):
    folder = tmp_path / "reports" / "v9"
    _write_folder(folder, {"index.html": "old index", "scenarios/qa.html": "old qa"})
    real_write = Path.write_bytes

    def full_disk(self, data):
        if self.name == "qa.html":
            raise OSError(28, "No space left on device", str(self))
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    with pytest.raises(OSError, match="No space left"):
        _write_folder(folder, {"index.html": "new index", "scenarios/qa.html": "new qa"})
    assert (folder / "index.html").read_text() == "old index" and (folder / "scenarios/qa.html").read_text() == "old qa"
    assert sorted(p.name for p in folder.parent.iterdir()) == ["v9"]  # no half-written folder beside it


# --- the two-model suite (slow tier) --------------------------------------------------------------------------
def test_report_asset_of_the_two_model_suite(suite_run):
    meta = report_materialization(suite_run["runs"])
    folder = suite_run["path"].parent / "reports" / SUITE
    assert meta["path"] == str(folder / "index.html")
    index = page(folder / "index.html")
    families = [t.get("data-family") for t in index.xpath('//table[@class="headline"]')]
    assert families == [f for f in ("accuracy", "calibration", "robustness", "fairness", "bias", "toxicity",
                                    "efficiency")]  # fmt: skip
    for family in families:
        assert sorted(headline_grid(index, family)) == sorted(MODELS)
    stats = suite_run["wh"].df("SELECT DISTINCT scenario FROM leaderboard_stats WHERE version = ?", [SUITE])
    scenarios = sorted(stats["scenario"])
    assert sorted(p.stem for p in (folder / "scenarios").glob("*.html")) == scenarios
    assert sorted(p.stem for p in (folder / "predictions").glob("*.html")) == scenarios
    assert "efficiency vs accuracy" in [img.get("alt") for img in index.xpath("//img")]
    openbookqa = page(folder / "scenarios" / "openbookqa.html")
    assert "openbookqa under perturbation" in [img.get("alt") for img in openbookqa.xpath("//img")]
    assert "not applicable" in openbookqa.text_content()


def test_the_predictions_sample_is_the_same_for_every_model(suite_run):
    wh = suite_run["wh"]
    sample = samples(wh, SUITE, 5)
    assert sample["mmlu"] == samples(wh, SUITE, 6)["mmlu"][:5]  # a larger sample extends it
    assert sample["mmlu"] != samples(wh, SUITE, 5, seed=1)["mmlu"]
    assert all(len(ids) == 5 for ids in sample.values())
    items = load_items(wh, SUITE, {"mmlu": sample["mmlu"]}, {"mmlu": "exact_match"})["mmlu"]
    assert [i.instance_id for i in items] == sample["mmlu"]
    for item in items:
        for variant in item.variants:
            assert sorted(variant.models) == sorted(MODELS)  # every model on every sampled instance
            for prediction in variant.models.values():
                assert prediction.main_value in (0.0, 1.0) and prediction.prompt and prediction.scores


def test_report_command(suite_run, tmp_path):
    db = tmp_path / "warehouse.duckdb"  # the command refreshes the summaries: not on the shared file
    shutil.copy(suite_run["path"], db)
    out = run("report", "--version", SUITE, "--db", str(db), "--predictions", "3")
    assert out.returncode == 0, out.stderr
    assert f"Report for suite {SUITE}: " in out.stdout and f"reports/{SUITE}/index.html" in out.stdout
    assert len(page(tmp_path / "reports" / SUITE / "predictions" / "mmlu.html").xpath("//article")) == 3
    missing = run("report", "--version", "v1", "--db", str(db))
    assert missing.returncode == 1 and "no scores for suite version 'v1'" in missing.stderr


def test_build_report_needs_statistics(small_run, tmp_path):
    from holistic_dagster.errors import HolisticError

    with pytest.raises(HolisticError, match="no leaderboard statistics for suite version 'nope'"):
        build_report(small_run["wh"], "nope", {}, tmp_path / "nope")
    assert not (tmp_path / "nope").exists()
