"""HELM Safety's judges as the report shows them: each judge's agreement with people on each kind of
answers, as last measured for a version."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import SafetyAgreement


def latest_judge_agreement(store: ResultStore, version: str) -> pd.DataFrame:
    """Per judge, kind of answers (measured_on), answering model (answers_of) and human label, the latest
    measurement: n, agreeing, agreement with its interval, kappa and whether the judge scores that kind."""
    return SafetyAgreement(store).latest(version)
