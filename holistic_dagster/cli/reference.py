"""The documentation's reference pages, generated from the code so that they cannot drift: the CLI (from the
`holistic` command itself), the warehouse (from the tables' declarations and views.sql), the configuration files (from
their schemas) and the environment variables (settings.ENVIRONMENT). A page's `<!-- reference: NAME -->` block
holds REFERENCES[NAME]() as committed, so the page reads on GitHub too; `python -m holistic_dagster.cli.reference`
rewrites stale blocks, a test fails on one, and the docs site's hook (docs/hooks.py) generates them afresh."""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from holistic_dagster.settings import ENVIRONMENT, REPO_ROOT


def _cell(text: object) -> str:
    """Text for one cell of a Markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def cli_reference() -> str:
    """Every verb of `holistic` with its usage, its help and each argument and option, from the Typer app."""
    import typer

    from holistic_dagster.cli import app

    group = typer.main.get_command(app)
    root = group.context_class(group, info_name="holistic")
    out = [
        _cell(group.help),
        "",
        "Every verb takes `--help`. `holistic --debug VERB ...` shows an unexpected error's traceback.",
        "",
    ]
    for name, command, context in _verbs(group, root):
        out += [f"## `holistic {name}`", "", f"`holistic {name} {' '.join(command.collect_usage_pieces(context))}`", ""]
        out += [inspect.cleandoc(command.help or ""), ""]
        rows = []
        for param in command.params:
            record = param.get_help_record(context) if param.param_type_name == "option" else None
            if record is None:
                name_and_type, text = f"{param.name.upper()} (argument)", getattr(param, "help", "") or ""
                text += "  [required]" if param.required else ""
            else:
                name_and_type, text = record
            rows.append(f"| `{_cell(name_and_type)}` | {_cell(text)} |")
        if rows:
            out += ["| argument or option | meaning |", "|---|---|", *rows, ""]
    return "\n".join(out)


def _verbs(group, parent, prefix: str = ""):
    """(name, command, context) for every verb, a group's verbs after the group itself (`efficient validate`)."""
    for name, command in group.commands.items():
        context = command.context_class(command, info_name=name, parent=parent)
        yield prefix + name, command, context
        if hasattr(command, "commands"):
            yield from _verbs(command, context, f"{prefix}{name} ")


def warehouse_reference() -> str:
    """Every table and view of the warehouse with its description and each column's type and meaning."""
    from holistic_dagster.warehouse.documentation import documented_schema

    tables = documented_schema()
    out = ["| name | kind | what it holds |", "|---|---|---|"]
    out += [f"| [`{t.name}`](#{t.name}) | {t.kind} | {_cell(t.description)} |" for t in tables]
    for table in tables:
        out += ["", f"## `{table.name}` {{#{table.name}}}", "", _cell(table.description), ""]
        out += ["| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{c.name}` | {c.type} | {_cell(c.meaning)} |" for c in table.columns]
    return "\n".join(out)


def environment_reference() -> str:
    out = ["| variable | default | meaning |", "|---|---|---|"]
    out += [f"| `{v.name}` | {_cell(v.default)} | {_cell(v.meaning)} |" for v in ENVIRONMENT]
    return "\n".join(out)


# ---- configuration files, from their pydantic schemas

_FIELD = re.compile(r"^(\s+)(\w+)\s*:")


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """A schema's field -> its description: the Field's own, else the `#` comments on the lines just above the
    field and at the end of its line in the class's source (the schemas are documented that way)."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls in (BaseModel,):
            continue
        try:
            lines, _ = inspect.getsourcelines(cls)
        except (OSError, TypeError):
            continue  # made by create_model: its own fields are described below
        block: list[str] = []
        indent = None
        for line in lines[1:]:
            stripped = line.strip()
            if stripped.startswith("#"):
                block.append(stripped.lstrip("# ").rstrip())
                continue
            match = _FIELD.match(line)
            indent = indent or (match.group(1) if match else None)
            if match and match.group(1) == indent and match.group(2) in cls.model_fields:
                code, _, trailing = line.partition("  # ")
                trailing = re.sub(r"type: ignore\[[^\]]*\]\s*(#\s*)?", "", trailing).strip()
                text = " ".join([*block, trailing] if trailing else block)
                if text:
                    found[match.group(2)] = text
            block = []
    for name, field in model.model_fields.items():
        if field.description:
            found[name] = field.description
    return found


def _nested_models(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _nested_models(arg)]


def _type_name(annotation: object) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        names = " \\| ".join(_type_name(a) for a in args if a is not type(None))
        return names + (" or null" if type(None) in args and not names.endswith(" or null") else "")
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if isinstance(annotation, type):
        return (
            f"[{annotation.__name__}](#{annotation.__name__.lower()})"
            if issubclass(annotation, BaseModel)
            else annotation.__name__
        )
    return str(annotation).replace("typing.", "")


def _default(field) -> str:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if "shown_default" in extra:  # filled in by its loader, not written by the user (a registry entry's name)
        return str(extra["shown_default"])
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "its defaults"
    return f"`{value!r}`" if value not in ((), {}, None, "") else "-"


def model_reference(model: type[BaseModel], heading: str = "###", seen: set | None = None) -> str:
    """A schema's fields as a table (key, type, default, meaning), then each schema nested in it, once."""
    seen = set() if seen is None else seen
    seen.add(model)
    comments = field_comments(model)
    out = [f"{heading} {model.__name__}", "", _cell(inspect.cleandoc(model.__doc__ or "")), ""]
    out += ["| key | type | default | meaning |", "|---|---|---|---|"]
    nested: list[type[BaseModel]] = []
    for name, field in model.model_fields.items():
        inner = _nested_models(field.annotation)
        # a section of its own schema (a format's options, a rule): that schema's first sentence
        meaning = comments.get(name) or (inspect.cleandoc(inner[0].__doc__ or "").split(". ")[0] if inner else "")
        out.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | {_cell(meaning)} |")
        nested += [m for m in inner if m not in seen and m not in nested]
    for child in nested:
        if child not in seen:
            out += ["", model_reference(child, heading, seen)]
    return "\n".join(out)


