"""story: CNN/DailyMail .story files, one article each (a split's pattern is a glob)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holistic_dagster.scenarios.formats.base import FileFormat, not_utf8, source_file


class Story(FileFormat):
    name = "story"
    globbed = True

    def file_records(self, spec, root, pattern, paths):
        for path, where, record in read_stories(paths):
            yield path, where, record, source_file(spec, path)


def read_stories(paths: list[Path]) -> Iterator[tuple[Path, str, dict[str, Any]]]:
    """CNN/DailyMail .story files (one article each): the article's paragraphs, then each highlight after a
    line `@highlight`. Records {id, article, highlights} with highlights joined by newlines, as the upstream
    Hugging Face builder does."""
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise not_utf8(path) from None
        article, *highlights = text.split("@highlight")
        paragraphs = [p.strip() for p in article.strip().split("\n\n") if p.strip()]
        yield (
            path,
            "file",
            {
                "id": path.stem,
                "article": "\n\n".join(paragraphs),
                "highlights": "\n".join(h.strip() for h in highlights if h.strip()),
            },
        )
