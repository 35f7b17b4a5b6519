"""The warehouse's tables declared once (holistic_dagster/warehouse/tables/): the DDL made from the declarations
creates exactly the declared columns, types, NULLs, defaults and keys; a declaration that cannot be right is refused
where it is written; rows are built in a table's column order and a column it does not have is named at once."""

from __future__ import annotations

import duckdb
import pytest

from holistic_dagster.warehouse import TABLES as RESULT_TABLES
from holistic_dagster.warehouse.tables import GLOSSARY, TABLES, Column, Table, schema_sql


@pytest.fixture(scope="module")
def catalog():
    con = duckdb.connect()
    con.execute(schema_sql())
    yield con
    con.close()


def test_the_schema_creates_every_declared_table_as_declared(catalog):
    created = {r[0] for r in catalog.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert created == set(TABLES) and set(RESULT_TABLES) == set(TABLES) - {"schema_info"}
    for table in TABLES.values():
        columns = catalog.execute(
            "SELECT column_name, data_type, is_nullable, column_default FROM duckdb_columns() WHERE table_name = ? "
            "ORDER BY column_index",
            [table.name],
        ).fetchall()
        # the declared order: the columns a later version added come last, as ALTER TABLE puts them in an old file
        declared = [c for c in table.columns if not c.added] + [c for c in table.columns if c.added]
        assert [(n, t) for n, t, _, _ in columns] == [(c.name, c.type) for c in declared], table.name
        for (name, _, nullable, default), c in zip(columns, declared):
            assert nullable == (c.null or c.added), (table.name, name)
            assert (default is None) == (c.default is None), (table.name, name)
        key = catalog.execute(
            "SELECT constraint_column_names FROM duckdb_constraints() WHERE table_name = ? "
            "AND constraint_type = 'PRIMARY KEY'",
            [table.name],
        ).fetchone()
        assert tuple(key[0]) == table.key, table.name


def test_every_column_means_something_and_every_table_says_what_a_row_is():
    for table in TABLES.values():
        assert table.description and table.key
        for c in table.columns:
            assert c.meaning or GLOSSARY.get(c.name), f"{table.name}.{c.name} has no meaning"


def test_a_declaration_that_cannot_be_right_is_refused_where_it_is_written():
    with pytest.raises(ValueError, match="type 'STRING' is none of"):
        Column("name", "STRING")
    with pytest.raises(ValueError, match="table t: a column is declared twice"):
        Table("t", "a test table", ("a",), (Column("a", "VARCHAR"), Column("a", "INTEGER")))
    with pytest.raises(ValueError, match=r"its key names \['b'\], which it has no column for"):
        Table("t", "a test table", ("a", "b"), (Column("a", "VARCHAR"),))
    lonely = Table("t", "a test table", ("judge",), (Column("judge", "VARCHAR"), Column("mystery", "INTEGER")))
    with pytest.raises(ValueError, match="column mystery: no meaning declared"):
        lonely.ddl(GLOSSARY)


def test_a_renamed_column_is_one_declaration_and_its_ddl_follows():
    table = Table(
        "t",
        "a test table",
        ("judge", "n"),
        (
            Column("judge", "VARCHAR"),
            Column("n", "INTEGER"),
            Column("note", "VARCHAR", "why", default="''"),
            Column("later", "DOUBLE", "added by a later version", added=True),
        ),
    )
    ddl = table.ddl(GLOSSARY)
    assert "CREATE TABLE IF NOT EXISTS t (" in ddl and "PRIMARY KEY (judge, n)" in ddl
    assert "note VARCHAR NOT NULL DEFAULT '',  -- why" in ddl
    assert "ALTER TABLE t ADD COLUMN IF NOT EXISTS later DOUBLE;  -- added by a later version" in ddl
    with duckdb.connect() as con:
        con.execute(ddl)
        con.execute("INSERT INTO t (judge, n) VALUES ('human', 1)")
        assert con.execute("SELECT judge, n, note, later FROM t").fetchall() == [("human", 1, "", None)]


def test_rows_are_built_in_the_tables_column_order_and_a_stray_column_is_named():
    win_rates = TABLES["win_rates"]
    frame = win_rates.frame(
        [{"num_columns": 3, "model": "m", "family": "accuracy", "version": "v1", "mean_win_rate": 0.5}]
    )
    assert list(frame.columns) == ["version", "family", "model", "mean_win_rate", "num_columns"]
    with pytest.raises(ValueError, match="table win_rates has no column rater \\(row 1\\)"):
        win_rates.frame([frame.iloc[0].to_dict(), {**frame.iloc[0].to_dict(), "rater": "x"}])
    with pytest.raises(ValueError, match="table win_rates: row 0 lacks num_columns"):
        win_rates.frame([{"version": "v1", "family": "accuracy", "model": "m", "mean_win_rate": 0.5}])
    assert list(win_rates.frame([]).columns) == list(win_rates.column_names)


def test_the_migrations_agree_with_the_declarations(monkeypatch):
    from holistic_dagster.warehouse import migrations

    assert migrations.check(TABLES) == []
    assert migrations.renames(migrations.pending("6"), "safety_agreement") == {
        "rater": "judge",
        "rater_identity": "judge_identity",
    }
    assert migrations.pending(None) == [] and migrations.pending(migrations.SCHEMA_VERSION) == []
    # a rename whose new name the declarations lack, or whose old name they still have, is named
    wrong = migrations.Migration("7", "a test", renamed={"win_rates": {"family": "domain", "model": "num_columns"}})
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS[:-1], wrong))
    assert migrations.check(TABLES) == [
        "version 7: win_rates.domain (was family) is not declared",
        "version 7: win_rates.family was renamed to domain but is still declared",
        "version 7: win_rates.model was renamed to num_columns but is still declared",
    ]