def configuration_reference() -> str:
    """Each configuration file's schema: the registry, the backends, suites, scenarios, alerts, shadow
    evaluation, scale-out and automation."""
    from holistic_dagster.config.alerts import AlertsSpec
    from holistic_dagster.config.automation import AutomationSettings
    from holistic_dagster.config.catalog import SuiteSpec
    from holistic_dagster.config.models import BACKEND_SETTINGS, ModelSpec
    from holistic_dagster.config.scaleout import CelerySettings
    from holistic_dagster.config.shadow import ShadowSpec
    from holistic_dagster.scenarios.spec import ScenarioSpec

    files = [
        (
            "resources/models.yaml {#models-yaml}",
            "`models:` maps each name to an entry; an entry may also give any setting of its "
            "backend kind (below), which wins over backends.yaml.",
            [ModelSpec],
        ),
        (
            "resources/backends.yaml {#backends-yaml}",
            "One section per backend kind; what it leaves out takes these defaults.",
            list(BACKEND_SETTINGS.values()),
        ),
        ("assets/suites/&lt;version&gt;.yaml {#suites}", "A suite version: what is evaluated and how.", [SuiteSpec]),
        (
            "assets/scenarios/&lt;name&gt;.yaml {#scenarios}",
            "A scenario: its data, how a record becomes an instance, how it is asked, what is measured.",
            [ScenarioSpec],
        ),
        ("resources/alerts.yaml {#alerts-yaml}", "Graded alerts and the webhook they go to.", [AlertsSpec]),
        ("resources/shadow.yaml {#shadow-yaml}", "Shadow evaluation on production traffic.", [ShadowSpec]),
        ("resources/celery.yaml {#celery-yaml}", "Scale-out on Celery workers.", [CelerySettings]),
        ("resources/automation.yaml {#automation-yaml}", "Schedules.", [AutomationSettings]),
    ]
    out: list[str] = []
    seen: set = set()
    for path, what, models in files:
        out += [f"## {path}", "", what, ""]
        out += [model_reference(m, "###", seen) + "\n" for m in models if m not in seen]
    return "\n".join(out)


REFERENCES: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "warehouse": warehouse_reference,
    "configuration": configuration_reference,
    "environment": environment_reference,
}

# a reference in a page: the mark, then the generated text as committed (GitHub shows it), then the end mark
_BLOCK = re.compile(
    r"^<!-- reference: (\w+) -->\n(?:.*?\n)?<!-- end of reference: \1 -->$|^<!-- reference: (\w+) -->$", re.M | re.S
)


def fill_references(markdown: str, where: str = "") -> str:
    """The page with each reference block's text generated afresh (a bare mark gets its block)."""

    def generate(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in REFERENCES:
            raise ValueError(f"{where}: unknown reference {name!r} (known: {', '.join(REFERENCES)})")
        return f"<!-- reference: {name} -->\n{REFERENCES[name]().rstrip()}\n<!-- end of reference: {name} -->"

    return _BLOCK.sub(generate, markdown)


def write_references(docs: Path = REPO_ROOT / "docs") -> list[Path]:
    """Rewrites the pages whose committed references are not what the code generates; returns them."""
    changed = []
    for page in sorted(docs.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        if (filled := fill_references(text, str(page))) != text:
            page.write_text(filled, encoding="utf-8")
            changed.append(page)
    return changed


if __name__ == "__main__":  # .venv/bin/python -m holistic_dagster.cli.reference: bring the committed pages up to date
    from holistic_dagster.warehouse.tables.codegen import write_records

    for page in [*write_references(), *write_records()]:  # and the tables' typed records (warehouse/records/)
        print(f"rewrote {page}")
