"""Markdown tables for the Dagster UI's asset metadata: a family's headline table (the report's first screen)
and the regression comparisons."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.results.headline import HeadlineTable


def headline_markdown(table: HeadlineTable) -> str:
    """A family's headline table for the Dagster UI (Markdown), with the same cells as the report's."""
    header = [f"{c.scenario} ({c.metric})" for c in table.columns]
    lines = [
        "| model | mean win rate | " + " | ".join(header) + " |",
        "|---|---:|" + "---:|" * len(header),
    ]
    for model, rate, _, row in table.rows:
        values = ["-" if c is None else f"{'**' if c.best else ''}{c.text}{'**' if c.best else ''} {c.ci}" for c in row]
        lines.append(f"| {model} | {'-' if rate is None else f'{rate:.3f}'} | " + " | ".join(values) + " |")
    legend = "; ".join(f"{name}: {what} ({better})" for name, what, better in table.legend)
    return "\n".join(lines) + f"\n\n{legend}. Cells: value [95% bootstrap CI]; **best** per column."


def comparison_table(frame: pd.DataFrame) -> str:
    shown = frame.assign(
        ci=frame.apply(lambda r: f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]", axis=1),
        metric=frame["metric"] + frame["perturbation"].map(lambda p: f" [{p}]" if p else ""),
    )
    columns = ["model_b", "model_a", "scenario", "family", "metric", "n", "mean_a", "mean_b", "diff", "ci", "p_value"]
    return shown[columns + ["verdict"]].round(4).to_markdown(index=False)
