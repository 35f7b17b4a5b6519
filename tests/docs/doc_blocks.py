"""The documentation's code blocks, as the tests run them. A fenced shell block in README.md or docs/ is marked by
an HTML comment on the line above it:

    <!-- test: fast -->          run by the fast tier
    <!-- test: slow -->          run by the slow tier, after the demo, page by page in the site's order
    <!-- test: skip: why -->     not run; why says what it needs that the tests cannot have, and what covers it

and a YAML block marked `<!-- check: models.yaml -->` is validated as a model registry. Blocks run with bash -e
in a scratch copy of the repository (its own assets/, resources/ and data/; the code, .venv and scripts linked),
so a command that writes a suite file or registers a model changes the copy only."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from holistic_dagster.settings import REPO_ROOT

MARK = re.compile(r"^<!-- (test|check): (\S+?)(?::\s*(.*?))? -->$")
FENCE = re.compile(r"^```(\w*)\s*$")
SHELL = {"bash", "sh", "shell", "console"}
TIERS = {"fast", "slow", "skip"}
COPIED = ("assets", "resources")  # a command may write into these: the scratch copy gets its own
NOT_LINKED = {*COPIED, "data", ".git", "site"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, from 1
    language: str
    kind: str  # test | check | "" (unmarked)
    tier: str  # fast | slow | skip | the checked file's name
    reason: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT) if self.path.is_relative_to(REPO_ROOT) else self.path}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file with the marker above each (indented fences included)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i].strip())
        if not fence:
            i += 1
            continue
        start, indent = i, len(lines[i]) - len(lines[i].lstrip())
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:])
            i += 1
        mark = MARK.match(lines[start - 1].strip()) if start else None
        kind, tier, reason = (mark.group(1), mark.group(2), mark.group(3) or "") if mark else ("", "", "")
        found.append(Block(path, start + 1, fence.group(1), kind, tier, reason, "\n".join(body) + "\n"))
        i += 1
    return found


def site_pages() -> list[Path]:
    """README.md and the site's pages in the order of mkdocs.yml's nav, README right after the demo's page (its
    commands read the demo's results); pages outside the nav last."""

    def walk(nav) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in walk(value)]
        return [p for item in nav for p in walk(item)]

    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())
    docs = REPO_ROOT / config.get("docs_dir", "docs")
    ordered = [docs / page for page in walk(config["nav"])]
    ordered += sorted(set(docs.rglob("*.md")) - set(ordered))
    demo = ordered.index(docs / "getting-started" / "demo.md")
    return [*ordered[: demo + 1], REPO_ROOT / "README.md", *ordered[demo + 1 :]]


def shell_blocks(pages: list[Path]) -> list[Block]:
    return [b for page in pages for b in blocks(page) if b.language in SHELL]


def workspace(root: Path, shared_data: Path) -> tuple[Path, dict[str, str]]:
    """A scratch copy of the repository at root/main (../shared beside it, as in a clone) and the environment
    the documented commands run in: offline, its own data/, catalog and deployment files."""
    # the copy's scripts/ensure-env must find the install up to date: were it to install, pip would write the copy's
    # path into the shared .venv's scripts. So any install happens here first, from the repository itself
    subprocess.run([str(REPO_ROOT / "scripts" / "ensure-env")], check=True, capture_output=True, timeout=1800)
    main = root / "main"
    main.mkdir(parents=True)
    (root / "shared").symlink_to(shared_data.parent)
    for entry in REPO_ROOT.iterdir():
        if entry.name in COPIED:
            shutil.copytree(entry, main / entry.name)
        elif entry.name not in NOT_LINKED:
            (main / entry.name).symlink_to(entry)
    # no HOLISTIC_DATA_DIR, as in a user's new shell: the data folders are found as theirs are (../shared/data
    # beside the checkout, or what the demo remembered); the scratch copy's own home, catalog and deployment files.
    # The session's model cache is kept (HOLISTIC_MODEL_CACHE): the weights converted and built there are the same
    # files the copy would make again (the first user of each makes it, as the demo would)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLISTIC_", "DAGSTER_", "PYTEST_"))}
    if "HOLISTIC_MODEL_CACHE" in os.environ:
        env["HOLISTIC_MODEL_CACHE"] = os.environ["HOLISTIC_MODEL_CACHE"]
    env.update(
        HOLISTIC_HOME=str(main / "data"),
        HOLISTIC_CATALOG=str(main / "assets"),
        HOLISTIC_RESOURCES=str(main / "resources"),
        HOLISTIC_OFFLINE="1",
        GX_ANALYTICS_ENABLED="false",
        NO_MKDOCS_2_WARNING="1",
    )
    return main, env


def run_block(block: Block, cwd: Path, env: dict[str, str], timeout: float = 1200) -> str:
    """Runs a shell block with bash -e -o pipefail; fails naming the page, the line and the output's tail."""
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise AssertionError(f"{block.where}: the documented command failed (exit {done.returncode}):\n{tail}")
    return done.stdout
