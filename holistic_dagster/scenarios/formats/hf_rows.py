"""hf_rows: a Hugging Face dataset's split exported as JSON lines, one or more files, in the row order HELM reads it
after `load_dataset(...).sort(<field>).shuffle(seed=<seed>)`: the whole split sorted by a field (stable, as Arrow's
sort), then permuted by NumPy's `default_rng(seed).permutation` (what `Dataset.shuffle` does). HELM then filters
that order (MATH: by subject and level), so a file's records are read in the split's order, not the file's.

A record's place is `order <n> (line <k>)`: its row in that order (what the draw and the examples follow) and its
line in its file. HELM's order is that of the whole split: `rows` says how many it has upstream, and a split here
of another size (a subject missing) is read in the order its own rows give, with a warning that it is not HELM's."""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import numpy as np

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Strict
from holistic_dagster.scenarios.formats.base import FileFormat, Records
from holistic_dagster.scenarios.formats.jsonl import read_jsonl

_log = logging.getLogger(__name__)


class HfRowsSpec(Strict):
    split_files: str  # glob of every file of the split, {split} substituted ("*_{split}.jsonl": one per subject)
    sort: str | None = None  # the field the split is sorted by before it is shuffled
    shuffle_seed: int | None = None  # Dataset.shuffle(seed=...); None: not shuffled
    rows: dict[str, int] = {}  # the split's size upstream (a permutation of another size is another order)


class HfRows(FileFormat):
    name = "hf_rows"
    options = HfRowsSpec
    section_hint = "`hf_rows: {split_files: '*_{split}.jsonl', sort: problem, shuffle_seed: 42}`"

    def records(self, path, spec, root, split, subset) -> Records:
        options: HfRowsSpec = spec.hf_rows
        files = tuple(sorted(root.glob(options.split_files.format(split=split))))
        stamp = tuple((p, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
        if options.shuffle_seed is not None and split in options.rows:
            _warn_if_partial(spec.name, split, stamp, options.sort, options.shuffle_seed, options.rows[split])
        for row, (file, where, record) in enumerate(_split_rows(stamp, options.sort, options.shuffle_seed), 1):
            if file == path:
                yield f"order {row} ({where})", record


@lru_cache(maxsize=8)  # warned once per split as it is here
def _warn_if_partial(scenario: str, split: str, files: tuple, sort: str | None, seed: int, expected: int) -> None:
    found = len(_split_rows(files, sort, seed))
    if found != expected:
        _log.warning(
            "%s: its %s split has %d rows here, %d upstream: HELM shuffles the whole split, so this order is not "
            "HELM's (the same files give the same order on both sides, as in bench/helm_parity.py)",
            scenario, split, found, expected,
        )  # fmt: skip


@lru_cache(maxsize=8)  # a subset per subject and level reads the same split many times
def _split_rows(files: tuple[tuple[Path, int, int], ...], sort: str | None, seed: int | None):
    rows = [(path, where, record) for path, _, _ in files for where, record in read_jsonl(path)]
    if sort is not None:
        for path, where, record in rows:
            if not isinstance(record.get(sort), str):
                raise DataFormatError(
                    path, where, f"the split is sorted by {sort!r}: a text field, got {record.get(sort)!r}"
                )
        rows.sort(key=lambda row: row[2][sort])  # stable, and str order is UTF-8 byte order, as Arrow sorts
    if seed is not None:
        rows = [rows[i] for i in np.random.default_rng(seed).permutation(len(rows))]
    return tuple(rows)
