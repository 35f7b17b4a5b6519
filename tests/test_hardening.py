"""Hostile input never costs data: a stage that fails on it leaves the previous partition as it was."""

from __future__ import annotations

import shutil

import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.errors import CatalogError, DataFormatError
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.stages import StageContext
from holistic_dagster.stages.dataset import build_dataset
from holistic_dagster.stages.prompts import build_prompts
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write
from tests.helpers import edit_file

SUITE = "version: h1\nscenarios:\n  boolq: {max_eval_instances: 4, seed: 1}\n"


@pytest.fixture
def world(tmp_path, shared_data, monkeypatch):
    """A catalog with suite h1 (4 BoolQ questions) and a data folder of our own, and its dataset built once."""
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(tmp_path / "assets" / "suites" / "h1.yaml", SUITE)
    shutil.copytree(shared_data / "boolq", tmp_path / "data" / "boolq")
    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(tmp_path / "data"))
    stage = StageContext(Warehouse(tmp_path / "w.duckdb"), Catalog(tmp_path / "assets"))
    build_dataset(stage, "h1", "boolq")
    return tmp_path, stage


def _count(stage: StageContext, table: str) -> int:
    return int(stage.warehouse.df(f"SELECT count(*) AS n FROM {table}")["n"].iat[0])


def test_an_empty_data_file_fails_naming_it_and_keeps_the_dataset(world):
    tmp_path, stage = world
    before = stage.warehouse.df("SELECT * FROM instances ORDER BY instance_id")
    (tmp_path / "data" / "boolq" / "dev.jsonl").write_text("")  # e.g. a truncated download
    with pytest.raises(DataFormatError, match=r"boolq/dev\.jsonl: no records: the file is empty"):
        build_dataset(stage, "h1", "boolq")
    assert stage.warehouse.df("SELECT * FROM instances ORDER BY instance_id").equals(before)
    assert len(before) > 0 and _count(stage, "source_files") == 1


def test_an_absurd_max_tokens_fails_before_the_prompts_are_replaced(world):
    tmp_path, stage = world
    build_prompts(stage, "h1", "boolq", "demo-gpt2-untrained")
    before = stage.warehouse.df("SELECT request_id, prompt FROM prompts ORDER BY ALL")
    edit_file(tmp_path / "assets" / "scenarios" / "boolq.yaml", "max_tokens: 5", "max_tokens: 100000000")
    with pytest.raises(CatalogError, match="max_tokens 100000000 leaves no room for a prompt in 'demo-gpt2-untrained'"):
        build_prompts(stage, "h1", "boolq", "demo-gpt2-untrained")
    assert stage.warehouse.df("SELECT request_id, prompt FROM prompts ORDER BY ALL").equals(before)
    assert before["prompt"].str.len().min() > 20  # real prompts, not cut to a character


def test_bytes_that_are_not_utf8_name_the_file_and_line(world):
    tmp_path, stage = world
    data = tmp_path / "data" / "boolq" / "dev.jsonl"
    lines = data.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"the", b"th\xe9", 1)  # Latin-1 "é" in the third record
    data.write_bytes(b"\n".join(lines))
    before = _count(stage, "instances")
    with pytest.raises(
        DataFormatError, match=r"boolq/dev\.jsonl, record line 3: not UTF-8: byte 0xe9 at byte \d+ of the line"
    ):
        build_dataset(stage, "h1", "boolq")
    assert _count(stage, "instances") == before


def test_a_blocking_check_failure_says_what_the_check_found(tmp_path):
    """The CLI shows RunFailed's message: it carries the check's own finding, not only Dagster's count."""
    from dagster import DagsterInstance

    from holistic_dagster.definitions import build_definitions
    from holistic_dagster.defs.resources import HolisticResource
    from holistic_dagster.defs.runner import RunFailed, evaluate_suite
    from tests.helpers import free_port

    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(tmp_path / "assets" / "suites" / "h1.yaml", SUITE)
    nobody = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: every request fails
    models = write(
        tmp_path / "models.yaml",
        f"models:\n  gone: {{backend: openai, path: x, base_url: '{nobody}', max_attempts: 1, timeout_s: 5}}\n",
    )
    catalog = Catalog(tmp_path / "assets")
    resource = HolisticResource(
        warehouse_path=str(tmp_path / "w.duckdb"), catalog_dir=str(catalog.root), models_file=str(models)
    )
    with pytest.raises(RunFailed, match=r"check completions_valid on boolq/completions: 4 of 4 requests failed"):
        evaluate_suite(
            build_definitions(catalog, resource), DagsterInstance.ephemeral(), "h1", ["gone"], catalog=catalog
        )


def test_a_broken_scenario_file_blocks_only_the_suites_that_use_it(tmp_path, caplog):
    from typer.testing import CliRunner

    from holistic_dagster.cli import app
    from holistic_dagster.definitions import build_definitions
    from holistic_dagster.defs.resources import HolisticResource

    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    edit_file(tmp_path / "assets" / "scenarios" / "hellaswag.yaml", "metrics: [exact_match]", "metric: [exact_match]")
    write(tmp_path / "assets" / "suites" / "h1.yaml", SUITE)  # BoolQ only
    write(tmp_path / "assets" / "suites" / "h2.yaml", "version: h2\nscenarios:\n  hellaswag: {max_eval_instances: 2}\n")
    catalog = Catalog(tmp_path / "assets")
    resource = HolisticResource(warehouse_path=str(tmp_path / "w.duckdb"), catalog_dir=str(catalog.root))
    defs = build_definitions(catalog, resource)  # raised at import time, for every suite, before
    groups = {key.path[0] for key in defs.resolve_all_asset_keys()}
    assert "boolq" in groups and "hellaswag" not in groups
    assert "scenario hellaswag left out of the definitions" in caplog.text and "hellaswag.yaml: metric:" in caplog.text
    # the suite that uses it fails in one line naming the file and the key, no traceback
    args = ["evaluate", "--model", "demo-gpt2-untrained", "--version", "h2", "--db", str(tmp_path / "w.duckdb")]
    out = CliRunner().invoke(app, args, env={"HOLISTIC_CATALOG": str(catalog.root)})
    message = out.stderr.replace("\n", "")  # (rich wraps long lines)
    assert out.exit_code == 1 and "hellaswag.yaml: metric: Extra inputs are not permitted" in message
    assert "Traceback" not in out.stderr + out.stdout
