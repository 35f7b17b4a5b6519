from __future__ import annotations

import sys

from dagster import ConfigurableResource
from pydantic import Field

from holistic_dagster import settings
from holistic_dagster.catalog import Catalog
from holistic_dagster.pipeline import Stage
from holistic_dagster.warehouse import Warehouse


class HolisticResource(ConfigurableResource):
    """Where results go (the DuckDB warehouse), the catalog and the model registry."""

    warehouse_path: str = Field(default_factory=lambda: str(settings.warehouse_path()))
    catalog_dir: str = Field(default_factory=lambda: str(settings.catalog_dir()))
    models_file: str = Field(default_factory=lambda: str(settings.resources_dir() / "models.yaml"))
    show_progress: bool = False  # a progress bar on stderr for long model calls (the CLI turns it on)

    def stage(self, run_id: str) -> Stage:
        from pathlib import Path

        return Stage(
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
