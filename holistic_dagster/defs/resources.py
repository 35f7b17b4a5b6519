from __future__ import annotations

import sys

from dagster import ConfigurableResource
from pydantic import Field

from holistic_dagster import settings
from holistic_dagster.catalog import Catalog, ModelSpec, ToxicitySpec, load_backend_defaults, with_backend_defaults
from holistic_dagster.clients import ModelClient, get_client
from holistic_dagster.pipeline import Stage
from holistic_dagster.toxicity import ToxicityClassifier, get_classifier
from holistic_dagster.warehouse import Warehouse


def _default(kind: str, key: str, fallback):
    return lambda: load_backend_defaults().get(kind, {}).get(key, fallback)


class _Backend(ConfigurableResource):
    """A model backend kind. Its settings (from resources/backends.yaml) fill in what a model entry in
    resources/models.yaml leaves unset; the entry's own settings win."""

    def client(self, spec: ModelSpec) -> ModelClient:
        return get_client(with_backend_defaults(spec, self.model_dump(exclude_none=True)))


class TransformersBackend(_Backend):
    """Local models on transformers + torch."""

    device: str = Field(default_factory=_default("transformers", "device", "auto"))


class TGIBackend(_Backend):
    """Text Generation Inference servers."""

    max_concurrency: int = Field(default_factory=_default("tgi", "max_concurrency", 16))
    timeout_s: float = Field(default_factory=_default("tgi", "timeout_s", 120.0))
    max_attempts: int = Field(default_factory=_default("tgi", "max_attempts", 5))


class OpenAIBackend(_Backend):
    """OpenAI and OpenAI-compatible servers. api_key_env names the variable holding the key."""

    api_key_env: str | None = Field(default_factory=_default("openai", "api_key_env", None))
    max_concurrency: int = Field(default_factory=_default("openai", "max_concurrency", 8))
    timeout_s: float = Field(default_factory=_default("openai", "timeout_s", 120.0))
    max_attempts: int = Field(default_factory=_default("openai", "max_attempts", 5))


class ModelBackends(ConfigurableResource):
    """The backend resources by kind; a model's `backend` picks one."""

    transformers: TransformersBackend
    tgi: TGIBackend
    openai: OpenAIBackend

    def client(self, spec: ModelSpec) -> ModelClient:
        return getattr(self, spec.backend).client(spec)


class ToxicityClassifierResource(ConfigurableResource):
    """The toxicity classifier the scores stage uses: the suite file's choice (`toxicity:`), with any setting
    given here overriding it for this deployment (e.g. a Perspective endpoint or a local checkpoint path)."""

    kind: str | None = None  # lexicon | offensive_language | transformers | perspective
    path: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None  # the NAME of the variable holding the key

    def classifier(self, spec: ToxicitySpec) -> ToxicityClassifier:
        overrides = self.model_dump(exclude_none=True)
        return get_classifier(spec.model_validate({**spec.model_dump(), **overrides}) if overrides else spec)


class HolisticResource(ConfigurableResource):
    """Where results go (the DuckDB warehouse), the catalog and the model registry."""

    warehouse_path: str = Field(default_factory=lambda: str(settings.warehouse_path()))
    catalog_dir: str = Field(default_factory=lambda: str(settings.catalog_dir()))
    models_file: str = Field(default_factory=lambda: str(settings.resources_dir() / "models.yaml"))
    show_progress: bool = False  # a progress bar on stderr for long model calls (the CLI turns it on)

    def stage(
        self,
        run_id: str,
        backends: ModelBackends | None = None,
        toxicity: ToxicityClassifierResource | None = None,
    ) -> Stage:
        from pathlib import Path

        return Stage(
            clients=backends.client if backends else get_client,
            toxicity=toxicity.classifier if toxicity else get_classifier,
            warehouse=Warehouse(self.warehouse_path),
            catalog=Catalog(Path(self.catalog_dir)),
            models_file=Path(self.models_file),
            run_id=run_id,
            progress=_tqdm_progress if self.show_progress else None,
        )


def _tqdm_progress(description: str, total: int):
    from tqdm import tqdm

    bar = tqdm(
        total=total, desc=description, unit="req", file=sys.stderr, leave=False, disable=None
    )  # off without a TTY

    def advance(n: int) -> None:
        bar.update(n)
        if bar.n >= bar.total:
            bar.close()

    return advance
