"""Sandboxed Jinja2: dataset text is always passed as variables, never pasted into template source."""

from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from holistic_dagster.errors import CatalogError


def _env(loader: jinja2.BaseLoader | None = None) -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        loader=loader, undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
    )
    env.filters["regex_replace"] = lambda text, pattern, replacement="": re.sub(pattern, replacement, text)
    env.filters["shuffled"] = shuffled
    env.filters["rotated"] = rotated
    env.filters["sentence"] = sentence
    env.filters["codepoint"] = ord
    return env


def shuffled(items, key: str) -> list:
    """The items in an order fixed by `key` (e.g. the question): TruthfulQA lists its best answer first, and a
    multiple-choice prompt should not always have the answer at A. The same key always gives the same order."""
    items = list(items)
    random.Random(str(key)).shuffle(items)
    return items


def rotated(items, k: int) -> list:
    """The items rotated left by k (modulo their number): HELM's TruthfulQA puts its references in this order,
    with k the code point of the best answer's first character."""
    items = list(items)
    k = k % len(items) if items else 0
    return items[k:] + items[:k]


def sentence(text: str) -> str:
    """The text stripped and ending in a full stop (HELM's TruthfulQA answers)."""
    text = text.strip()
    return text if text.endswith(".") else text + "."


_STRING_ENV = _env()


@lru_cache(maxsize=256)
def string_template(source: str) -> jinja2.Template:
    return _STRING_ENV.from_string(source)


@lru_cache(maxsize=256)
def expression(source: str):
    """A compiled expression (e.g. `[A, B, C, D]`) that evaluates to a Python value."""
    return _STRING_ENV.compile_expression(source, undefined_to_none=False)


@lru_cache(maxsize=32)
def _file_env(directory: str) -> ImmutableSandboxedEnvironment:
    return _env(jinja2.FileSystemLoader(directory))


def file_template(directory: Path, name: str) -> jinja2.Template:
    try:
        return _file_env(str(directory)).get_template(name)
    except jinja2.TemplateNotFound:
        raise CatalogError(f"template {name!r} not found in {directory}") from None
    except jinja2.TemplateSyntaxError as e:
        raise CatalogError(f"{directory / name}, line {e.lineno}: template syntax error: {e.message}") from None


def render_file(directory: Path, name: str, variables: dict[str, Any]) -> str:
    template = file_template(directory, name)
    try:
        return template.render(**variables)
    except jinja2.UndefinedError as e:
        raise CatalogError(
            f"{directory / name}: {e.message} (variables available: {', '.join(sorted(variables))})"
        ) from None
