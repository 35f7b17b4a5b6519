"""What a file format is: how one split's upstream file(s) become records (dicts of fields) that a scenario's
`instance:` expressions map to Instances, and the options its section of the scenario file takes. A bad record is
a DataFormatError naming the file, the record and the problem."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Reference, SourceFile, Strict, sha256_file

if TYPE_CHECKING:
    from holistic_dagster.scenarios.spec import ScenarioSpec

Records = Iterator[tuple[str, dict[str, Any]]]  # (where in the file, e.g. "row 3", the record's fields)


class FileFormat:
    """One upstream file format. A subclass reads one split's file (`records`) or, when `globbed`, the files its
    pattern matches, one record each (`file_records`)."""

    name: ClassVar[str]
    options: ClassVar[type[Strict] | None] = None  # the scenario file's section named after the format
    default_options: ClassVar[Strict | None] = None  # the section when the file leaves it out (None: required)
    section_hint: ClassVar[str] = ""  # how the section looks, for the error that asks for it
    method: ClassVar[str | None] = None  # the adapter method the format goes with (and only it)
    globbed: ClassVar[bool] = False  # a split's pattern is a glob: one record per file

    def records(self, path: Path, spec: ScenarioSpec, root: Path, split: str, subset: str) -> Records:
        raise NotImplementedError

    def file_records(
        self, spec: ScenarioSpec, root: Path, pattern: str, paths: list[Path]
    ) -> Iterator[tuple[Path, str, dict[str, Any], SourceFile]]:
        """(path, where, record, its source) per file of a globbed split (`paths`: the files `pattern` matches)."""
        raise NotImplementedError

    def companions(self, path: Path) -> list[Path]:
        """The files read beside a split's file (NarrativeQA's summaries beside qaps.csv): recorded with the
        dataset's source files, so that a change to one of them runs the datasets again."""
        return []

    def references(
        self, record: dict[str, Any], spec: ScenarioSpec, references: tuple[Reference, ...], metadata: dict[str, Any]
    ) -> tuple[tuple[Reference, ...], dict[str, Any]]:
        """The instance's references and metadata where the format itself says what they are (a ranking run's
        candidates); by default those the scenario's expressions gave."""
        return references, metadata


def source_file(spec: ScenarioSpec, path: Path) -> SourceFile:
    return SourceFile(
        uri=str(path), sha256=sha256_file(path), revision=spec.source.revision, num_bytes=path.stat().st_size
    )


def open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


# what reading a .gz file raises when it is cut off (EOFError) or none at all (BadGzipFile, zlib.error)
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


def not_gzip(path: Path, where: str | None, error: Exception) -> DataFormatError:
    """The error for a .gz file that is cut off or is no gzip file, naming the file and the last line read."""
    if isinstance(error, EOFError):
        return DataFormatError(path, where, "the gzip file is cut off (download it again)")
    return DataFormatError(path, where, f"not a gzip file ({error}); download it again")


def not_utf8(path: Path) -> DataFormatError:
    """The error for a file that is not UTF-8, naming the first line and column that is not."""
    raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    for n, line in enumerate(raw.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            return DataFormatError(
                path,
                f"line {n}",
                f"not UTF-8: byte 0x{line[e.start]:02x} at byte {e.start + 1} of the line (convert the file to UTF-8)",
            )
    return DataFormatError(path, None, "not UTF-8 (convert the file to UTF-8)")
