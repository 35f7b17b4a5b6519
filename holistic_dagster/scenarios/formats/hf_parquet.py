"""hf_parquet: a Hugging Face dataset's Parquet shards as the Hub stores them
(`<config>/<split>-NNNNN-of-NNNNN.parquet`; a split's pattern is a glob), read with DuckDB. Where a pattern matches
several Hugging Face splits (WMT14's evaluated validation and test) they are read in `order`, each split's shards in
name order. A split may be read as a HELM scenario reads it after `load_dataset` (`read:`): shuffled as
`Dataset.shuffle(seed)` does (NumPy's `default_rng(seed).permutation` of its rows), its first rows, the first row of
each value of a field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Strict
from holistic_dagster.scenarios.formats.base import FileFormat, source_file


class SplitRead(Strict):
    shuffle_seed: int | None = None  # Dataset.shuffle(seed=...) over the split's rows
    head: int | None = None  # then its first rows (HELM's WMT14 few-shot pool: 20,000)
    unique: str | None = None  # then the first row of each value of this field, a dotted path ("translation.en")


class HfParquetSpec(Strict):
    # the splits, in the order HELM reads them
    order: tuple[str, ...] = ("train", "validation", "test")
    read: dict[str, SplitRead] = {}  # Hugging Face split name -> how HELM reads it


class HfParquet(FileFormat):
    name = "hf_parquet"
    options = HfParquetSpec
    default_options = HfParquetSpec()
    globbed = True

    def file_records(self, spec, root, pattern, paths):
        options: HfParquetSpec = spec.hf_parquet
        by_split: dict[str, list[Path]] = {}
        for path in paths:
            by_split.setdefault(path.name.split("-", 1)[0], []).append(path)
        unknown = sorted(set(by_split) - set(options.order))
        if unknown:
            raise DataFormatError(root / pattern, None, f"shards of split(s) {unknown}, not in order {options.order}")
        for split in [s for s in options.order if s in by_split]:
            shards = sorted(by_split[split])
            sources = {p: source_file(spec, p) for p in shards}
            for path, where, record in read_split(shards, split, options.read.get(split, SplitRead())):
                yield path, where, record, sources[path]


def read_split(shards: list[Path], split: str, how: SplitRead) -> Iterator[tuple[Path, str, dict[str, Any]]]:
    """(shard, "row N" or "order N (row K)", record with hf_split and hf_row: its row in the split) per row kept."""
    con = duckdb.connect()
    try:
        counts = [con.execute("SELECT count(*) FROM read_parquet(?)", [str(p)]).fetchone()[0] for p in shards]
    except duckdb.Error as e:
        raise DataFormatError(shards[0], None, f"not a readable Parquet file: {e}") from None
    offsets = np.cumsum([0, *counts])
    rows = np.arange(offsets[-1])
    if how.shuffle_seed is not None:
        rows = np.random.default_rng(how.shuffle_seed).permutation(int(offsets[-1]))
    if how.head is not None:
        rows = rows[: how.head]
    fetched: dict[int, dict[str, Any]] = {}
    for k, path in enumerate(shards):
        local = rows[(rows >= offsets[k]) & (rows < offsets[k + 1])] - offsets[k]
        if not len(local):
            continue
        con.execute("CREATE OR REPLACE TEMP TABLE wanted AS SELECT unnest(?::BIGINT[]) AS r", [local.tolist()])
        result = con.execute(
            "SELECT * FROM read_parquet(?, file_row_number = true) WHERE file_row_number IN (SELECT r FROM wanted)",
            [str(path)],
        )
        names = [d[0] for d in result.description]
        for values in result.fetchall():
            record = dict(zip(names, values))
            fetched[int(offsets[k]) + record.pop("file_row_number")] = record
    seen = set()
    shuffled = how.shuffle_seed is not None
    for n, row in enumerate(rows.tolist(), start=1):
        k = int(np.searchsorted(offsets, row, side="right")) - 1
        record = {**fetched[row], "hf_split": split, "hf_row": row}
        if how.unique is not None:
            value = _field(record, how.unique, shards[k])
            if value in seen:
                continue
            seen.add(value)
        local = row - int(offsets[k])
        yield shards[k], f"order {n} (row {local + 1})" if shuffled else f"row {local + 1}", record


def _field(record: dict[str, Any], dotted: str, path: Path) -> Any:
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise DataFormatError(path, None, f"no field {dotted!r} in its rows (columns: {', '.join(record)})")
        value = value[part]
    return value
