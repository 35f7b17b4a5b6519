"""The schema (warehouse/tables/ and views.sql, as schema_sql makes it) as documentation: every table and view
with its description and every column with its type (as DuckDB reads the DDL) and meaning (the comment on its line,
else the glossary's `-- column name:` line). docs/reference/warehouse.md is generated from this, so the reference
cannot drift from the DDL."""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

from holistic_dagster.errors import CatalogError
from holistic_dagster.warehouse.local import schema_sql

_CREATE = re.compile(r"\s*CREATE (?:TABLE IF NOT EXISTS|OR REPLACE VIEW) (\w+)")
_ALTER = re.compile(r"\s*ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+)")
_GLOSSARY = re.compile(r"-- column (\w+): (.+)")
_TOP_LEVEL_COMMA = re.compile(r",(?![^()]*\))")


@dataclass(frozen=True)
class ColumnDoc:
    name: str
    type: str
    meaning: str


@dataclass(frozen=True)
class TableDoc:
    name: str
    kind: str  # table | view
    description: str
    columns: tuple[ColumnDoc, ...]


def _comments(sql: str) -> tuple[dict[str, str], dict[tuple[str, str], str], dict[str, str]]:
    """(table -> the comment block above its CREATE, (table, column) -> its line's comment, glossary)."""
    described: dict[str, str] = {}
    inline: dict[tuple[str, str], str] = {}
    glossary: dict[str, str] = {}
    block: list[str] = []
    table = None
    for line in sql.splitlines():
        code, _, comment = line.partition("--")
        comment = comment.strip()
        if entry := _GLOSSARY.match(line.strip()):
            glossary[entry.group(1)] = entry.group(2).strip()
            continue
        if created := _CREATE.match(line):
            table = created.group(1)
            described.setdefault(table, " ".join(block))
            block = []
            continue
        if altered := _ALTER.match(line):
            if comment:
                inline[altered.group(1), altered.group(2)] = comment
            continue
        if not code.strip():
            block = [*block, comment] if comment else []
            continue
        block = []
        if table and comment:  # the comment names every column declared on its line
            for part in _TOP_LEVEL_COMMA.split(code):
                words = part.split()
                if words and words[0].strip('"').isidentifier() and words[0] not in ("PRIMARY", "UNIQUE"):
                    inline[(table, words[0].strip('"'))] = comment
        if line.startswith(")") or line.rstrip().endswith(";"):
            table = None
    return described, inline, glossary


def documented_schema() -> list[TableDoc]:
    """Every table and view of the schema in its order. Raises naming every column without a meaning."""
    sql = schema_sql()
    con = duckdb.connect()
    try:
        con.execute(sql)
        rows = con.execute(
            "SELECT c.table_name, c.column_name, c.data_type, v.view_name IS NOT NULL FROM duckdb_columns() c "
            "LEFT JOIN duckdb_views() v ON v.view_name = c.table_name AND v.schema_name = c.schema_name "
            "WHERE c.database_name = current_database() AND c.schema_name = 'main' ORDER BY c.column_index"
        ).fetchall()
    finally:
        con.close()
    described, inline, glossary = _comments(sql)
    columns: dict[str, list[ColumnDoc]] = {}
    kinds: dict[str, str] = {}
    missing = []
    for table, column, type_, is_view in rows:
        meaning = inline.get((table, column)) or glossary.get(column, "")
        if not meaning:
            missing.append(f"{table}.{column}")
        columns.setdefault(table, []).append(ColumnDoc(column, type_, meaning))
        kinds[table] = "view" if is_view else "table"
    missing += [f"{name} (its description: a comment above its CREATE)" for name in kinds if not described[name]]
    if missing:
        raise CatalogError(
            f"the warehouse schema: no meaning for {', '.join(missing)}: declare it (a table's column in "
            "warehouse/tables/, a view's in views.sql) or give the name one in warehouse/tables/glossary.py"
        )
    return [TableDoc(name, kinds[name], described[name], tuple(columns[name])) for name in described if name in kinds]
