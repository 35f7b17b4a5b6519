"""MkDocs hook: a page's `<!-- reference: NAME -->` line becomes the reference generated from the code
(holistic_dagster/cli/reference.py), so the reference pages cannot drift from the CLI, the DDL or the schemas."""

from __future__ import annotations

import re

from holistic_dagster.cli.reference import REFERENCES

_MARK = re.compile(r"^<!-- reference: (\w+) -->$", re.MULTILINE)


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (MkDocs' hook signature)
    def generate(match: re.Match) -> str:
        name = match.group(1)
        if name not in REFERENCES:
            raise ValueError(f"{page.file.src_path}: unknown reference {name!r} (known: {', '.join(REFERENCES)})")
        return REFERENCES[name]()

    return _MARK.sub(generate, markdown)
