"""One schema of backend settings (catalog.BACKEND_SETTINGS): a model entry's own settings win over
resources/backends.yaml, which wins over the schema's defaults; the Dagster backend resources take their
fields and defaults from the same schema."""

from __future__ import annotations

import re

import pytest
import yaml

from holistic_dagster.config.models import (
    BACKEND_SETTINGS,
    BackendSettings,
    ModelSpec,
    load_backend_defaults,
    load_models,
)
from holistic_dagster.errors import CatalogError
from holistic_dagster.settings import REPO_ROOT

MODELS = """models:
  local: {backend: transformers, path: "demo:x"}
  small-batch: {backend: transformers, path: "demo:x", batch_size: 2}
  tgi: {backend: tgi, path: t, base_url: "http://tgi:8080"}
  tgi-slow: {backend: tgi, path: t, base_url: "http://tgi:8080", timeout_s: 600}
  api: {backend: openai, path: gpt}
  local-api: {backend: openai, path: q, base_url: "http://127.0.0.1:8000/v1", api_key_env: null}
"""


def registry(tmp_path, backends: str | None = None) -> dict[str, ModelSpec]:
    (tmp_path / "models.yaml").write_text(MODELS)
    if backends is not None:
        (tmp_path / "backends.yaml").write_text(backends)
    return load_models(tmp_path / "models.yaml")


def test_without_a_backends_file_the_schema_defaults_apply(tmp_path):
    models = registry(tmp_path)
    local = models["local"]
    assert (local.device, local.batch_size, local.batch_tokens, local.dtype) == ("auto", "auto", "auto", "auto")
    assert (models["tgi"].max_concurrency, models["tgi"].timeout_s, models["tgi"].max_attempts) == (16, 120, 5)
    assert (models["api"].max_concurrency, models["api"].api_key_env, models["api"].base_url) == (8, None, None)
    assert models["small-batch"].batch_size == 2 and models["tgi-slow"].timeout_s == 600
    # a spec built in code gets the same defaults as one read from the registry
    assert ModelSpec(name="tgi", backend="tgi", path="t", base_url="http://tgi:8080") == models["tgi"]


def test_the_entry_wins_over_backends_yaml_which_wins_over_the_schema(tmp_path):
    models = registry(
        tmp_path,
        "tgi:\n  timeout_s: 30\nopenai:\n  api_key_env: OPENAI_API_KEY\n  max_concurrency: 2\n"
        "transformers:\n  batch_size: 8\n",
    )
    assert models["tgi"].timeout_s == 30 and models["tgi-slow"].timeout_s == 600
    assert models["tgi"].max_concurrency == 16  # left out of the file: the schema's
    assert models["api"].api_key_env == "OPENAI_API_KEY" and models["api"].max_concurrency == 2
    assert models["local-api"].api_key_env is None  # the entry's explicit null wins
    assert models["local"].batch_size == 8 and models["small-batch"].batch_size == 2
    assert models["tgi"].model_fields_set == {"name", "backend", "path", "base_url"}  # still the entry's own


@pytest.mark.parametrize(
    "text, message",
    [
        ("vllm: {}\n", rf"backends.yaml: unknown backend kind 'vllm' \(known: {', '.join(BACKEND_SETTINGS)}\)"),
        ("tgi:\n  batch_size: 4\n", r"backends.yaml: tgi: unknown setting\(s\) \['batch_size'\]; allowed: max_conc"),
        ("tgi:\n  max_concurrency: many\n", r"backends.yaml: tgi.max_concurrency: Input should be a valid integer"),
        ("tgi:\n  max_concurrency: 0\n", r"backends.yaml: tgi.max_concurrency: Input should be greater than 0"),
        ("- tgi\n", r"backends.yaml: expected a mapping of backend kind -> settings"),
        ("transformers:\n  batch_size: lots\n", r"backends.yaml: transformers.batch_size.*Input should be 'auto'"),
        ("transformers:\n  batch_tokens: 0\n", r"backends.yaml: transformers.batch_tokens.*greater than 0"),
        ("transformers:\n  dtype: float8\n", r"backends.yaml: transformers.dtype: Input should be 'auto', 'float32'"),
    ],
)
def test_mistakes_in_backends_yaml_name_the_file(tmp_path, text, message):
    with pytest.raises(CatalogError, match=message):
        registry(tmp_path, text)


