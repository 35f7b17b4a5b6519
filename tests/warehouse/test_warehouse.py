"""The DuckDB warehouse: atomic partition replacement, read-only queries, the schema's views."""

from __future__ import annotations

import pandas as pd
import pytest

from holistic_dagster.errors import HolisticError
from holistic_dagster.warehouse import ReadOnlyError, Warehouse


def _files(version: str, n: int) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"version": version, "scenario": "s", "uri": f"f{i}", "sha256": "x", "revision": "r", "num_bytes": i}
            for i in range(n)
        ]
    )


def test_replace_swaps_one_partition_and_leaves_others(tmp_path):
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
    wh.replace({"version": "v2", "scenario": "s"}, {"source_files": _files("v2", 2)})
    wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 1)})
    counts = wh.df("SELECT version, count(*) AS n FROM source_files GROUP BY version ORDER BY version")
    assert counts.to_dict("records") == [{"version": "v1", "n": 1}, {"version": "v2", "n": 2}]


def test_a_failed_write_leaves_earlier_results_and_no_partial_rows(tmp_path):
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
    bad_instances = pd.DataFrame([{"version": "v1", "scenario": "s", "instance_id": "i"}])  # NOT NULL columns missing
    with pytest.raises(Exception, match="NOT NULL"):
        wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 5), "instances": bad_instances})
    assert wh.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 3  # the earlier 3, not 5
    assert wh.df("SELECT count(*) AS n FROM instances")["n"].iat[0] == 0


def test_query_is_read_only_and_says_so(tmp_path):
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    columns, rows = wh.query("SELECT uri FROM source_files ORDER BY uri")
    assert columns == ["uri"] and rows == [("f0",), ("f1",)]
    with pytest.raises(ReadOnlyError, match="opens the warehouse read-only: statements that write"):
        wh.query("DELETE FROM source_files")
    assert wh.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 2


def test_reading_a_missing_warehouse_says_what_to_do(tmp_path):
    with pytest.raises(HolisticError, match="no warehouse at .*run `holistic demo`"):
        Warehouse(tmp_path / "absent.duckdb").df("SELECT 1")


def test_schema_has_the_documented_views(tmp_path):
    wh = Warehouse(tmp_path / "w.duckdb")
    with wh.connect():
        pass
    views = set(wh.df("SELECT view_name FROM duckdb_views() WHERE NOT internal")["view_name"])
    assert {"scores", "leaderboard", "lineage"} <= views
