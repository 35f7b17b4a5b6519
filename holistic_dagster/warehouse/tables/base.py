"""A warehouse table declared once: its name, what a row is, its key and its typed columns with their meanings.
The DDL the stores apply (schema_sql), the shared store's validation tables and the generated reference
(docs/reference/warehouse.md) are all made from these declarations; `frame` builds a table's rows in its column
order and names a column that is not the table's at once, where the write would otherwise fail later."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

TYPES = ("VARCHAR", "INTEGER", "BIGINT", "DOUBLE", "BOOLEAN", "JSON", "TIMESTAMP")


@dataclass(frozen=True)
class Column:
    """One column. meaning: what a value says (None: the glossary's meaning for a column of that name); null:
    NULL is allowed; default: a SQL expression; added: a later schema version added the column, so a file made
    before it gets it on open (ALTER TABLE ... ADD COLUMN, which cannot add NOT NULL: such a column allows NULL)."""

    name: str
    type: str
    meaning: str | None = None
    null: bool = False
    default: str | None = None
    added: bool = False

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"column {self.name}: type {self.type!r} is none of {', '.join(TYPES)}")

    @property
    def definition(self) -> str:
        quoted = f'"{self.name}"' if self.name in _RESERVED else self.name
        not_null = "" if self.null or self.added else " NOT NULL"
        default = f" DEFAULT {self.default}" if self.default is not None else ""
        return f"{quoted} {self.type}{not_null}{default}"


def glossed(type: str, *names: str) -> tuple[Column, ...]:
    """NOT NULL columns of one type whose meaning is the glossary's (the keys most tables share)."""
    return tuple(Column(name, type) for name in names)


_RESERVED = {"references"}  # column names DuckDB reads as a keyword unless quoted


@dataclass(frozen=True)
class Table:
    name: str
    description: str  # what a row is
    key: tuple[str, ...]
    columns: tuple[Column, ...]

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"table {self.name}: a column is declared twice")
        if unknown := [k for k in self.key if k not in names]:
            raise ValueError(f"table {self.name}: its key names {unknown}, which it has no column for")

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def ddl(self, glossary: Mapping[str, str]) -> str:
        """CREATE TABLE IF NOT EXISTS with its comments (the description above it, each column's meaning on its
        line where it is not the glossary's), then an ALTER TABLE per added column."""
        lines = [f"-- {line}" for line in textwrap.wrap(self.description, 114)]
        lines.append(f"CREATE TABLE IF NOT EXISTS {self.name} (")
        inline = len(self.key) == 1  # a one-column key is declared on its column (as DuckDB then prints it)
        entries = [
            (f"{c.definition}{' PRIMARY KEY' if inline and c.name == self.key[0] else ''}", _comment(c, glossary))
            for c in self.columns
            if not c.added
        ]
        if not inline:
            entries.append((f"PRIMARY KEY ({', '.join(self.key)})", ""))
        for i, (definition, comment) in enumerate(entries):
            lines.append(f"    {definition}{',' if i < len(entries) - 1 else ''}{comment}")
        lines.append(");")
        lines += [
            f"ALTER TABLE {self.name} ADD COLUMN IF NOT EXISTS {c.definition};{_comment(c, glossary)}"
            for c in self.columns
            if c.added
        ]
        return "\n".join(lines)

    def records(self, frame: pd.DataFrame) -> list[Any]:
        """The frame's rows (this table's columns, as read) as the table's typed records (warehouse/records/,
        generated from this declaration): NULLs as None, timestamps as datetimes, numbers as Python's."""
        from holistic_dagster.warehouse.records import ROW_TYPES

        kind, names = ROW_TYPES[self.name], list(self.column_names)
        if missing := [n for n in names if n not in frame.columns]:
            raise ValueError(f"table {self.name}: the rows lack {', '.join(missing)}")
        nullable = [c.null or c.added for c in self.columns]
        return [
            kind(**{n: _record_value(v, null) for n, v, null in zip(names, row, nullable)})
            for row in frame[names].itertuples(index=False)
        ]

    def frame(self, rows: Iterable[Mapping[str, Any] | Any]) -> pd.DataFrame:
        """The rows (mappings, or the table's records) as a frame in the table's column order. A row may leave out a
        column that has a default or allows NULL; a row naming a column the table does not have is refused at once,
        naming it."""
        import pandas as pd

        defaults = {c.name for c in self.columns if c.default is not None}
        # a record's None in a column with a default leaves the column to its default, as a mapping leaving it out
        rows = [row if isinstance(row, Mapping) else
                {k: v for k, v in vars(row).items() if v is not None or k not in defaults} for row in rows]  # fmt: skip
        names = set(self.column_names)
        for i, row in enumerate(rows):
            if unknown := sorted(set(row) - names):
                raise ValueError(f"table {self.name} has no column {', '.join(unknown)} (row {i})")
            required = [c.name for c in self.columns if c.name not in row and not (c.null or c.added or c.default)]
            if required:
                raise ValueError(f"table {self.name}: row {i} lacks {', '.join(required)}")
        present = [c for c in self.column_names if any(c in row for row in rows)] if rows else list(self.column_names)
        return pd.DataFrame(rows, columns=present)


def _comment(column: Column, glossary: Mapping[str, str]) -> str:
    meaning = column.meaning if column.meaning is not None else glossary.get(column.name)
    if meaning is None:
        raise ValueError(f"column {column.name}: no meaning declared, and the glossary has none for its name")
    return "" if column.meaning is None else f"  -- {meaning}"


def _record_value(value: Any, nullable: bool) -> Any:
    """A value read into a frame, as a record holds it: None for NULL (a nullable column's NaN or NaT; a NOT NULL
    column's NaN is a value), Python's own scalars."""
    import pandas as pd

    if value is None or (nullable and not isinstance(value, (str, bytes)) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value.item() if hasattr(value, "item") else value
