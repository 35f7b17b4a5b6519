"""The Dagster resources: HolisticResource (where the warehouse, the catalog, the model registry and the data are,
and the stage context built from them), one resource per model backend kind (its settings, which override
resources/backends.yaml) and ModelBackends, the backends together, which the model stages are given."""

from __future__ import annotations

import sys
import typing
from typing import ClassVar

from dagster import ConfigurableResource
from pydantic import Field, create_model

from holistic_dagster.clients.protocol import ModelClient
from holistic_dagster.clients.registry import get_client
from holistic_dagster.config.catalog import Catalog, ToxicitySpec
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.config.models import BACKEND_SETTINGS, ModelSpec
from holistic_dagster.stages import StageContext
from holistic_dagster.toxicity import ToxicityClassifier, get_classifier


class _Backend(ConfigurableResource):
    """A model backend kind: the settings of that kind (fields from catalog.BACKEND_SETTINGS), each unset by
    default. A setting given here (in code) overrides resources/backends.yaml and the schema's default for every
    model of the kind that does not set it in resources/models.yaml; the entry's own settings always win."""

    kind: ClassVar[str]

    def resolve(self, spec: ModelSpec) -> ModelSpec:
        overrides = {k: v for k, v in self.model_dump(exclude_none=True).items() if k not in spec.model_fields_set}
        if not overrides:
            return spec
        # validated by the kind's schema (a setting carried as text here becomes what the schema says it is)
        checked = BACKEND_SETTINGS[self.kind].model_validate(overrides).model_dump(include=set(overrides))
        return spec.model_copy(update=checked)

    def client(self, spec: ModelSpec) -> ModelClient:
        return get_client(self.resolve(spec))


def _config_type(annotation) -> type:
    """The type Dagster's config can carry for a setting: itself for a plain scalar (or an optional one); text for a
    choice of types (`16` or `auto`) or of words, which the kind's schema validates when the resource resolves."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)] if typing.get_origin(annotation) else []
    plain = args[0] if len(args) == 1 else (annotation if not args else None)
    return plain if plain in (str, int, float, bool) else str


def _backend_resource(kind: str) -> type[_Backend]:
    """The resource of one backend kind (e.g. TGISettings -> TGIBackend), its fields its settings, each unset."""
    settings = BACKEND_SETTINGS[kind]
    fields = {
        key: (
            _config_type(field.annotation) | None,
            Field(None, description=f"{field.description or key} (unset: {field.default})"),
        )
        for key, field in settings.model_fields.items()
    }
    name = settings.__name__.removesuffix("Settings") + "Backend"
    resource = create_model(name, __base__=_Backend, __module__=__name__, __doc__=settings.__doc__, **fields)
    resource.kind = kind
    return resource


BACKEND_RESOURCES: dict[str, type[_Backend]] = {kind: _backend_resource(kind) for kind in BACKEND_SETTINGS}
TransformersBackend = BACKEND_RESOURCES["transformers"]
TGIBackend = BACKEND_RESOURCES["tgi"]
OpenAIBackend = BACKEND_RESOURCES["openai"]


class _ModelBackends(ConfigurableResource):
    """The backend resources by kind; a model's `backend` picks one."""

    def client(self, spec: ModelSpec) -> ModelClient:
        return getattr(self, spec.backend).client(spec)


ModelBackends = create_model(
    "ModelBackends",
    __base__=_ModelBackends,
    __module__=__name__,
    __doc__=_ModelBackends.__doc__,
    **{kind: (resource, ...) for kind, resource in BACKEND_RESOURCES.items()},
)


def model_backends() -> ModelBackends:
    """Every backend kind's resource, each with its settings unset (resources/backends.yaml decides)."""
    return ModelBackends(**{kind: resource() for kind, resource in BACKEND_RESOURCES.items()})


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
    """The deployment (config.deployment.Deployment): where results go (the DuckDB warehouse), the catalog, the
    model registry, the alerts and shadow files and the upstream data folders. A path left unset is the
    environment's (settings.py)."""

    warehouse_path: str | None = None
    catalog_dir: str | None = None
    models_file: str | None = None
    alerts_file: str | None = None
    shadow_file: str | None = None
    data_dirs: list[str] = []  # folders with upstream data files, searched before downloading
    max_eval_instances: int | None = None  # a cap on every suite scenario's sample (None: the environment's)
    show_progress: bool = False  # a progress bar on stderr for long model calls (the CLI turns it on)

    @classmethod
    def of(cls, deployment: Deployment, show_progress: bool = False) -> HolisticResource:
        """The resource for a deployment (the CLI's, with its --db and --data-dir)."""
        d = deployment
        return cls(
            warehouse_path=str(d.warehouse_path),
            catalog_dir=str(d.catalog_dir),
            models_file=str(d.models_path),
            alerts_file=str(d.alerts_file) if d.alerts_file else None,
            shadow_file=str(d.shadow_file) if d.shadow_file else None,
            data_dirs=[str(p) for p in d.data_dirs],
            max_eval_instances=d.max_eval_instances,
            show_progress=show_progress,
        )

    def deployment(self) -> Deployment:
        return Deployment.of(
            warehouse=self.warehouse_path,
            catalog=self.catalog_dir,
            models=self.models_file,
            alerts=self.alerts_file,
            shadow=self.shadow_file,
            data_dirs=self.data_dirs,
            max_eval_instances=self.max_eval_instances,
        )

    # sensors and schedules read the catalog and registry through these, as the assets do
    def catalog(self) -> Catalog:
        return self.deployment().catalog()

    def models(self) -> dict[str, ModelSpec]:
        return self.deployment().models()

    def stage(
        self,
        run_id: str,
        backends: ModelBackends | None = None,
        toxicity: ToxicityClassifierResource | None = None,
    ) -> StageContext:
        deployment = self.deployment()
        return StageContext(
            clients=backends.client if backends else get_client,
            toxicity=toxicity.classifier if toxicity else get_classifier,
            warehouse=deployment.warehouse(),
            catalog=deployment.catalog(),
            deployment=deployment,
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
