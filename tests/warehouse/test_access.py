"""The tables' accessors (holistic_dagster/warehouse/access/) on a real DuckDB file and a real shared store: what a
stage stored comes back as records, `where` reads rows by the declaration's columns and refuses one it does not
have, and an accessor asked for what was never stored says which step to run."""

from __future__ import annotations

import pytest

from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Request
from holistic_dagster.warehouse import SharedStore, Warehouse
from holistic_dagster.warehouse.access import CompletionCache, Prompts
from holistic_dagster.warehouse.rows import prompt_row
from holistic_dagster.warehouse.tables import TABLES


def _request(rid: str, instance: str, choice: int | None) -> Request:
    return Request(request_id=rid, instance_id=instance, kind="score", prompt="Q? ", continuation="A",
                   choice_index=choice, is_null_context=False, max_tokens=0, temperature=0.0, stop=("\n",),
                   num_train_instances=0, truncated=False, num_prompt_tokens=3)  # fmt: skip


@pytest.fixture(params=["duckdb", "shared"])
def store(request, tmp_path):
    store = Warehouse(tmp_path / "wh.duckdb") if request.param == "duckdb" else SharedStore(tmp_path / "shared")
    store.ensure_schema()
    keys = {"model": "m", "version": "v1", "scenario": "s"}
    rows = [prompt_row(r, "multiple_choice_separate_original", "t") for r in
            (_request("r2", "i1", 1), _request("r1", "i1", None), _request("r3", "i2", 0))]  # fmt: skip
    store.replace(keys, {"prompts": TABLES["prompts"].frame({**keys, **row} for row in rows)})
    return store


def test_what_the_prompts_stage_stored_comes_back_as_records_in_order(store):
    prompts = Prompts(store)
    requests = prompts.requests("v1", "s", "m")
    assert [(r.instance_id, r.request_id) for r in requests] == [("i1", "r1"), ("i1", "r2"), ("i2", "r3")]
    assert requests[1] == _request("r2", "i1", 1)
    assert prompts.method("v1", "s", "m") == "multiple_choice_separate_original"
    assert list(prompts.of_partition("v1", "s", "m")["request_id"]) == ["r1", "r2", "r3"]  # no choice index first


def test_where_reads_rows_by_declared_columns_and_refuses_others(store):
    prompts = Prompts(store)
    rows = prompts.where(order_by=("request_id",), version="v1", instance_id="i1")
    assert list(rows["request_id"]) == ["r1", "r2"]
    assert prompts.where(version="v2").empty
    with pytest.raises(ValueError, match="table prompts has no column rater"):
        prompts.where(rater="x")
    with pytest.raises(ValueError, match="table prompts has no column judge"):
        prompts.where(order_by=("judge",))


def test_asked_for_what_was_never_stored_it_names_the_step(store, tmp_path):
    with pytest.raises(HolisticError, match=r"no prompts for 's', model 'other'.*materialize \[s, prompts\] first"):
        Prompts(store).method("v1", "s", "other")
    with pytest.raises(HolisticError, match=r"materialize \[s, prompts\] first"):
        Prompts(store).requests("v1", "s", "other")
    assert CompletionCache(Warehouse(tmp_path / "never.duckdb")).answers("key", ["r1"]) == {}


def test_rows_come_back_as_the_tables_typed_records(store):
    from holistic_dagster.warehouse.records import PromptsRow

    rows = Prompts(store).typed_rows(order_by=("request_id",), version="v1", instance_id="i1")
    assert [type(r) for r in rows] == [PromptsRow, PromptsRow]
    first = rows[0]
    assert (first.request_id, first.choice_index, first.is_null_context) == ("r1", None, False)
    assert first.num_prompt_tokens == 3
    assert type(rows[1].choice_index) is int and type(first.temperature) is float and first.stop == '["\\n"]'
