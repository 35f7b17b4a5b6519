"""Markdown tables for the Dagster UI's asset metadata: a family's leaderboard and the regression comparisons."""

from __future__ import annotations

import pandas as pd


def family_table(part: pd.DataFrame, win_rates: pd.DataFrame | None = None) -> str:
    """One family's leaderboard rows as a Markdown table: (scenario, metric [perturbation]) x model, with
    "n/a" where the family does not apply and "undefined" where a value could not be computed; the family's
    mean win rate as the first row."""
    part = part.copy()
    part["metric"] = part["metric"].where(part["metric"] != "", "not applicable")
    part["row"] = part["scenario"] + " " + part["metric"] + part["perturbation"].map(lambda p: f" [{p}]" if p else "")
    cells = part.apply(
        lambda r: "n/a" if r.metric == "not applicable" else ("undefined" if pd.isna(r.value) else f"{r.value:.3f}"),
        axis=1,
    )
    table = part.assign(cell=cells).pivot_table(index="row", columns="model", values="cell", aggfunc="first")
    if win_rates is not None and len(win_rates):
        rates = win_rates.set_index("model")["mean_win_rate"].map(lambda v: f"{v:.3f}")
        table = pd.concat([rates.rename("mean win rate").to_frame().T, table])
    return table.to_markdown()


def comparison_table(frame: pd.DataFrame) -> str:
    shown = frame.assign(
        ci=frame.apply(lambda r: f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]", axis=1),
        metric=frame["metric"] + frame["perturbation"].map(lambda p: f" [{p}]" if p else ""),
    )
    columns = ["model_b", "model_a", "scenario", "family", "metric", "n", "mean_a", "mean_b", "diff", "ci", "p_value"]
    return shown[columns + ["verdict"]].round(4).to_markdown(index=False)
