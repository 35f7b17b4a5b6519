"""csv: a delimited text file (CSV, TSV; gzip when it ends in .gz), one record per row; its section `csv:` names the
columns and the delimiter."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Strict
from holistic_dagster.scenarios.formats.base import FileFormat, Records, open_text


class CsvSpec(Strict):
    header: bool = True
    columns: tuple[str, ...] = ()  # names for a header-less file; required columns for one with a header
    delimiter: str = Field(",", min_length=1, max_length=1)  # "\t" for TSV


class Csv(FileFormat):
    name = "csv"
    options = CsvSpec
    default_options = CsvSpec()

    def records(self, path, spec, root, split, subset) -> Records:
        return read_csv(path, spec.csv)


def read_csv(path: Path, spec: CsvSpec) -> Iterator[tuple[str, dict[str, str]]]:
    """Yields ("row N", record). Quoted fields may hold commas and newlines."""
    with open_text(path) as f:
        reader = csv.reader(f, delimiter=spec.delimiter)
        if spec.header:
            try:
                header = next(reader)
            except StopIteration:
                raise DataFormatError(path, None, "empty file (expected a header row)") from None
            missing = [c for c in spec.columns if c not in header]
            if missing:
                raise DataFormatError(path, "header", f"missing column(s) {missing}; found {header}")
            names = header
        else:
            names = list(spec.columns)
        try:
            for n, row in enumerate(reader, start=1):
                if not row:
                    continue
                if len(row) != len(names):
                    raise DataFormatError(
                        path, f"row {n}", f"expected {len(names)} fields ({', '.join(names)}), found {len(row)}"
                    )
                yield f"row {n}", dict(zip(names, row))
        except csv.Error as e:
            raise DataFormatError(path, f"line {reader.line_num}", f"malformed CSV: {e}") from None
