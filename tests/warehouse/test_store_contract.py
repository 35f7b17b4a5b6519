"""The contract every results store keeps (warehouse.store.ResultStore), run against both: one DuckDB file
(Warehouse) and a folder of Parquet files many processes write (SharedStore). What only one of them does (the file
lock, the migration of old files; many writers, links, temporary files) is tested beside it."""

from __future__ import annotations

import pandas as pd
import pytest

from holistic_dagster.warehouse import ReadOnlyError, ResultStore, SharedStore, Warehouse, open_warehouse
from tests.warehouse.test_shared_store import _cache_rows, _files


@pytest.fixture(params=["duckdb_file", "shared_store"])
def store(request, tmp_path) -> ResultStore:
    if request.param == "duckdb_file":
        return open_warehouse(tmp_path / "w.duckdb")
    (tmp_path / "store").mkdir()
    return open_warehouse(tmp_path / "store")


def test_both_stores_are_result_stores(store):
    assert isinstance(store, ResultStore) and isinstance(store, (Warehouse, SharedStore))


def test_replace_swaps_one_partition_and_leaves_the_others(store):
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
    store.replace({"version": "v2", "scenario": "s"}, {"source_files": _files("v2", 2)})
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 1, "new")})
    counts = store.df("SELECT version, revision, count(*) AS n FROM source_files GROUP BY ALL ORDER BY version")
    assert counts.to_dict("records") == [
        {"version": "v1", "revision": "new", "n": 1},
        {"version": "v2", "revision": "r", "n": 2},
    ]


def test_a_failed_replace_leaves_earlier_rows_and_writes_no_table_of_it(store):
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
    applies = pd.DataFrame([{"version": "v1", "scenario": "s", "family": "accuracy", "applies": True, "detail": ""}])
    with pytest.raises(Exception, match="NOT NULL"):
        store.replace(
            {"version": "v1", "scenario": "s"},
            {"applicability": applies, "source_files": _files("v1", 5).assign(sha256=None)},
        )
    assert store.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 3  # the earlier 3, not 5
    assert store.df("SELECT count(*) AS n FROM applicability")["n"].iat[0] == 0


def test_upsert_keeps_the_latest_row_per_key(store):
    store.upsert("completion_cache", _cache_rows("m", ["a", "b"], "first"))
    store.upsert("completion_cache", _cache_rows("m", ["b", "c"], "second"))
    rows = store.df("SELECT request_id, text FROM completion_cache ORDER BY request_id")
    assert rows.values.tolist() == [["a", "first"], ["b", "second"], ["c", "second"]]


def test_a_users_query_reads_and_refuses_writes_saying_so(store):
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    columns, rows = store.query("SELECT uri FROM source_files ORDER BY uri")
    assert columns == ["uri"] and rows == [("f0",), ("f1",)]
    with pytest.raises(ReadOnlyError, match="read-only: statements that write"):
        store.query("DELETE FROM source_files")
    assert store.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 2
