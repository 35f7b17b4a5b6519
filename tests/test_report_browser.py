"""The report as a reader sees it, in headless Chromium (Debian's, driven by Playwright): the first screen has
one table per family with the models as rows; following the links from it reaches a scenario's predictions,
whose prompt and completion are the warehouse's rows; hostile dataset text and model output show as text."""

from __future__ import annotations

import shutil

import pytest

from holistic_dagster.config.redaction import visible
from holistic_dagster.report import PREDICTIONS_PER_SCENARIO
from holistic_dagster.report.predictions import samples
from holistic_dagster.stages import StageContext
from holistic_dagster.stages.summaries import write_report
from holistic_dagster.warehouse import Warehouse
from tests.conftest import MODELS, SUITE
from tests.helpers import chromium_page, keep_for_docs

pytestmark = pytest.mark.slow  # the two-model suite (suite_run) and a browser

MODEL, OTHER = "demo-llama-tuned", "demo-gpt2-untrained"
# what a dataset record or a model could hold: markup, a script, template syntax, an attribute breakout
HOSTILE_INPUT = 'Is <b>this</b> {{ 7*7 }} safe? <script>window.__pwned = "input"</script>'
HOSTILE_OUTPUT = (
    '"><img src=x onerror="window.__pwned=\'img\'"> {% if 1 %}yes{% endif %} <script>window.__pwned=1</script>'
)


@pytest.fixture(scope="module")
def hostile_report(suite_run, tmp_path_factory):
    """The two-model suite's report, rebuilt from a copy of its warehouse in which one sampled BoolQ instance's
    input and one model's completion of it are hostile text."""
    root = tmp_path_factory.mktemp("hostile_report")
    wh = Warehouse(shutil.copy(suite_run["path"], root / "warehouse.duckdb"))
    instance = samples(wh, SUITE, PREDICTIONS_PER_SCENARIO)["boolq"][0]
    (request_id,) = wh.df(
        "SELECT request_id FROM instance_scores WHERE model = ? AND version = ? AND scenario = 'boolq' "
        "AND instance_id = ? AND family = 'accuracy' AND metric = 'quasi_exact_match'",
        [MODEL, SUITE, instance],
    )["request_id"]
    with wh.connect() as con:
        con.execute(
            "UPDATE completions SET text = ? WHERE model = ? AND version = ? AND scenario = 'boolq' AND request_id = ?",
            [HOSTILE_OUTPUT, MODEL, SUITE, request_id],
        )
        con.execute(
            "UPDATE instances SET input = ? WHERE version = ? AND scenario = 'boolq' AND instance_id = ?",
            [HOSTILE_INPUT, SUITE, instance],
        )
    written = write_report(StageContext(wh), SUITE)
    prompt = wh.df(
        "SELECT prompt FROM prompts WHERE model = ? AND version = ? AND scenario = 'boolq' AND request_id = ?",
        [MODEL, SUITE, request_id],
    )["prompt"].iat[0]
    other = wh.df(
        "SELECT c.text FROM instance_scores s JOIN completions c USING (model, version, scenario, request_id) "
        "WHERE s.model = ? AND s.version = ? AND s.scenario = 'boolq' AND s.instance_id = ? AND s.family = 'accuracy' "
        "AND s.metric = 'quasi_exact_match'",
        [OTHER, SUITE, instance],
    )["text"].iat[0]
    return {"index": written["path"], "instance": instance, "prompt": prompt, "other_completion": other, "root": root}


def test_from_the_first_screen_to_a_prediction_in_a_browser(hostile_report):
    shots = hostile_report["root"]
    with chromium_page(1400, 1000) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"file://{hostile_report['index']}")
        tables = page.locator("table.headline")
        families = [tables.nth(i).get_attribute("data-family") for i in range(tables.count())]
        assert families == ["accuracy", "calibration", "robustness", "fairness", "bias", "toxicity", "efficiency"]
        for i in range(tables.count()):  # one table per family, a row per model
            assert sorted(tables.nth(i).locator("tbody tr th").all_text_contents()) == sorted(MODELS)
        assert tables.first.locator("thead th").nth(1).text_content() == "mean win rate"
        page.screenshot(path=str(shots / "first_screen.png"))

        page.locator('table[data-family="accuracy"] thead a', has_text="boolq").click()
        page.wait_for_url("**/scenarios/boolq.html")
        assert page.locator("table.metrics tbody tr").count() > 10
        page.screenshot(path=str(shots / "scenario.png"))
        page.get_by_role("link", name="Predictions", exact=True).click()
        page.wait_for_url("**/predictions/boolq.html")

        item = page.locator(f'article[data-id="{hostile_report["instance"]}"]')
        original = item.locator('div.variant[data-perturbation=""]')
        prompt = original.locator(f'details.prompt[data-models~="{MODEL}"] pre.prompt-text')
        assert prompt.text_content() == hostile_report["prompt"]  # the exact prompt, as the warehouse holds it
        completion = original.locator(f'section[data-model="{MODEL}"] pre.completion')
        assert completion.text_content() == HOSTILE_OUTPUT and completion.is_visible()
        assert original.locator("pre.input").text_content() == HOSTILE_INPUT
        other = original.locator(f'section[data-model="{OTHER}"] pre.completion').text_content()
        assert other == visible(hostile_report["other_completion"])
        # hostile text stayed text: no script of its ran, no element came out of it, no template was evaluated
        assert page.evaluate("window.__pwned") is None and not errors
        assert page.locator("script").count() == 1 and page.locator("article img, article b").count() == 0
        assert "{{ 7*7 }}" in original.locator("pre.input").inner_text() and "49" not in HOSTILE_INPUT
        # side by side: both models' answers to the same instance; then one
        assert original.locator("section.model:visible").count() == 2
        page.screenshot(path=str(shots / "predictions.png"))
        page.select_option("#model-b", "")
        assert original.locator("section.model:visible").count() == 1
        # the text filter keeps the instances that hold the text
        page.fill("#search", "__pwned")
        total = page.locator("article.item").count()
        assert page.locator("#count").text_content() == f"1 of {total} instance(s) shown"
        assert item.is_visible() and page.locator("article.item:visible").count() == 1
        page.select_option("#perturbation", "original")
        assert page.locator("div.variant:visible").count() == 1  # the original, without its perturbed copies
    for name in ("first_screen.png", "scenario.png", "predictions.png"):
        assert (shots / name).stat().st_size > 10_000, name
    keep_for_docs(shots / "first_screen.png", "report.png")
    print(f"screenshots in {shots}")
