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
    rows = [prompt_row(r, "multiple_choice_separate_original", "t", **keys) for r in
            (_request("r2", "i1", 1), _request("r1", "i1", None), _request("r3", "i2", 0))]  # fmt: skip
    store.replace(keys, {"prompts": TABLES["prompts"].frame(rows)})
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


def _unbound_queries(store, accessors) -> tuple[int, list[str]]:
    """Calls every public query of every accessor on an empty store with arguments of its annotated types, so DuckDB
    binds its SQL against the tables the declarations made: (queries called, the ones naming a table or column that
    is not there). An accessor that says "materialize ... first" about the empty store bound its SQL first."""
    import inspect
    import typing

    called, unbound = 0, []
    for accessor in accessors:
        for name, method in inspect.getmembers(accessor, inspect.isfunction):
            if name.startswith("_") or name in ("where", "typed_rows"):
                continue
            hints, parameters = typing.get_type_hints(method), inspect.signature(method).parameters
            args = [_example(hints.get(p)) for p in list(parameters)[1:] if parameters[p].default is inspect._empty]
            called += 1
            try:
                getattr(accessor(store), name)(*args)
            except HolisticError:
                pass
            except Exception as e:  # DuckDB's binder: "Referenced column ... not found"
                unbound.append(f"{accessor.__name__}.{name}: {type(e).__name__}: {str(e).splitlines()[0]}")
    return called, unbound


def _example(annotation) -> object:
    text = str(annotation)
    return ["x"] if "list" in text else 1 if text == "<class 'int'>" else "x"


def test_every_accessor_query_binds_against_the_declared_tables(tmp_path):
    """A renamed or dropped column is found here, in seconds, wherever an accessor's SQL still names it (the
    declaration made the table; records and mypy find the Python that names it)."""
    import holistic_dagster.warehouse.access as access

    named = [getattr(access, n) for n in access.__all__]
    accessors = [a for a in named if isinstance(a, type) and issubclass(a, access.Accessor) and a.__dict__.get("table")]
    store = Warehouse(tmp_path / "empty.duckdb")
    store.ensure_schema()
    called, unbound = _unbound_queries(store, accessors)
    assert unbound == [] and called >= 60

    class Stale(access.Prompts):  # an accessor still naming a column by its old name
        def judged(self, version: str) -> object:
            return self._df("SELECT rater FROM prompts WHERE version = ?", [version])

    assert _unbound_queries(store, [Stale])[1] == [
        'Stale.judged: BinderException: Binder Error: Referenced column "rater" not found in FROM clause!'
    ]
