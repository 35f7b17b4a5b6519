"""The documentation stays true: README.md at most 200 lines, the site builds with --strict (no broken link or
reference), every shell block carries a marker and the marked ones run (fast here, slow in the slow tier), the
YAML examples validate, and the generated references cover every verb, table, column and variable."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from holistic_dagster.cli.reference import REFERENCES, cli_reference, configuration_reference
from holistic_dagster.config.models import load_models
from holistic_dagster.settings import ENVIRONMENT, REPO_ROOT
from holistic_dagster.warehouse.documentation import documented_schema
from holistic_dagster.warehouse.local import schema_sql
from tests.docs.doc_blocks import TIERS, blocks, run_block, shell_blocks, site_pages, workspace


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):  # every link into docs/ names a file that exists
        assert (REPO_ROOT / target).is_file(), target
    assert "docs/getting-started/first-model.md#vllm" in readme  # a model served by vLLM: one click away


def test_every_shell_block_says_how_it_is_tested():
    found = shell_blocks(site_pages())
    assert len(found) > 20
    for block in found:
        assert block.kind == "test" and block.tier in TIERS, f"{block.where}: a shell block without <!-- test: ... -->"
        if block.tier == "skip":
            assert len(block.reason) > 15, f"{block.where}: say why it is not run and what covers it"
    assert {b.tier for b in found} == TIERS


def test_the_fast_blocks_run(tmp_path, shared_data):
    fast = [b for b in shell_blocks(site_pages()) if b.tier == "fast"]
    assert fast
    cwd, env = workspace(tmp_path, shared_data)
    for block in fast:
        run_block(block, cwd, env, timeout=120)


def test_a_broken_command_in_a_page_fails_the_test(tmp_path, shared_data):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n<!-- test: fast -->\n```bash\n.venv/bin/holistic leaderbord --all\n```\n")
    (block,) = shell_blocks([page])
    assert (block.tier, block.line) == ("fast", 4)
    cwd, env = workspace(tmp_path / "ws", shared_data)
    with pytest.raises(AssertionError, match=r"page.md:4: the documented command failed \(exit 2\)"):
        run_block(block, cwd, env, timeout=120)


def test_the_model_registry_examples_are_valid(tmp_path):
    examples = [b for page in site_pages() for b in blocks(page) if b.kind == "check"]
    assert len(examples) >= 5 and {b.tier for b in examples} == {"models.yaml"}
    for block in examples:
        path = tmp_path / "models.yaml"
        path.write_text(block.code)
        assert load_models(path), block.where  # raises naming the key on any error
    llamacpp = next(b for b in examples if "backend: llamacpp" in b.code)  # the check can fail: slots on tgi
    path.write_text(llamacpp.code.replace("backend: llamacpp", "backend: tgi"))
    with pytest.raises(Exception, match="slots, threads: not a setting of a tgi model"):
        load_models(path)


def test_the_site_builds_strictly(tmp_path):
    if not (REPO_ROOT / "docs" / "images" / "report.png").exists():
        pytest.fail("docs/images/report.png is missing: scripts/demo, then .venv/bin/python scripts/docs_pictures.py")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    warehouse = (tmp_path / "site" / "reference" / "warehouse" / "index.html").read_text()
    assert "instance_scores" in warehouse and "the request whose completion carries the prediction" in warehouse
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "holistic import-helm" in cli and "--max-eval-instances" in cli


def test_the_references_cover_every_verb_table_column_and_variable():
    import typer

    from holistic_dagster.cli import app

    cli = cli_reference()
    for verb in typer.main.get_command(app).commands:
        assert f"## `holistic {verb}`" in cli
    tables = documented_schema()  # raises naming any column without a meaning
    created = set(re.findall(r"CREATE (?:TABLE IF NOT EXISTS|OR REPLACE VIEW) (\w+)", schema_sql()))
    assert {t.name for t in tables} == created
    assert all(c.meaning for t in tables for c in t.columns)
    config = configuration_reference()
    for heading in (
        "resources/models.yaml",
        "resources/backends.yaml",
        "resources/alerts.yaml",
        "resources/shadow.yaml",
    ):
        assert f"## {heading}" in config
    assert "| `prompt_logprobs` | bool |" in config
    undocumented = [line for line in config.splitlines() if re.match(r"^\| `\w+` \|.*\|\s*\|$", line)]
    assert undocumented == [], "a configuration key without a comment saying what it means"
    assert set(REFERENCES) == {"cli", "warehouse", "configuration", "environment"}


def test_every_environment_variable_the_code_reads_is_documented():
    named = set()
    for path in [*(REPO_ROOT / "holistic_dagster").rglob("*.py"), *(REPO_ROOT / "resources").glob("*.yaml")]:
        named |= set(re.findall(r"\b(HOLISTIC_[A-Z_]+|DAGSTER_PG_[A-Z]+|DAGSTER_HOME)\b", path.read_text()))
    documented = {v.name for v in ENVIRONMENT}
    assert named - documented == set()
    assert "HOLISTIC_WAREHOUSE" in named


@pytest.mark.slow
def test_the_documented_commands_run(tmp_path, shared_data):
    """Every `test: slow` block, page by page in the site's order, in one scratch copy: the demo first (capped at
    one instance per scenario and subset), then the commands that read its results."""
    cwd, env = workspace(tmp_path, shared_data)
    env["HOLISTIC_MAX_EVAL_INSTANCES"] = "1"
    ran = 0
    for block in shell_blocks(site_pages()):
        if block.tier == "slow":
            run_block(block, cwd, env)
            ran += 1
    assert ran >= 10


def test_the_committed_references_are_what_the_code_generates():
    """The reference pages carry their generated text (GitHub shows it): stale after a change to the CLI, the DDL,
    a schema or the variables until `.venv/bin/python -m holistic_dagster.cli.reference` rewrites them."""
    from holistic_dagster.cli.reference import fill_references

    pages = sorted((REPO_ROOT / "docs").rglob("*.md"))
    marked = [p for p in pages if "<!-- reference: " in p.read_text(encoding="utf-8")]
    assert len(marked) == len(REFERENCES)
    for page in marked:
        text = page.read_text(encoding="utf-8")
        assert "<!-- end of reference: " in text, f"{page}: a bare mark, nothing committed"
        assert fill_references(text, str(page)) == text, (
            f"{page}: stale; run .venv/bin/python -m holistic_dagster.cli.reference"
        )


def test_the_benchmarks_page_lists_every_section_in_its_contents(tmp_path):
    """Its included result files' headings sit under the section that includes them (the hook demotes them): one
    H1, the page's own."""
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO_ROOT, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"}, check=True, capture_output=True,
    )  # fmt: skip
    html = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    assert html.count("<h1") == 1
    sections = re.findall(r'<h2 id="([^"]+)"', html)
    assert len(sections) >= 9
    contents = html.split('class="md-nav md-nav--secondary"')[1].split('class="md-content"')[0]
    assert all(f'href="#{s}"' in contents for s in sections)


def test_the_readme_counts_the_documented_commands_as_they_are():
    from collections import Counter

    tiers = Counter(b.tier for b in shell_blocks(site_pages()))
    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    claim = (
        f"{tiers['fast'] + tiers['slow']} are run by the tests ({tiers['fast']} fast, {tiers['slow']} slow), "
        f"{tiers['skip']} are not"
    )
    assert claim in readme, f"README.md should say: {claim}"
