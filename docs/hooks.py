"""MkDocs hook: a page's `<!-- reference: NAME -->` block is generated afresh from the code
(holistic_dagster/cli/reference.py), so the reference pages cannot drift from the CLI, the DDL or the schemas; the
benchmarks page's included result files have their headings demoted under the section that includes them, so the
page's table of contents lists every section."""

from __future__ import annotations

import re
from pathlib import Path

from holistic_dagster.cli.reference import fill_references

_INCLUDE = re.compile(r'^--8<-- "([^"]+)"$', re.MULTILINE)
_HEADING = re.compile(r"^(#{1,6}) ", re.MULTILINE)


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (MkDocs' hook signature)
    markdown = fill_references(markdown, page.file.src_path)
    if page.file.src_path == "benchmarks.md":
        markdown = _INCLUDE.sub(lambda m: _demoted(m.group(1), config), markdown)
    return markdown


def _demoted(name: str, config) -> str:
    """An included result file (snippets' base paths), its headings two levels down: its title under the page's
    section (##) that includes it."""
    root = Path(config["config_file_path"]).parent
    for base in ("bench/results", "docs"):
        if (path := root / base / name).is_file():
            text = path.read_text(encoding="utf-8")
            parts = re.split(r"(^```.*?^```$)", text, flags=re.M | re.S)  # headings in code blocks stay as they are
            return "".join(
                p if p.startswith("```") else _HEADING.sub(lambda h: "#" * min(6, len(h.group(1)) + 2) + " ", p)
                for p in parts
            )
    raise ValueError(f"benchmarks.md: included file {name!r} is not in bench/results/ or docs/")
