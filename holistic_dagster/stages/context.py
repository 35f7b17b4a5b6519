"""What every stage receives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from holistic_dagster.clients.protocol import ModelClient
from holistic_dagster.clients.registry import get_client
from holistic_dagster.config.catalog import Catalog, ToxicitySpec
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.toxicity import ToxicityClassifier, get_classifier
from holistic_dagster.warehouse import ResultStore


@dataclass
class StageContext:
    """Where results go, the catalog, the deployment (its model registry, configuration files and data folders)
    and the run's id; how to reach a model's backend and the suite's toxicity classifier (the Dagster layer passes
    its configured resources)."""

    warehouse: ResultStore
    catalog: Catalog = field(default_factory=Catalog)
    deployment: Deployment = field(default_factory=Deployment)
    run_id: str = ""
    max_cost: float | None = None  # the run's budget (USD), where a command set one: it wins over the suite's
    # an efficient evaluation: the anchors each scenario's model answers (stages/efficient)
    efficient: int | None = None
    # a sequential gate's batch: each scenario's first n instances of the seeded order (stages/efficient)
    sample: int | None = None
    progress: Callable[[str, int], Callable[[int], None]] | None = None  # (description, total) -> advance
    clients: Callable[[ModelSpec], ModelClient] = get_client
    toxicity: Callable[[ToxicitySpec], ToxicityClassifier] = get_classifier

    def model(self, name: str) -> ModelSpec:
        return self.deployment.model(name)

    def client(self, name: str) -> ModelClient:
        return self.clients(self.model(name))
