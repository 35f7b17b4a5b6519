"""Sandboxed Jinja2: dataset text is always passed as variables, never pasted into template source.

Rendering is bounded (a catalog file is edited by users, and a template is code): at most MAX_RENDER_CHARS of
output, MAX_LOOP_ITEMS items drawn from `range()` per rendering, MAX_RENDER_S seconds while it loops, and no
`*` or `**` that would build a value beyond those limits. Past a limit the rendering stops with
TemplateLimitError, which the callers report naming the file and the template.
"""

from __future__ import annotations

import contextvars
import operator
import random
import re
import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from holistic_dagster.adaptation.boxed import boxed_answer
from holistic_dagster.errors import CatalogError

MAX_RENDER_CHARS = 2_000_000
MAX_LOOP_ITEMS = 1_000_000
MAX_RENDER_S = 10.0


class TemplateLimitError(jinja2.TemplateError):
    """A rendering that went past one of the limits above (a runaway template)."""


class _Budget:
    def __init__(self) -> None:
        self.items, self.deadline = 0, time.perf_counter() + MAX_RENDER_S

    def take(self, n: int = 1) -> None:
        self.items += n
        if self.items > MAX_LOOP_ITEMS:
            raise TemplateLimitError(f"loops over more than {MAX_LOOP_ITEMS:,} items of range()")
        if self.items % 4096 == 0 and time.perf_counter() > self.deadline:
            raise TemplateLimitError(f"still looping after {MAX_RENDER_S:g} s")


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("template_budget", default=None)


def _counted_range(*args: int) -> Iterator[int]:
    """The sandbox's range (at most 100,000 items), each item drawn from the rendering's budget."""
    budget = _BUDGET.get() or _Budget()
    for i in safe_range(*args):
        budget.take()
        yield i


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context, op: str, left, right):
        if op == "*" and isinstance(left, int) and isinstance(right, (str, list, tuple)):
            left, right = right, left
        if op == "*" and isinstance(left, (str, list, tuple)) and isinstance(right, int):
            if len(left) * right > MAX_RENDER_CHARS:
                raise TemplateLimitError(f"a repetition of {len(left) * right:,} items")
        if op == "**" and isinstance(right, int) and abs(right) > 1000:
            raise TemplateLimitError(f"a power of {right}")
        return {"*": operator.mul, "**": operator.pow}[op](left, right)


def render(template: jinja2.Template, variables: dict[str, Any]) -> str:
    """The template rendered within the limits (TemplateLimitError past one)."""
    budget = _Budget()
    token = _BUDGET.set(budget)
    try:
        out, size = [], 0
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > MAX_RENDER_CHARS:
                raise TemplateLimitError(f"renders more than {MAX_RENDER_CHARS:,} characters")
            out.append(chunk)
        return "".join(out)
    finally:
        _BUDGET.reset(token)


def _fail(message: str):
    """Rejects the record being read (the loader names the file and the record)."""
    raise ValueError(message)


def _env(loader: jinja2.BaseLoader | None = None) -> ImmutableSandboxedEnvironment:
    env = _BoundedEnvironment(
        loader=loader, undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
    )
    env.globals["range"] = _counted_range
    env.globals["fail"] = _fail  # a scenario's expression rejects a record: fail('BehaviorID is empty')
    env.filters["regex_replace"] = lambda text, pattern, replacement="": re.sub(pattern, replacement, text)
    env.filters["shuffled"] = shuffled
    env.filters["rotated"] = rotated
    env.filters["sentence"] = sentence
    env.filters["codepoint"] = ord
    env.filters["boxed_answer"] = boxed_answer  # None when the solution boxes no answer
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


def evaluate_expression(source: str, variables: dict[str, Any]) -> Any:
    """expression(source) evaluated within the loop limits."""
    token = _BUDGET.set(_Budget())
    try:
        return expression(source)(**variables)
    finally:
        _BUDGET.reset(token)


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
        return render(template, variables)
    except jinja2.UndefinedError as e:
        raise CatalogError(
            f"{directory / name}: {e.message} (variables available: {', '.join(sorted(variables))})"
        ) from None
    except TemplateLimitError as e:
        raise CatalogError(f"{directory / name}: stopped, the template {e}") from None
