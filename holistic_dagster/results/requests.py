"""Per-request facts the alerts grade: each answered request's latency, and how often a re-asked request gave the
stored answer again (the stability asset's rows)."""

from __future__ import annotations

import duckdb
import pandas as pd

from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import Completions, Stability


def latencies(store: ResultStore, version: str, models: list[str]) -> pd.DataFrame:
    """model, scenario, request_id, latency_s of every request of the models that was answered."""
    return Completions(store).latencies(version, models)


def stability_agreement(store: ResultStore, version: str, models: list[str]) -> pd.DataFrame:
    """Per model, scenario and instance: the share of its re-asked answers equal to the stored one."""
    try:
        return Stability(store).agreement(version, models)
    except duckdb.CatalogException:  # a warehouse from before the stability table
        return pd.DataFrame(columns=["model", "scenario", "instance_id", "value"])
