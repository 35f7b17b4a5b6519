"""Word lists and mappings the perturbations and metrics read (YAML files beside this module, each citing its
provenance at the top)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

import yaml


@cache
def load(name: str) -> Any:
    """The parsed contents of `<name>.yaml` in this folder."""
    return yaml.safe_load(files("holistic_dagster.wordlists").joinpath(f"{name}.yaml").read_text(encoding="utf-8"))