def test_the_shipped_backends_yaml_validates_and_its_commented_defaults_are_the_schemas():
    path = REPO_ROOT / "resources" / "backends.yaml"
    assert load_backend_defaults(path).openai.api_key_env == "OPENAI_API_KEY"
    # every setting is listed under its kind, set or commented out; a commented one shows the schema's default
    listed, kind = {}, None
    for line in path.read_text().splitlines():
        if m := re.match(r"^(\w+):", line):
            kind = m.group(1)
        elif m := re.match(r"^  (# )?(\w+): (.*)$", line):
            value = yaml.safe_load(m.group(3).split(" #")[0])
            listed[(kind, m.group(2))] = value
            if m.group(1):
                assert getattr(getattr(BackendSettings(), kind), m.group(2)) == value, (kind, m.group(2))
    schema = {(k, key) for k, settings in BACKEND_SETTINGS.items() for key in settings.model_fields}
    missing = ", ".join(f"{k}.{key}" for k, key in sorted(schema - set(listed)))
    assert not missing, f"resources/backends.yaml does not list {missing}: give each backend kind its section"
    assert set(listed) == schema  # and lists no setting the schema lacks


def test_the_dagster_backend_resources_derive_from_the_schema(tmp_path):
    from holistic_dagster.defs.resources import BACKEND_RESOURCES, TGIBackend, model_backends

    assert set(BACKEND_RESOURCES) == set(BACKEND_SETTINGS)  # one resource per backend kind, generated
    for kind, resource in BACKEND_RESOURCES.items():
        # the schema's settings, each unset by default: backends.yaml and the schema's defaults stay in charge
        assert set(resource.model_fields) == set(BACKEND_SETTINGS[kind].model_fields)
        assert all(f.default is None for f in resource.model_fields.values())
    models = registry(tmp_path, "tgi:\n  timeout_s: 30\n")
    backends = model_backends()
    assert backends.tgi.resolve(models["tgi"]) == models["tgi"]  # nothing set on the resource: no change
    assert models["tgi"].timeout_s == 30  # backends.yaml over the schema's 120
    # set on the resource (in code): it replaces backends.yaml's and the schema's settings, never the entry's own
    tuned = TGIBackend(timeout_s=45, max_concurrency=4)
    assert (tuned.resolve(models["tgi"]).timeout_s, tuned.resolve(models["tgi"]).max_concurrency) == (45, 4)
    assert tuned.resolve(models["tgi-slow"]).timeout_s == 600
    # a setting that is a number or `auto` travels through Dagster's config as text and resolves to the schema's type
    local = BACKEND_RESOURCES["transformers"](batch_size="32", batch_tokens="auto", dtype="bfloat16")
    resolved = local.resolve(models["local"])
    assert (resolved.batch_size, resolved.batch_tokens, resolved.dtype) == (32, "auto", "bfloat16")
    with pytest.raises(ValueError, match="batch_size"):
        BACKEND_RESOURCES["transformers"](batch_size="lots").resolve(models["local"])


def test_an_entry_with_another_kinds_setting_is_refused_naming_it_and_its_own(tmp_path):
    (tmp_path / "models.yaml").write_text(
        'models:\n  tgi: {backend: tgi, path: t, base_url: "http://tgi:8080", slots: 4, device: cuda}\n'
    )
    with pytest.raises(CatalogError, match=r"device, slots: not a setting of a tgi model \(its settings: .*base_url"):
        load_models(tmp_path / "models.yaml")
    with pytest.raises(ValueError, match="base_url: not a setting of a transformers model"):
        ModelSpec(name="x", backend="transformers", path="demo:x", base_url="http://127.0.0.1:1")
    # the settings every kind takes, beside those a server's entry names (its address)
    for kind, settings in BACKEND_SETTINGS.items():
        own = {key: getattr(settings(), key) for key in settings.model_fields}
        ModelSpec(name="x", backend=kind, path="p", **own, **dict.fromkeys(getattr(settings, "ENTRY_ONLY", ()), "u"))
