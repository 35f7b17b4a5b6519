"""The HTML report asset and `holistic report`: one offline file with every family, plots and regressions."""

from __future__ import annotations

import re

from dagster import AssetKey

from holistic_dagster.metrics import FAMILIES
from tests.conftest import MODELS, SUITE
from tests.test_cli import run


def test_report_asset_writes_an_offline_page_and_shows_its_path(suite_run):
    (materialization,) = [
        m
        for r in suite_run["runs"]
        for m in r.result.asset_materializations_for_node("report")
        if m.asset_key == AssetKey(["report"])
    ]
    path = materialization.metadata["path"].value
    assert path == str(suite_run["path"].parent / "reports" / f"{SUITE}.html")
    html = open(path, encoding="utf-8").read()
    for family in FAMILIES:
        assert f'<h2 id="{family}">{family}</h2>' in html
    assert all(model in html for model in MODELS)
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,', html)
    assert {f"reliability diagram for {m}" for m in MODELS} <= set(images)
    assert "efficiency vs accuracy" in images and "openbookqa under perturbation" in images
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing to fetch: opens offline
    assert "mean win rate" in html and "95% bootstrap CI" in html
    assert "not applicable" in html and "nothing to compare" in html


def test_report_command(suite_run, tmp_path):
    out = run("report", "--version", SUITE, "--db", str(suite_run["path"]))
    assert out.returncode == 0, out.stderr
    assert f"Report for suite {SUITE}: " in out.stdout and f"reports/{SUITE}.html" in out.stdout
    missing = run("report", "--version", "v1", "--db", str(suite_run["path"]))
    assert missing.returncode == 1 and "no scores for suite version 'v1'" in missing.stderr


def test_the_report_of_a_small_suite_is_one_offline_page(small_run):
    """The fast tier's report test: the report asset of suite s1 (one model, robustness perturbations)."""
    (materialization,) = [
        m
        for r in small_run["runs"]
        for m in r.result.asset_materializations_for_node("report")
        if m.asset_key == AssetKey(["report"])
    ]
    path = materialization.metadata["path"].value
    assert path == str(small_run["path"].parent / "reports" / "s1.html")
    html = open(path, encoding="utf-8").read()
    for family in ("accuracy", "calibration", "robustness", "efficiency"):  # the families s1 fills
        assert f'<h2 id="{family}">{family}</h2>' in html
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,', html)
    assert {"reliability diagram for demo-gpt2-untrained", "boolq under perturbation", "efficiency vs accuracy"} <= set(
        images
    )
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing to fetch: opens offline
    assert "mean win rate" in html and "95% bootstrap CI" in html
    assert "nothing to compare" in html  # one model, no `previous` revision: no regressions to show
