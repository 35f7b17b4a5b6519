"""text_files: one text per file (IMDB's aclImdb folders; a split's pattern is a glob), the folder one source."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holistic_dagster.records import SourceFile, sha256_json
from holistic_dagster.scenarios.formats.base import FileFormat, not_utf8


class TextFiles(FileFormat):
    name = "text_files"
    globbed = True

    def file_records(self, spec, root, pattern, paths):
        files = list(read_text_files(root, paths))
        # one source for the folder: its files' checksums, hashed together
        source = SourceFile(
            uri=str(root / pattern),
            sha256=sha256_json([(where, digest) for where, _, digest, _ in files]),
            revision=spec.source.revision,
            num_bytes=sum(size for *_, size in files),
        )
        for where, record, _, _ in files:
            yield root / where, where, record, source


def read_text_files(root: Path, paths: list[Path]) -> Iterator[tuple[str, dict[str, Any], str, int]]:
    """One text per file (IMDB's aclImdb/<split>/<pos|neg>/<id>_<rating>.txt), in the order given: records {text,
    dir (the parent folder's name), name (the file name without suffix), file (the path relative to the data
    folder)}, yielded as (that relative path, record, the file's sha256, its size), each file read once."""
    for path in paths:
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise not_utf8(path) from None
        relative = path.relative_to(root).as_posix()
        record = {"text": text, "dir": path.parent.name, "name": path.stem, "file": relative}
        yield relative, record, hashlib.sha256(raw).hexdigest(), len(raw)
