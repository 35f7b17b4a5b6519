"""Reading the YAML files of the catalog and the deployment, and validating them against their schemas: every
error names the file and the problem (and a key's path inside it)."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from holistic_dagster.errors import CatalogError

_PARSED: dict[tuple[str, bytes], Any] = {}  # (path, its content's digest) -> the parsed YAML
# libyaml's parser where PyYAML was built with it (the wheels are): the same safe loading, 5-10x faster than the
# pure-Python one (a command reads every scenario file of the catalog to build its definitions)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """The file's YAML, parsed once per content: every stage and check reads the catalog again (a run parsed
    the same files over a hundred times), and a file edited since is parsed anew."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise CatalogError(f"{path}: file not found") from None
    key = (str(path), hashlib.blake2b(content, digest_size=16).digest())
    if key not in _PARSED:
        try:
            _PARSED[key] = yaml.load(content.decode("utf-8"), Loader=_YAML_LOADER)
        except yaml.YAMLError as e:
            raise CatalogError(f"{path}: not valid YAML: {e}") from None
        except UnicodeDecodeError as e:
            raise CatalogError(f"{path}: not UTF-8 ({e})") from None
    return copy.deepcopy(_PARSED[key])  # callers may change what they get


def validate(model: type[BaseModel], data: Any, path: Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(top)'}: {err['msg']}" for err in e.errors())
        raise CatalogError(f"{path}: {problems}") from None
