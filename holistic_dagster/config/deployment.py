"""One deployment: where its catalog, its configuration files (resources/*.yaml), its warehouse, its working folder
and its upstream data are. Everything that needs a path or a configuration file gets it from here: the Dagster
resource, freshness, the Celery executor and the CLI build a Deployment (from the environment, settings.py, with
their own overrides) and pass it on; no configuration travels through os.environ."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from holistic_dagster import settings
from holistic_dagster.config.alerts import AlertsSpec, load_alerts
from holistic_dagster.config.automation import AutomationSettings, load_automation
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.models import (
    BackendSettings,
    ModelSpec,
    backends_file,
    load_backend_defaults,
    load_models,
    model_spec,
)
from holistic_dagster.config.scaleout import CelerySettings, load_celery_settings
from holistic_dagster.config.shadow import ShadowSpec, load_shadow_spec
from holistic_dagster.errors import CatalogError
from holistic_dagster.scenarios.sources import missing_data
from holistic_dagster.warehouse import ResultStore, open_warehouse


@dataclass(frozen=True)
class Deployment:
    catalog_dir: Path = field(default_factory=settings.catalog_dir)
    resources_dir: Path = field(default_factory=settings.resources_dir)
    home: Path = field(default_factory=settings.home_dir)  # working data: downloads, reports' default
    model_cache: Path = field(default_factory=settings.model_cache_dir)  # converted, built and installed weights
    warehouse_path: Path = field(default_factory=settings.warehouse_path)
    data_dirs: tuple[Path, ...] = field(default_factory=lambda: tuple(settings.data_dirs()))
    dagster_home: Path = field(default_factory=settings.dagster_home)  # Dagster's runs, events and check results
    # the files, each named on its own where a deployment keeps one elsewhere (None: in resources_dir)
    models_file: Path | None = None
    alerts_file: Path | None = None
    shadow_file: Path | None = None
    # a cap on every suite scenario's sample (Catalog.max_eval_instances): --max-eval-instances; None: the
    # variable's, read when the catalog is (a bad value fails what resolves a suite, not every command)
    max_eval_instances: int | None = None

    @classmethod
    def of(
        cls,
        *,
        warehouse: str | Path | None = None,
        catalog: str | Path | None = None,
        models: str | Path | None = None,
        alerts: str | Path | None = None,
        shadow: str | Path | None = None,
        data_dirs: list[str | Path] | tuple[str | Path, ...] | None = None,
        max_eval_instances: int | None = None,
    ) -> Deployment:
        """The environment's deployment with the given paths (and sample cap) in place of its own (None: the
        environment's)."""
        base, given = cls(), {}
        for name, value in (("warehouse_path", warehouse), ("catalog_dir", catalog), ("models_file", models),
                            ("alerts_file", alerts), ("shadow_file", shadow)):  # fmt: skip
            if value:
                given[name] = Path(value).expanduser().resolve()
        if data_dirs:
            given["data_dirs"] = tuple(Path(d).expanduser().resolve() for d in data_dirs)
        if max_eval_instances is not None:
            given["max_eval_instances"] = max_eval_instances
        return replace(base, **given)

    # --- the files -------------------------------------------------------------------------------------------
    @property
    def models_path(self) -> Path:
        return self.models_file or self.resources_dir / "models.yaml"

    @property
    def backends_path(self) -> Path:
        return backends_file(self.models_path)

    @property
    def automation_path(self) -> Path:
        """The automation settings live beside the model registry."""
        return self.models_path.parent / "automation.yaml"

    @property
    def alerts_path(self) -> Path:
        return self.alerts_file or self.resources_dir / "alerts.yaml"

    @property
    def shadow_path(self) -> Path:
        return self.shadow_file or self.resources_dir / "shadow.yaml"

    @property
    def celery_path(self) -> Path:
        return self.resources_dir / "celery.yaml"

    # --- what they hold --------------------------------------------------------------------------------------
    def catalog(self) -> Catalog:
        cap = self.max_eval_instances if self.max_eval_instances is not None else settings.max_eval_instances()
        return Catalog(self.catalog_dir, cap)

    def runnable(self, version: str, download: bool = False) -> tuple[list[str], dict[str, str]]:
        """(the suite version's scenarios to run here, {scenario: why it is skipped}): a scenario the suite marks
        optional is skipped, with the reason, when its data is neither in the data dirs nor downloaded (download:
        fetch it first where downloads are on, as `holistic evaluate` does; the sensors never download)."""
        catalog = self.catalog()
        suite = catalog.suite(version)
        skipped = {}
        for name, pin in suite.scenarios.items():
            if pin.optional and (
                why := missing_data(catalog.resolved_scenario(version, name)[0], self.data_dirs, download)
            ):
                skipped[name] = why
        return [s for s in suite.scenarios if s not in skipped], skipped

    def models(self) -> dict[str, ModelSpec]:
        return load_models(self.models_path, self.backends_path)

    def model(self, name: str) -> ModelSpec:
        return model_spec(name, self.models_path)

    def backends(self) -> BackendSettings:
        return load_backend_defaults(self.backends_path)

    def alerts(self) -> AlertsSpec:
        """The graded alerts' rules and webhook: a file named on its own must exist; the default one is optional."""
        return load_alerts(self.alerts_path, optional=self.alerts_file is None)

    def shadow(self) -> ShadowSpec:
        """The shadow-evaluation configuration."""
        if not self.shadow_path.exists():
            raise CatalogError(
                f"shadow evaluation is not configured: no {self.shadow_path} (name the candidate models and the judge "
                "there; see docs/how-to/shadow.md)"
            )
        return load_shadow_spec(self.shadow_path)

    def traffic_dir(self) -> Path:
        return self.shadow().traffic_path(self.home)

    def celery(self) -> CelerySettings:
        return load_celery_settings(self.celery_path)

    def automation(self) -> AutomationSettings:
        return load_automation(self.automation_path)

    def warehouse(self) -> ResultStore:
        return open_warehouse(self.warehouse_path)
