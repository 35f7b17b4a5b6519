"""csv: a delimited text file (CSV, TSV; gzip when it ends in .gz), one record per row; its section `csv:` names the
columns and the delimiter."""

from __future__ import annotations

import csv
import io
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from holistic_dagster.errors import DataFormatError
from holistic_dagster.records import Strict
from holistic_dagster.scenarios.formats.base import FileFormat, Records, open_text


class CsvSpec(Strict):
    # the first row names the columns
    header: bool = True
    columns: tuple[str, ...] = ()  # names for a header-less file; required columns for one with a header
    delimiter: str = Field(",", min_length=1, max_length=1)  # "\t" for TSV
    # a split's file may be a zip archive: the member to read, and the password of an encrypted one (GPQA's
    # authors publish theirs with the archive, so that the questions are not published in plain text: the member
    # is decrypted in memory, never written out)
    zip_member: str = ""
    # the file is read in memory from a password-protected zip (GPQA)
    zip_password: str = ""


class Csv(FileFormat):
    name = "csv"
    options = CsvSpec
    default_options = CsvSpec()

    def records(self, path, spec, root, split, subset) -> Records:
        return read_csv(path, spec.csv)


def read_csv(path: Path, spec: CsvSpec) -> Iterator[tuple[str, dict[str, str]]]:
    """Yields ("row N", record). Quoted fields may hold commas and newlines."""
    with _open(path, spec) as f:
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


def _open(path: Path, spec: CsvSpec):
    """The file as text: a zip archive's member (decrypted in memory when it has a password), else the file."""
    if path.suffix != ".zip":
        return open_text(path)
    if not spec.zip_member:
        raise DataFormatError(path, None, "a zip archive: name the member to read (csv: zip_member)")
    try:
        archive = zipfile.ZipFile(path)
        raw = archive.read(spec.zip_member, pwd=spec.zip_password.encode() or None)
    except KeyError:
        raise DataFormatError(
            path, spec.zip_member, f"no such member (the archive holds {archive.namelist()})"
        ) from None
    except RuntimeError as e:  # zipfile: "Bad password for file", "File ... is encrypted, password required"
        problem = "wrong password" if spec.zip_password else "encrypted: the scenario file gives no zip_password"
        raise DataFormatError(path, spec.zip_member, f"{problem} ({e})") from None
    except (zipfile.BadZipFile, zlib.error) as e:
        raise DataFormatError(path, spec.zip_member, f"not a readable zip archive: {e}") from None
    return io.StringIO(raw.decode("utf-8"), newline="")
