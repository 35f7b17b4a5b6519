"""The DuckDB warehouse beyond the contract both stores keep (test_store_contract.py): its file lock, the sandbox of
a user's query, the schema's views, migrations of older files, a full disk."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from holistic_dagster.errors import HolisticError
from holistic_dagster.warehouse import SCHEMA_VERSION, ReadOnlyError, Warehouse, WarehouseWriteError
from tests.helpers import filesystem_of_its_own, fill_up, remount_read_only


def _files(version: str, n: int) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"version": version, "scenario": "s", "uri": f"f{i}", "sha256": "x", "revision": "r", "num_bytes": i}
            for i in range(n)
        ]
    )


@pytest.mark.parametrize(
    "statement",
    [
        "COPY (SELECT * FROM source_files) TO '{dir}/copied.csv'",  # writes another file
        "ATTACH '{dir}/other.duckdb' AS other (READ_WRITE)",  # writes another warehouse, past its lock
        "EXPORT DATABASE '{dir}/exported'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",  # undoing the sandbox
        "SET threads = 1",
        "PRAGMA enable_profiling",
        "CREATE SECRET leak (TYPE s3, KEY_ID 'a', SECRET 'b')",  # persisted under ~/.duckdb
        "SELECT * FROM read_csv('{dir}/other.csv')",  # other files are not the warehouse's to show
        "SELECT * FROM glob('/etc/*')",
    ],
)
def test_query_reaches_nothing_but_the_warehouse(tmp_path, statement):
    """The engine refuses (DuckDB's enable_external_access = false, lock_configuration = true), whatever the
    spelling: no keyword list."""
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    other = Warehouse(tmp_path / "other.duckdb")
    other.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 1)})
    (tmp_path / "other.csv").write_text("secret\n42\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ReadOnlyError, match="holistic query reads the warehouse only"):
        wh.query(statement.format(dir=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    assert other.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 1
    assert wh.query("SELECT count(*) FROM source_files")[1] == [(2,)]  # reading the warehouse still works


def test_query_cannot_write_into_the_warehouse_s_spill_folder(tmp_path):
    """DuckDB lets a connection with external access off still write into its own spill folder (<file>.tmp/),
    COPY TO included, when that folder exists: the sandbox has none."""
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    spill = tmp_path / "w.duckdb.tmp"
    spill.mkdir()
    for target in (spill / "copied.csv", Path("w.duckdb.tmp") / "copied.csv"):
        with pytest.raises(ReadOnlyError, match="holistic query reads the warehouse only"):
            wh.query(f"COPY (SELECT * FROM source_files) TO '{target}'")
    assert list(spill.iterdir()) == []


def _open_from_another_process(path) -> str:
    """What another process gets when it opens the file read-write with DuckDB itself (no lock of ours)."""
    code = (
        "import duckdb, sys\n"
        "try:\n    duckdb.connect(sys.argv[1]).close(); print('opened')\n"
        "except duckdb.Error as e:\n    print(e)"
    )
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout


def test_the_file_is_closed_between_connections_and_open_only_within_one(tmp_path):
    """Connections attach the file to one in-memory instance the process keeps: the file itself must still be
    closed when a connection ends, or no other process could write it."""
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
    assert _open_from_another_process(wh.path).strip() == "opened"
    with wh.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM source_files").fetchone() == (3,)
        assert "lock" in _open_from_another_process(wh.path)  # DuckDB's own file lock, held by this process
        with wh.connect(read_only=True) as inner:  # nested: the same attached file
            assert inner.execute("SELECT count(*) FROM source_files").fetchone() == (3,)
        assert con.execute("SELECT count(*) FROM source_files").fetchone() == (3,)  # the outer one still works
        with pytest.raises(HolisticError, match="cannot write inside a read-only connection"):
            wh.upsert("source_files", _files("v1", 1))
    assert _open_from_another_process(wh.path).strip() == "opened"
    wh.replace({"version": "v2", "scenario": "s"}, {"source_files": _files("v2", 1)})  # and writes again
    assert wh.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 4


def test_reading_a_missing_warehouse_says_what_to_do(tmp_path):
    with pytest.raises(HolisticError, match="no warehouse at .*run `holistic demo`"):
        Warehouse(tmp_path / "absent.duckdb").df("SELECT 1")


def test_schema_has_the_documented_views(tmp_path):
    wh = Warehouse(tmp_path / "w.duckdb")
    with wh.connect():
        pass
    views = set(wh.df("SELECT view_name FROM duckdb_views() WHERE NOT internal")["view_name"])
    assert {"scores", "leaderboard", "lineage", "request_costs"} <= views


# the two tables whose primary keys schema version 2 widened, as version 1 created them
V1_TABLES = """
CREATE TABLE schema_info (key VARCHAR PRIMARY KEY, value VARCHAR);
INSERT INTO schema_info VALUES ('schema_version', '1');
CREATE TABLE instance_scores (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, instance_id VARCHAR NOT NULL,
    metric VARCHAR NOT NULL, family VARCHAR NOT NULL, value DOUBLE NOT NULL, request_id VARCHAR NOT NULL,
    prediction VARCHAR NOT NULL, provenance_id VARCHAR NOT NULL,
    PRIMARY KEY (model, version, scenario, instance_id, metric));
CREATE TABLE scenario_metrics (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, metric VARCHAR NOT NULL,
    family VARCHAR NOT NULL, value DOUBLE, count INTEGER NOT NULL, provenance_id VARCHAR NOT NULL,
    PRIMARY KEY (model, version, scenario, metric));
INSERT INTO instance_scores VALUES ('m', 'v1', 's', 'i1', 'exact_match', 'accuracy', 1.0, 'r1', 'yes', 'p1');
INSERT INTO scenario_metrics VALUES ('m', 'v1', 's', 'exact_match', 'accuracy', 0.5, 2, 'p1');
"""


def test_a_version_1_warehouse_is_migrated_in_place(tmp_path):
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(V1_TABLES)
    wh = Warehouse(path)
    # version 2 keys include family (and perturbation): the same metric in two families now fits
    worst = {"model": "m", "version": "v1", "scenario": "s", "instance_id": "i1", "metric": "exact_match",
             "family": "robustness", "value": 0.0, "request_id": "r2", "prediction": "no", "provenance_id": "p1",
             "perturbation": "worst", "scorer": ""}  # fmt: skip
    wh.upsert("instance_scores", pd.DataFrame([worst]))
    rows = wh.df("SELECT family, perturbation, value FROM instance_scores ORDER BY family")
    assert rows.values.tolist() == [["accuracy", "", 1.0], ["robustness", "worst", 0.0]]
    metric = wh.df("SELECT metric, value, count, perturbation, note FROM scenario_metrics")
    assert metric.values.tolist() == [["exact_match", 0.5, 2, "", ""]]
    assert wh.df("SELECT value FROM schema_info WHERE key = 'schema_version'").iat[0, 0] == SCHEMA_VERSION
    tables = set(wh.df("SELECT table_name FROM information_schema.tables")["table_name"])
    assert not {t for t in tables if t.endswith("_old")}  # the old copies are gone


def test_a_version_2_warehouse_keeps_its_undelivered_alerts_and_then_every_give_up(tmp_path):
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE schema_info (key VARCHAR PRIMARY KEY, value VARCHAR);"
            "INSERT INTO schema_info VALUES ('schema_version', '2');"
            "CREATE TABLE undelivered_alerts (recorded_at TIMESTAMP NOT NULL, level VARCHAR NOT NULL, "
            "title VARCHAR NOT NULL, text VARCHAR NOT NULL, error VARCHAR NOT NULL, PRIMARY KEY (recorded_at, title));"
            "INSERT INTO undelivered_alerts VALUES ('2026-01-01 00:00:00', 'critical', 't', 'old text', 'HTTP 403')"
        )
    wh = Warehouse(path)
    again = {"recorded_at": pd.Timestamp("2026-01-01"), "level": "critical", "title": "t", "text": "new text",
             "error": "HTTP 403"}  # fmt: skip
    wh.upsert("undelivered_alerts", pd.DataFrame([again]))
    assert wh.df("SELECT text FROM undelivered_alerts ORDER BY text")["text"].tolist() == ["new text", "old text"]


def test_query_in_a_process_that_never_wrote_the_warehouse(tmp_path, monkeypatch):
    """As `holistic query` runs: a new process, nothing written by it, the schema not yet checked there."""
    import holistic_dagster.warehouse.local as warehouse_module

    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    monkeypatch.setattr(warehouse_module, "_SCHEMA_READY", set())
    assert wh.query("SELECT count(*) FROM source_files")[1] == [(2,)]


def test_a_full_disk_is_reported_as_such_and_costs_no_rows(tmp_path):
    """Reproduces issue 11: a full disk showed "cannot rollback - no transaction is active", not the cause."""
    with filesystem_of_its_own(tmp_path / "disk", size="8m") as disk:
        wh = Warehouse(disk / "w.duckdb")
        wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
        fill_up(disk, leave_bytes=64 * 1024)
        big = _files("v2", 5_000).assign(sha256=lambda f: [f"{i:064x}" for i in range(len(f))])
        with pytest.raises(WarehouseWriteError, match="No space left on device") as failed:
            wh.replace({"version": "v2", "scenario": "s"}, {"source_files": big})
        assert str(disk / "w.duckdb") in str(failed.value) and "cannot rollback" not in str(failed.value)
        counts = wh.df("SELECT version, count(*) AS n FROM source_files GROUP BY version")
        assert counts.to_dict("records") == [{"version": "v1", "n": 3}]  # the earlier rows, no partial ones
        (disk / "filler").unlink()
        wh.replace({"version": "v2", "scenario": "s"}, {"source_files": big})  # space again: the write goes in
        assert wh.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 3 + 5_000


def test_a_read_only_folder_can_still_be_read(tmp_path):
    """Reproduces issue 11: the lock file was opened for writing, so reads failed in a read-only folder."""
    from typer.testing import CliRunner

    from holistic_dagster.cli import app

    with filesystem_of_its_own(tmp_path / "ro") as folder:
        wh = Warehouse(folder / "w.duckdb")
        wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
        remount_read_only(folder)
        assert wh.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 3
        assert Warehouse(folder / "w.duckdb").query("SELECT count(*) FROM source_files") == (["count_star()"], [(3,)])
        shown = CliRunner().invoke(
            app, ["query", "SELECT count(*) AS n FROM source_files", "--csv", "--db", str(wh.path)]
        )
        assert shown.exit_code == 0 and shown.output.splitlines() == ["n", "3"], shown.output
        with pytest.raises(WarehouseWriteError, match="lock file cannot be created.*Read-only file system"):
            wh.replace({"version": "v2", "scenario": "s"}, {"source_files": _files("v2", 1)})


def test_a_file_an_earlier_release_wrote_is_read_with_this_releases_tables(tmp_path, monkeypatch):
    """A version 3 file (before efficient evaluation): the first read in a new process brings the new tables (every
    reader of scores asks partial_evaluations), and its rows are kept."""
    import holistic_dagster.warehouse.local as warehouse_module

    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    with duckdb.connect(str(wh.path)) as con:
        con.execute("DROP TABLE partial_evaluations; UPDATE schema_info SET value = '3'")
    monkeypatch.setattr(warehouse_module, "_SCHEMA_READY", set())
    assert wh.df("SELECT count(*) AS n FROM partial_evaluations")["n"].iat[0] == 0
    assert wh.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 2
    assert wh.df("SELECT value FROM schema_info WHERE key = 'schema_version'").iat[0, 0] == SCHEMA_VERSION


OLD_SAFETY_AGREEMENT = """
CREATE TABLE safety_agreement (
    model VARCHAR NOT NULL, version VARCHAR NOT NULL, scenario VARCHAR NOT NULL, rater VARCHAR NOT NULL,
    rater_identity VARCHAR NOT NULL, human_label VARCHAR NOT NULL, n INTEGER NOT NULL, agreeing INTEGER NOT NULL,
    agreement DOUBLE, kappa DOUBLE, scores BOOLEAN NOT NULL, measured_at TIMESTAMP NOT NULL,
    answers_of VARCHAR NOT NULL DEFAULT 'gpt4',
    PRIMARY KEY (model, version, scenario, rater, answers_of, human_label)
)"""


@pytest.mark.parametrize("written_by", ["5", "2"])  # 2: the table is rekeyed by two versions, once
def test_a_safety_judges_agreement_written_before_kinds_is_kept_as_measured_on_xstest(
    tmp_path, monkeypatch, written_by
):
    """Schema version 6 keys a judge's agreement by the kind of answers it was measured on: the rows an earlier
    release wrote (all measured on XSTest's labels) are kept as such, and the widened key takes a second kind."""
    import holistic_dagster.warehouse.local as warehouse_module

    wh = Warehouse(tmp_path / "w.duckdb")
    wh.ensure_schema()
    with duckdb.connect(str(wh.path)) as con:
        con.execute(f"DROP TABLE safety_agreement; {OLD_SAFETY_AGREEMENT}")
        con.execute(
            "INSERT INTO safety_agreement VALUES ('m', 's1', 'xstest', 'xstest_string_match', 'xstest_string_match', "
            "'all', 24, 20, 0.833, 0.7, true, TIMESTAMP '2026-11-01', 'gpt4')"
        )
        con.execute("UPDATE schema_info SET value = ?", [written_by])
    monkeypatch.setattr(warehouse_module, "_SCHEMA_READY", set())
    kept = wh.df(
        "SELECT judge, measured_on, answers_of, n, agreeing, agreement_low IS NULL AS no_interval FROM safety_agreement"
    )
    assert kept.to_dict("records") == [
        {"judge": "xstest_string_match", "measured_on": "xstest", "answers_of": "gpt4", "n": 24, "agreeing": 20,
         "no_interval": True}
    ]  # fmt: skip
    row = {"model": "m", "version": "s1", "scenario": "xstest", "judge": "xstest_string_match",
           "judge_identity": "xstest_string_match", "human_label": "all", "n": 10, "agreeing": 9, "agreement": 0.9,
           "kappa": 0.8, "scores": True, "measured_at": pd.Timestamp("2026-12-01"), "answers_of": "gpt4",
           "measured_on": "harm_bench", "agreement_low": 0.6, "agreement_high": 0.98}  # fmt: skip
    wh.upsert("safety_agreement", pd.DataFrame([row]))
    assert sorted(wh.df("SELECT measured_on FROM safety_agreement")["measured_on"]) == ["harm_bench", "xstest"]
    assert wh.df("SELECT value FROM schema_info WHERE key = 'schema_version'").iat[0, 0] == SCHEMA_VERSION


def _as_version_6(ddl: str) -> str:
    """The schema as version 6 wrote it: the declarations with migration 7's renames undone (so the test follows
    the declarations, and an old store is made the way today's main made it)."""
    from holistic_dagster.warehouse.migrations import MIGRATIONS

    for table, renamed in next(m for m in MIGRATIONS if m.version == "7").renamed.items():
        start = ddl.index(f"CREATE TABLE IF NOT EXISTS {table} (")
        end = ddl.index(");", start)
        block = ddl[start:end]
        for old, new in renamed.items():
            block = re.sub(rf"\b{new}\b", old, block)
        ddl = ddl[:start] + block + ddl[end:]
    return ddl


SAFETY_ROWS_V6 = {
    "safety_ratings": "INSERT INTO safety_ratings (model, version, scenario, instance_id, rater, rater_identity, "
    "score, label, judge_request_id, raw_output, error) VALUES ('m', 'v', 'xstest', 'i1', 'safety-judge', 'key-1', "
    "1.0, 'safe', 'req-1', 'SAFE', '')",
    "safety_agreement": "INSERT INTO safety_agreement (model, version, scenario, rater, rater_identity, human_label, "
    "n, agreeing, agreement, kappa, scores, measured_at, answers_of, measured_on) VALUES ('m', 'v', 'xstest', "
    "'safety-judge', 'key-1', 'all', 24, 20, 0.833, 0.7, true, TIMESTAMP '2026-12-01', 'all', 'xstest')",
}


def test_a_version_6_warehouse_keeps_its_safety_rows_under_the_name_judge(tmp_path):
    """Schema version 7 renames the safety tables' `rater` to `judge` (warehouse/migrations.py): a file today's main
    wrote (version 6) keeps every row, each judge under its new column, and takes new rows by the new names."""
    from holistic_dagster.warehouse.tables import schema_sql

    path = tmp_path / "w6.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(_as_version_6(schema_sql()))
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('schema_version', '6')")
        for insert in SAFETY_ROWS_V6.values():
            con.execute(insert)
    wh = Warehouse(path)
    ratings = wh.df("SELECT judge, judge_identity, score, label FROM safety_ratings")
    assert ratings.to_dict("records") == [
        {"judge": "safety-judge", "judge_identity": "key-1", "score": 1.0, "label": "safe"}
    ]
    agreement = wh.df("SELECT judge, judge_identity, n, agreeing, measured_on FROM safety_agreement")
    assert agreement.to_dict("records") == [
        {"judge": "safety-judge", "judge_identity": "key-1", "n": 24, "agreeing": 20, "measured_on": "xstest"}
    ]
    columns = set(wh.df("DESCRIBE safety_agreement")["column_name"])
    assert {"judge", "judge_identity"} <= columns and not {"rater", "rater_identity"} & columns
    assert wh.df("SELECT value FROM schema_info WHERE key = 'schema_version'").iat[0, 0] == SCHEMA_VERSION == "7"


def test_a_shared_store_written_by_version_6_keeps_its_safety_rows_under_the_name_judge(tmp_path):
    """The shared Parquet store: files today's main wrote with `rater` are written again with `judge` when a newer
    release opens the store; every row is kept, and reads see one column."""
    from holistic_dagster.warehouse.shared import SharedStore
    from holistic_dagster.warehouse.tables import schema_sql

    store = SharedStore(tmp_path / "store")
    store.ensure_schema()
    with duckdb.connect() as con:  # partition files as version 6 wrote them: its columns, its names
        con.execute(_as_version_6(schema_sql()))
        for table, insert in SAFETY_ROWS_V6.items():
            con.execute(insert)
            con.execute(f"COPY {table} TO '{store.path / table / ('%024x.parquet' % 1)}' (FORMAT parquet)")
    SharedStore(store.path).ensure_schema()  # a newer release opens it
    ratings = store.df("SELECT judge, judge_identity, score FROM safety_ratings")
    assert ratings.to_dict("records") == [{"judge": "safety-judge", "judge_identity": "key-1", "score": 1.0}]
    agreement = store.df("SELECT judge, n, agreeing FROM safety_agreement")
    assert agreement.to_dict("records") == [{"judge": "safety-judge", "n": 24, "agreeing": 20}]
    with duckdb.connect() as con:
        written = con.execute(
            f"SELECT name FROM parquet_schema('{store.path / 'safety_agreement' / ('%024x.parquet' % 1)}')"
        ).fetchall()
    assert "judge" in {r[0] for r in written} and "rater" not in {r[0] for r in written}
