"""HELM Lite at HELM's size, the steps at a small scale: the suite that extends helm-lite-v1 with HELM's sample sizes
runs through Dagster (here capped at one instance per entry, as `--max-eval-instances 1` does, on the echo backend),
and its results are kept under its own version name beside the CPU-sized suite's."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.runner import evaluate_suite
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write

pytestmark = pytest.mark.slow  # the datasets of five HELM Lite scenarios, read from ../shared/data


def test_helm_lite_at_helms_size_runs_capped_and_keeps_its_own_version(tmp_path):
    # the data: ../shared/data, as every test session reads it (conftest.isolated_home)
    models = write(tmp_path / "models.yaml", "models:\n  echo: {backend: echo, path: echo}\n")
    path, sized = tmp_path / "warehouse.duckdb", "helm-lite-v1-helm-size"
    resource = HolisticResource(warehouse_path=str(path), models_file=str(models), max_eval_instances=1)
    catalog = resource.catalog()
    assert Catalog().resolved_scenario(sized, "gsm8k")[1].max_eval_instances == 1000  # uncapped: HELM's
    defs = build_definitions(catalog, resource, only=set(catalog.suite(sized).scenarios))
    runs = evaluate_suite(defs, DagsterInstance.ephemeral(), sized, ["echo"], catalog=catalog)
    assert [r.label for r in runs] == [f"datasets for {sized}", "evaluate echo", "leaderboard"]
    # offline, the entries whose upstream files are not in ../shared/data are skipped with why: NarrativeQA's
    # qaps.csv and summaries.csv and NaturalQuestions' nq-dev files among them (HELM's layouts, downloaded where a
    # network exists)
    _, skipped = resource.deployment().runnable(sized)
    assert {
        "narrative_qa", "legalbench", "med_qa", "wmt_14", "natural_qa_openbook_longans", "natural_qa_closedbook"
    } == set(skipped)  # fmt: skip
    assert "narrativeqa_upstream/" in skipped["narrative_qa"] and "natural_qa_full/" in skipped["natural_qa_closedbook"]
    wh = Warehouse(path)
    tested = wh.df(
        "SELECT scenario, subset, count(*) AS n FROM instances WHERE version = ? AND split = 'test' "
        "AND perturbation = '' GROUP BY ALL",
        [sized],
    )
    here = {"openbookqa", "mmlu", "math_chain_of_thought", "gsm8k"}
    assert set(tested["scenario"]) == here and (tested["n"] == 1).all()  # one per entry and subset: the cap
    assert (
        len(tested[tested["scenario"] == "mmlu"]) == 5
        and len(tested[tested["scenario"] == "math_chain_of_thought"]) == 6
    )
    board = wh.df("SELECT DISTINCT version, scenario FROM leaderboard WHERE model = 'echo' AND family = 'accuracy'")
    assert set(board["version"]) == {sized} and here <= set(board["scenario"])
    # the prompts are helm-lite-v1's: HELM's decoding (GSM8K's 400 tokens and its stop), not a CPU's
    gsm8k = wh.df("SELECT DISTINCT max_tokens, stop FROM prompts WHERE version = ? AND scenario = 'gsm8k'", [sized])
    assert gsm8k["max_tokens"].tolist() == [400] and gsm8k["stop"].tolist() == ['["\\n\\n"]']