def test_the_committed_row_records_are_what_the_declarations_generate():
    """warehouse/records/ is generated (python -m holistic_dagster.cli.reference rewrites it): stale after a
    declaration's change until regenerated."""
    from holistic_dagster.warehouse.tables.codegen import generated

    stale = [str(path) for path, text in generated().items() if not path.exists() or path.read_text() != text]
    assert not stale, f"regenerate with .venv/bin/python -m holistic_dagster.cli.reference: {stale}"


def test_every_table_has_a_record_typed_as_its_columns():
    import dataclasses
    import typing

    from holistic_dagster.warehouse import records
    from holistic_dagster.warehouse.tables.codegen import PYTHON_TYPES

    assert set(records.ROW_TYPES) == set(TABLES)
    for name, table in TABLES.items():
        hints = typing.get_type_hints(records.ROW_TYPES[name])
        assert [f.name for f in dataclasses.fields(records.ROW_TYPES[name])] == list(table.column_names)
        for c in table.columns:
            kind = {"str": str, "int": int, "float": float, "bool": bool}.get(PYTHON_TYPES[c.type], hints[c.name])
            assert hints[c.name] == (kind | None if c.null or c.added else kind), (name, c.name)


def test_a_frame_that_lacks_a_column_is_not_taken_for_records():
    import pandas as pd

    with pytest.raises(ValueError, match="table votes: the rows lack"):
        TABLES["votes"].records(pd.DataFrame({"version": ["v"]}))


def test_a_record_leaves_a_column_with_a_default_to_its_default():
    from holistic_dagster.warehouse.records import ROW_TYPES

    values = {c.name: "x" for c in TABLES["instances"].columns}
    values.update(num_correct_references=1, is_multiple_choice=False, perturbation=None, metadata=None)
    frame = TABLES["instances"].frame([ROW_TYPES["instances"](**values)])
    assert "perturbation" not in frame.columns and "metadata" not in frame.columns  # the DDL's '' and '{}' apply
    assert frame["num_correct_references"].tolist() == [1]
