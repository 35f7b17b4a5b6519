"""Nothing is registered by a hidden step: a metrics module that declares metrics or scorers is imported by the
metrics package (its list in metrics/__init__.py), every adapter method class is in METHODS and every file format
class in FORMATS. A module added without its line fails here, named, instead of silently never being found."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from holistic_dagster.adaptation.methods import METHODS
from holistic_dagster.adaptation.methods.base import AdapterMethod
from holistic_dagster.scenarios.formats import FORMATS
from holistic_dagster.scenarios.formats.base import FileFormat
from holistic_dagster.settings import REPO_ROOT

PACKAGE = REPO_ROOT / "holistic_dagster"
REGISTERING = ("declare", "reference_metric", "scorer")  # the registry's functions a module calls at import


def _calls_at_import(path: Path) -> set[str]:
    """The registry functions a module calls at its top level (as decorators too)."""
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        parts = node.decorator_list if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [node]
        for call in (c for part in parts for c in ast.walk(part)):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in REGISTERING:
                found.add(call.func.id)
    return found


def test_every_module_that_declares_metrics_is_imported_by_the_metrics_package():
    declaring = {
        p.stem
        for p in (PACKAGE / "metrics").glob("*.py")
        if p.stem not in ("__init__", "registry") and _calls_at_import(p)
    }
    assert {"accuracy", "calibration", "efficiency"} <= declaring  # the search finds what it looks for
    # a fresh interpreter: what importing the package alone brings (other tests may have imported more here)
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", "import json, sys, holistic_dagster.metrics; print(json.dumps([n.rsplit('.', 1)[1] "
             "for n in sys.modules if n.startswith('holistic_dagster.metrics.')]))"],
            capture_output=True, text=True, check=True, cwd=REPO_ROOT,
        ).stdout
    )  # fmt: skip
    missing = sorted(declaring - set(loaded))
    assert not missing, (
        f"metrics modules that declare metrics but are never imported, so their metrics are never found: {missing}; "
        "add each to the import list in holistic_dagster/metrics/__init__.py"
    )


def _subclasses(folder: Path, base: type) -> dict[str, type]:
    """Every concrete subclass of `base` defined in the folder's modules, by class name."""
    import importlib
    import inspect

    found = {}
    for path in folder.glob("*.py"):
        if path.stem in ("__init__", "base"):
            continue
        module = importlib.import_module(".".join(path.relative_to(REPO_ROOT).with_suffix("").parts))
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, base) and value.__module__ == module.__name__:
                if not inspect.isabstract(value):
                    found[name] = value
    return found


def test_every_adapter_method_and_file_format_is_registered():
    methods = _subclasses(PACKAGE / "adaptation" / "methods", AdapterMethod)
    registered = {type(m) for m in METHODS.values()}
    missing = sorted(n for n, c in methods.items() if c not in registered and not c.__subclasses__())
    assert len(methods) >= 5 and not missing, (
        f"adapter methods not in METHODS (holistic_dagster/adaptation/methods/__init__.py): {missing}"
    )
    formats = _subclasses(PACKAGE / "scenarios" / "formats", FileFormat)
    registered = {type(f) for f in FORMATS.values()}
    missing = sorted(n for n, c in formats.items() if c not in registered and not c.__subclasses__())
    assert len(formats) >= 5 and not missing, (
        f"file formats not in FORMATS (holistic_dagster/scenarios/formats/__init__.py): {missing}"
    )
