"""HELM Safety's judges as the report shows them (its "raters"): each judge's agreement with people, as last
measured for a version."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.warehouse import ResultStore


def latest_rater_agreement(store: ResultStore, version: str) -> pd.DataFrame:
    """Per rater, answering model (answers_of) and human label, the latest measurement: n, agreeing, agreement,
    kappa and whether the rater scores."""
    return store.df(
        "SELECT rater, rater_identity, answers_of, human_label, n, agreeing, agreement, kappa, scores "
        "FROM safety_agreement WHERE version = ? QUALIFY row_number() OVER "
        "(PARTITION BY rater, answers_of, human_label ORDER BY measured_at DESC) = 1 ORDER BY rater, human_label",
        [version],
    )
