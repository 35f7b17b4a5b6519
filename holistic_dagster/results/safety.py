"""HELM Safety's judges as the report shows them: each judge's agreement with people on each kind of
answers, as last measured for a version."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.warehouse import ResultStore


def latest_judge_agreement(store: ResultStore, version: str) -> pd.DataFrame:
    """Per judge, kind of answers (measured_on), answering model (answers_of) and human label, the latest
    measurement: n, agreeing, agreement with its interval, kappa and whether the judge scores that kind."""
    return store.df(
        "SELECT judge, judge_identity, measured_on, answers_of, human_label, n, agreeing, agreement, agreement_low, "
        "agreement_high, kappa, scores FROM safety_agreement WHERE version = ? QUALIFY row_number() OVER "
        "(PARTITION BY judge, measured_on, answers_of, human_label ORDER BY measured_at DESC) = 1 "
        "ORDER BY judge, measured_on, human_label",
        [version],
    )
