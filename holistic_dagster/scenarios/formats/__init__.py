"""The upstream file formats a scenario can read, one module each, behind one lookup: `file_format(name)`.
Adding a format is one module with a FileFormat subclass (its reader, and its options: the scenario file's section
named after it), plus its line in FORMATS below."""

from __future__ import annotations

from holistic_dagster.errors import CatalogError
from holistic_dagster.scenarios.formats.base import FileFormat
from holistic_dagster.scenarios.formats.delimited import Csv
from holistic_dagster.scenarios.formats.hf_parquet import HfParquet
from holistic_dagster.scenarios.formats.hf_rows import HfRows
from holistic_dagster.scenarios.formats.jsonl import Jsonl
from holistic_dagster.scenarios.formats.legalbench import LegalBench
from holistic_dagster.scenarios.formats.msmarco_tsv import MsmarcoTsv
from holistic_dagster.scenarios.formats.narrativeqa import NarrativeQaCsv
from holistic_dagster.scenarios.formats.nested_json import NestedJson
from holistic_dagster.scenarios.formats.nq_documents import NqDocuments
from holistic_dagster.scenarios.formats.quac import Quac
from holistic_dagster.scenarios.formats.raft import Raft
from holistic_dagster.scenarios.formats.story import Story
from holistic_dagster.scenarios.formats.text_files import TextFiles
from holistic_dagster.scenarios.formats.trec_run import TrecRun

FORMATS: dict[str, FileFormat] = {
    f.name: f()
    for f in (
        Csv,
        Jsonl,
        HfRows,
        HfParquet,
        NestedJson,
        Story,
        TextFiles,
        TrecRun,
        Raft,
        Quac,
        LegalBench,
        NqDocuments,
        MsmarcoTsv,
        NarrativeQaCsv,
    )
}


def file_format(name: str) -> FileFormat:
    if name not in FORMATS:
        raise CatalogError(f"unknown file format {name!r} (known: {', '.join(FORMATS)})")
    return FORMATS[name]


__all__ = ["FORMATS", "FileFormat", "file_format"]
