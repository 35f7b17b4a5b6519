"""A few-shot pool held out of the evaluated file (no train split here: OpenBookQA in helm-lite-v1, whose HELM
run draws its examples from train) is said with the results: the warehouse names it from the instances and the
prompts alone, and the terminal leaderboard and the report show it."""

from __future__ import annotations

import pandas as pd
import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.scenarios import load_instances, sample_instances
from holistic_dagster.warehouse import Warehouse
from holistic_dagster.warehouse.rows import instance_row


def _prompts(scenario: str, instance_ids: list[str], shots: int) -> list[dict]:
    return [
        {"model": "m", "version": "helm-lite-v1", "scenario": scenario, "instance_id": i, "request_id": f"r-{i}",
         "kind": "generate", "adapter_method": "multiple_choice_joint", "template": "", "prompt": "p",
         "continuation": "", "choice_index": None, "is_null_context": False, "max_tokens": 1, "temperature": 0.0,
         "stop": "[]", "num_train_instances": shots, "truncated": False, "num_prompt_tokens": 1}
        for i in instance_ids
    ]  # fmt: skip


def test_openbookqas_pool_held_out_of_its_test_file_is_named_with_the_results(shared_data, tmp_path):
    from holistic_dagster.results.leaderboard import borrowed_pools

    catalog = Catalog()
    spec, pin = catalog.resolved_scenario("helm-lite-v1", "openbookqa")
    drawn = sample_instances(spec, pin, load_instances(spec, [shared_data]))
    pool = [i for i in drawn if i.split == "train"]
    tested = [i for i in drawn if i.split == "test" and not i.perturbation]
    assert pool and {i.source.uri for i in pool} == {i.source.uri for i in tested}  # one file: test.jsonl
    # MMLU's pool is its own dev split: not borrowed
    mmlu_spec, mmlu_pin = catalog.resolved_scenario("helm-lite-v1", "mmlu")
    mmlu = sample_instances(mmlu_spec, mmlu_pin, load_instances(mmlu_spec, [shared_data]))
    assert not {i.source.uri for i in mmlu if i.split == "train"} & {i.source.uri for i in mmlu if i.split == "test"}
    # TruthfulQA's pool is the file's first fifth, as HELM splits it: one file, but no deviation
    tqa_spec, tqa_pin = catalog.resolved_scenario("helm-classic-v1", "truthfulqa")
    tqa = sample_instances(tqa_spec, tqa_pin, load_instances(tqa_spec, [shared_data]))
    assert {i.source.uri for i in tqa if i.split == "train"} == {i.source.uri for i in tqa if i.split == "test"}
    wh = Warehouse(tmp_path / "w.duckdb")
    rows = [vars(instance_row(i, version="helm-lite-v1", scenario="openbookqa")) for i in drawn]
    rows += [vars(instance_row(i, version="helm-lite-v1", scenario="mmlu")) for i in mmlu]
    rows += [vars(instance_row(i, version="helm-lite-v1", scenario="truthfulqa")) for i in tqa]
    prompts = _prompts("openbookqa", [i.instance_id for i in tested], 5)
    prompts += _prompts("mmlu", [i.instance_id for i in mmlu if i.split == "test"], 5)
    prompts += _prompts("truthfulqa", [i.instance_id for i in tqa if i.split == "test" and not i.perturbation], 5)
    wh.replace({"version": "helm-lite-v1"}, {"instances": pd.DataFrame(rows), "prompts": pd.DataFrame(prompts)})
    found = borrowed_pools(wh, "helm-lite-v1")
    assert list(found) == ["openbookqa"]
    assert (
        "held out of the evaluated file (test.jsonl)" in found["openbookqa"]
        and "HELM draws them" in found["openbookqa"]
    )
    # a pool lent by one file per subset (RAFT's train.csv in each task's folder) names the file once
    per_subset = [
        {**r, "source_uri": r["source_uri"].replace("test.jsonl", f"task{n % 2}/test.jsonl")}
        for n, r in enumerate(rows)
    ]
    wh.replace({"version": "helm-lite-v1"}, {"instances": pd.DataFrame(per_subset), "prompts": pd.DataFrame(prompts)})
    assert "(test.jsonl)" in borrowed_pools(wh, "helm-lite-v1")["openbookqa"]
    # asked 0-shot, nothing was borrowed into a prompt
    zero = _prompts("openbookqa", [i.instance_id for i in tested], 0)
    wh.replace({"version": "helm-lite-v1"}, {"instances": pd.DataFrame(rows), "prompts": pd.DataFrame(zero)})
    assert borrowed_pools(wh, "helm-lite-v1") == {}


@pytest.mark.slow
def test_the_terminal_leaderboard_the_report_and_the_scores_say_so(shared_data, tmp_path, capsys):
    import shutil

    from dagster import DagsterInstance

    from holistic_dagster.cli.leaderboard_table import print_leaderboard
    from holistic_dagster.config.deployment import Deployment
    from holistic_dagster.definitions import build_definitions
    from holistic_dagster.defs.resources import HolisticResource
    from holistic_dagster.defs.runner import evaluate_suite
    from holistic_dagster.results.leaderboard import report_path
    from holistic_dagster.settings import REPO_ROOT
    from tests.conftest import write

    models = write(tmp_path / "models.yaml", "models:\n  echo: {backend: echo, path: echo}\n")
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    suite = (
        "version: b1\ndescription: a pool borrowed\nconventions: helm\ntoxicity: {kind: lexicon}\nscenarios:\n"
        "  openbookqa: {max_eval_instances: 3, seed: 0, method: multiple_choice_joint, max_train_instances: 5}\n"
        "  mmlu: {max_eval_instances: 2, seed: 0, subsets: [anatomy], max_train_instances: 2}\n"  # (its dev split)
    )
    write(tmp_path / "assets" / "suites" / "b1.yaml", suite)
    catalog, path = Catalog(tmp_path / "assets"), tmp_path / "warehouse.duckdb"
    resource = HolisticResource(
        warehouse_path=str(path), catalog_dir=str(catalog.root), models_file=str(models), data_dirs=[str(shared_data)]
    )
    evaluate_suite(build_definitions(catalog, resource), DagsterInstance.ephemeral(), "b1", ["echo"])
    print_leaderboard(Deployment.of(warehouse=path, catalog=catalog.root), "b1", full=False)
    shown = " ".join(capsys.readouterr().out.split())
    assert "openbookqa: in-context examples held out of the evaluated file (test.jsonl)" in shown
    page = (report_path(Warehouse(path), "b1").parent / "scenarios" / "openbookqa.html").read_text()
    assert "in-context examples held out of the evaluated file (test.jsonl)" in page
    # and every score's provenance (view scores), where the pool was borrowed and only there
    pools = Warehouse(path).df(
        "SELECT DISTINCT scenario, json_extract_string(decoding, '$.in_context_examples') AS pool FROM scores"
    )
    pools = dict(zip(pools["scenario"], pools["pool"]))
    assert pools.keys() == {"openbookqa", "mmlu"} and pools["mmlu"] is None
    assert pools["openbookqa"].startswith("in-context examples held out of the evaluated file (test.jsonl)")
