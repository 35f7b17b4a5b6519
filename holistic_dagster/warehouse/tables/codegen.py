"""The typed row records (warehouse/records/), generated from the tables' declarations: one frozen dataclass per
table, a field per column typed as the column is (NULL allowed: `| None`), one module per group of tables.
`python -m holistic_dagster.cli.reference` writes them; a test fails on a committed module that is not what this
generates, so a declaration's change reaches the records' types (and mypy, which reads them)."""

from __future__ import annotations

import keyword
import textwrap
from pathlib import Path

from holistic_dagster.warehouse.tables import GROUPS, TABLES
from holistic_dagster.warehouse.tables.base import Column, Table

RECORDS = Path(__file__).resolve().parents[1] / "records"
PYTHON_TYPES = {"VARCHAR": "str", "JSON": "str", "INTEGER": "int", "BIGINT": "int", "DOUBLE": "float",
                "BOOLEAN": "bool", "TIMESTAMP": "datetime"}  # fmt: skip
_NOTICE = (
    "Generated from the declarations in warehouse/tables/ by `python -m holistic_dagster.cli.reference`: do not edit."
)


def record_name(table: Table) -> str:
    return "".join(part.capitalize() for part in table.name.split("_")) + "Row"


def _field(column: Column) -> str:
    if keyword.iskeyword(column.name):
        raise ValueError(f"column {column.name}: a Python keyword cannot name a record's field")
    kind = PYTHON_TYPES[column.type]
    return f"    {column.name}: {kind}{' | None' if column.null or column.added else ''}"


def _docstring(text: str, indent: str = "") -> list[str]:
    """A docstring as ruff formats it, wrapped to the line length (120)."""
    lines = textwrap.wrap(f'"""{text}"""', 120 - len(indent), break_on_hyphens=False)
    return [indent + line for line in lines]


def _imports(module: str, names: list[str]) -> list[str]:
    return [f"from {module} import (", *(f"    {n}," for n in names), ")"]


def group_module(group: str) -> str:
    """The records of one group's tables (tables/<group>.py)."""
    tables = GROUPS[group]
    uses_time = any(c.type == "TIMESTAMP" for t in tables for c in t.columns)
    lines = [*_docstring(f"Row records of the tables in warehouse/tables/{group}.py. {_NOTICE}"), "",
             "from __future__ import annotations", "", "from dataclasses import dataclass"]  # fmt: skip
    lines += ["from datetime import datetime"] if uses_time else []
    for table in tables:
        lines += ["", "", "@dataclass(frozen=True, kw_only=True)", f"class {record_name(table)}:"]
        lines += [*_docstring(f"A row of `{table.name}`: {table.description}", "    "), ""]
        lines += [_field(c) for c in table.columns]
    return "\n".join(lines) + "\n"


def package_module() -> str:
    """records/__init__.py: every record type, and ROW_TYPES (table name -> its record type)."""
    lines = [*_docstring(f"Typed row records of every warehouse table (Table.records maps a frame to them). {_NOTICE}"),
             "", "from __future__ import annotations", "", "from typing import Any", ""]  # fmt: skip
    for group in sorted(GROUPS):
        lines += _imports(f"holistic_dagster.warehouse.records.{group}", sorted(record_name(t) for t in GROUPS[group]))
    lines += ["", "ROW_TYPES: dict[str, type[Any]] = {"]
    lines += [f'    "{t.name}": {record_name(t)},' for t in TABLES.values()]
    exported = ["ROW_TYPES", *sorted(record_name(t) for t in TABLES.values())]
    lines += ["}", "", "__all__ = [", *(f'    "{n}",' for n in exported), "]", ""]
    return "\n".join(lines)


def generated() -> dict[Path, str]:
    """{path: the text it must hold} for every records module."""
    return {RECORDS / "__init__.py": package_module(), **{RECORDS / f"{g}.py": group_module(g) for g in GROUPS}}


def write_records() -> list[Path]:
    """Writes the records modules that are not what the declarations generate; returns those it wrote."""
    written = []
    for path, text in generated().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written
