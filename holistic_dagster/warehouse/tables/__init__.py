"""The warehouse's tables, each declared once in Python (one module per group: core, efficient, summaries,
operations, arena, shadow, judging; tables/base.py says what a declaration holds), and the schema made from them:
the tables' DDL, then the views over them (views.sql, SQL as written), then the glossary of column names."""

from __future__ import annotations

from importlib.resources import files

from holistic_dagster.warehouse.tables import arena, core, efficient, judging, operations, shadow, summaries
from holistic_dagster.warehouse.tables.base import Column, Table
from holistic_dagster.warehouse.tables.glossary import GLOSSARY

__all__ = ["GLOSSARY", "GROUPS", "TABLES", "Column", "Table", "schema_sql"]

# group name (its module's) -> its tables, in the order they are declared
GROUPS: dict[str, tuple[Table, ...]] = {
    g.__name__.rsplit(".", 1)[-1]: tuple(t for t in vars(g).values() if isinstance(t, Table))
    for g in (core, efficient, summaries, operations, arena, shadow, judging)
}
TABLES: dict[str, Table] = {t.name: t for tables in GROUPS.values() for t in tables}

_HEADER = """\
-- holistic-dagster results warehouse (DuckDB), made from the declarations in holistic_dagster/warehouse/tables/.
-- One row per thing; every row carries the keys of the rows it came from, so any score joins back to its
-- completion, prompt, instance and source file (view `lineage`). Partition keys: version (suite version),
-- scenario, model. Each stage replaces its partition atomically."""

_GLOSSARY_INTRO = """\
-- Columns: what a column name means in every table and view that has it, unless its own line's comment says
-- otherwise (the reference docs/reference/warehouse.md is generated from the declarations; a test fails on a column
-- that has no meaning here or on its line)."""


def schema_sql() -> str:
    """The whole schema: every table (CREATE TABLE IF NOT EXISTS, and ALTER TABLE for the columns later versions
    added), then the views, then the glossary as comments (which the reference reads)."""
    views = files("holistic_dagster.warehouse").joinpath("views.sql").read_text()
    glossary = "\n".join(f"-- column {name}: {meaning}" for name, meaning in GLOSSARY.items())
    tables = "\n\n".join(t.ddl(GLOSSARY) for t in TABLES.values())
    return f"{_HEADER}\n\n{tables}\n\n{views.strip()}\n\n{_GLOSSARY_INTRO}\n{glossary}\n"
