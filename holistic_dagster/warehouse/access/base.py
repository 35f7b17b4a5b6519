"""What every table's accessor is: a class bound to a store and to its table's declaration (tables/), which owns that
table's SQL; `where` reads whole rows by equal columns, whose names the declaration is asked for first, and
`typed_rows` the same rows as the table's typed records."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

import pandas as pd

from holistic_dagster.warehouse.store import ResultStore
from holistic_dagster.warehouse.tables import Table

ORIGINAL_ID = "coalesce(nullif(original_instance_id, ''), instance_id)"  # an instance's original (itself if one)


def among(scenario: str, instance_id: str) -> str:
    """SQL: the row's (scenario, instance id) is among a list parameter of "scenario<US>id" keys (pairs in one list
    parameter; the unit separator occurs in neither)."""
    return f"{scenario} || chr(31) || {instance_id} IN (SELECT unnest(?::VARCHAR[]))"


R = TypeVar("R")  # the table's row record (warehouse/records/)


class Accessor(Generic[R]):
    """One table's reads, on a store."""

    table: ClassVar[Table]

    def __init__(self, store: ResultStore) -> None:
        self.store = store

    def _df(self, sql: str, params: list[Any]) -> pd.DataFrame:
        return self.store.df(sql, params)

    def where(self, order_by: tuple[str, ...] = (), **equal: Any) -> pd.DataFrame:
        """Every column of the rows whose columns equal the values given, in `order_by`'s order; a column the
        table's declaration does not have is refused, naming the table."""
        if unknown := [c for c in (*equal, *order_by) if c not in self.table.column_names]:
            raise ValueError(f"table {self.table.name} has no column {', '.join(unknown)}")
        sql = f"SELECT * FROM {self.table.name}"
        if equal:
            sql += " WHERE " + " AND ".join(f'"{c}" = ?' for c in equal)
        if order_by:
            sql += " ORDER BY " + ", ".join(f'"{c}"' for c in order_by)
        return self._df(sql, list(equal.values()))

    def typed_rows(self, order_by: tuple[str, ...] = (), **equal: Any) -> list[R]:
        """where()'s rows as the table's typed records (warehouse/records/)."""
        rows: list[R] = self.table.records(self.where(order_by, **equal))
        return rows
