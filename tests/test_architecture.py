"""The package's shape (issue 32): rooms layered as pyproject.toml's import-linter contracts say (nothing imports a
room above it, Dagster only in defs/), no two files importing each other in a circle, the package root holding only
the vocabulary, the environment, the errors and the entry point, and no module past 450 lines but those named here."""

from __future__ import annotations

import ast
import graphlib
import re
import subprocess
import sys
from pathlib import Path

import grimp

from holistic_dagster.settings import REPO_ROOT

PACKAGE = REPO_ROOT / "holistic_dagster"
ROOT_MODULES = {"__init__.py", "records.py", "errors.py", "settings.py", "definitions.py"}
MAX_LINES = 450
LONGER = {}  # module -> why it may be longer (none today)


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--config", str(REPO_ROOT / "pyproject.toml")], capture_output=True,
                            text=True, cwd=REPO_ROOT, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def import_circle(package: str) -> list[str]:
    """A circle of imports between the package's files (a package's __init__ counts as a file), or []."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=True, cache_dir=None)
    imports = {
        m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith(package)} for m in graph.modules
    }
    try:
        graphlib.TopologicalSorter(imports).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return []


def test_no_two_files_import_each_other_in_a_circle():
    assert import_circle("holistic_dagster") == []


def test_a_circle_through_a_package_init_is_found(tmp_path, monkeypatch):
    # the shape the metric registry had: a package's __init__ imports its submodule, which imports the __init__
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("from circled import part\nNAMES = []\n")
    (package / "part.py").write_text("from circled import NAMES\n")
    (package / "free.py").write_text("import json\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert set(import_circle("circled")) == {"circled", "circled.part"}


def test_the_package_root_holds_only_the_vocabulary_environment_errors_and_entry_point():
    assert {p.name for p in PACKAGE.glob("*.py")} == ROOT_MODULES


def test_no_module_is_longer_than_450_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert set(long) <= set(LONGER), long


def test_no_function_is_longer_than_80_lines():
    long = {
        f"{p.relative_to(PACKAGE)}:{node.name}": node.end_lineno - node.lineno + 1
        for p in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80
    }
    assert not long, long


def test_the_cli_loads_dagster_only_when_it_runs_something():
    """`holistic evaluate` with nothing to run answers from the warehouse without Dagster (seconds of imports): the
    CLI, the freshness check and the ledger of in-process runs import none of it."""
    code = (
        "import sys\n"
        "import holistic_dagster.cli, holistic_dagster.automation.freshness, holistic_dagster.defs.ledger\n"
        "print(sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout[-2000:] + result.stderr[-2000:]


# the tables a room reads with its own SQL, as it owns them (its accessor is the room itself)
OWNED = {"step_inputs": "automation/freshness.py"}
# modules that name a table at run time in their SQL: freshness's fingerprint of what a step wrote (the count and
# an order-free hash of any table's rows, whatever their columns)
TABLE_NAMED_AT_RUN_TIME = {"automation/freshness.py"}


def modules_with_sql_on(tables: tuple[str, ...], outside: tuple[str, ...] = ("warehouse",)) -> set[str]:
    """Modules outside the rooms named whose SQL reads (FROM, JOIN) one of the tables."""
    # SQL's keywords are written in capitals in this code (prose says "from completions" too)
    pattern = re.compile(rf"\b(?:FROM|JOIN)\s+(?:{'|'.join(tables)})\b")
    return {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] not in outside and pattern.search(p.read_text(encoding="utf-8"))
    }


def test_every_table_is_read_through_its_accessor():
    """Outside the warehouse no module writes SQL on a table (warehouse/access/ holds it), but the room that owns
    one reading its own; so a renamed column is its declaration, its accessor and its migration."""
    from holistic_dagster.warehouse.tables import TABLES

    for table in TABLES:
        found = modules_with_sql_on((table,))
        assert found <= {OWNED.get(table)}, f"SQL on {table} outside its accessor: {sorted(found)}"
    assert modules_with_sql_on((r"\{",)) == TABLE_NAMED_AT_RUN_TIME  # FROM {table}: an f-string's table


def test_sql_on_a_table_outside_its_accessor_is_found(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    (package / "stages").mkdir(parents=True)
    (package / "warehouse").mkdir()
    (package / "stages" / "reads.py").write_text('SQL = "SELECT text FROM completions WHERE model = ?"\n')
    (package / "stages" / "other.py").write_text('SQL = "SELECT * FROM completions_by_judge"\n')
    (package / "warehouse" / "access.py").write_text('SQL = "SELECT text FROM completions"\n')
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    assert modules_with_sql_on(("completions",)) == {"stages/reads.py"}
