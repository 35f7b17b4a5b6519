"""The report's plots: matplotlib figures embedded as PNG (data URIs), so every page opens offline. A plot that
would be empty (nothing defined, every bar at zero) is not drawn: the caller gets the reason instead.

A command that will write a report after other work (`holistic evaluate`) calls `start_background()` first: a
low-priority process imports matplotlib with CPU the run leaves idle (a core waits while one process scores and
summarizes) and draws the plots it is sent. Not yet ready when a plot is asked for, the plot is drawn here.
"""

from __future__ import annotations

import base64
import functools
import io
import logging

import pandas as pd

from holistic_dagster.clients import background
from holistic_dagster.metrics import PERTURBATION_FAMILIES, REFERENCE_FAMILIES
from holistic_dagster.metrics.calibration import equal_mass_bins
from holistic_dagster.results.scores import calibration_pairs

log = logging.getLogger(__name__)
_background = background.Offload("holistic-plots", __name__, "_pyplot", log, doing="drawing", nice=10)


def start_background() -> None:
    """Draw plots in a background process from now on in this process (started once; ends when this one does)."""
    _background.start()


def stop_background() -> None:
    _background.stop()


def _drawn_in_background(plot):
    """The plot drawn by the background process when one is started and ready, else here: the same function."""

    @functools.wraps(plot)
    def draw(*args):
        return _background.run(plot, *args, when_warm=True)

    return draw


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display: render to files only
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


@_drawn_in_background
def reliability_diagram(rows: pd.DataFrame, scenario: str, num_bins: int = 10) -> tuple[str | None, str]:
    """Accuracy against confidence in equal-mass bins, a line per model, on one scenario's original instances
    (correct = the instance's exact_match, as calibration uses). rows: summaries.original_scores.
    Returns (PNG or None, why there is none)."""
    models = sorted(rows.loc[rows["scenario"] == scenario, "model"].unique())
    pairs = {m: calibration_pairs(rows, m, scenario) for m in models}
    pairs = {m: p for m, p in pairs.items() if len(p)}
    if not pairs:
        return None, "no model gave log-probabilities of its predictions here: no confidences to bin"
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.4, 4.2))
    ax.plot([0, 1], [0, 1], color="#999", linestyle="--", linewidth=1, label="perfect calibration")
    for model, part in pairs.items():
        bins = equal_mass_bins(part["p"].to_numpy(), part["c"].to_numpy(), num_bins)
        conf, acc, _ = zip(*bins)
        ax.plot(conf, acc, marker="o", label=f"{model} ({len(part)} instances, {len(bins)} bins)")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence (max_prob)", ylabel="accuracy (exact_match)")
    ax.set_title(f"{scenario}: reliability", fontsize=10)
    ax.legend(loc="upper left", fontsize=7)
    return _png(fig), ""


@_drawn_in_background
def perturbation_chart(cells: pd.DataFrame, scenario: str, main_metric: str) -> tuple[str | None, str]:
    """The main metric unperturbed, under each perturbation and in the worst case, a bar group per model.
    Returns (PNG or None, why there is none)."""
    part = cells[
        (cells["scenario"] == scenario) & cells["family"].isin(REFERENCE_FAMILIES) & (cells["metric"] == main_metric)
    ]
    if not main_metric or not part["family"].isin(PERTURBATION_FAMILIES).any():
        return None, "no robustness or fairness perturbation applies to this scenario"
    if not (part["value"].fillna(0) != 0).any():
        return None, f"every {main_metric} value is zero or undefined, original and perturbed: nothing to compare"
    part = part.assign(
        label=[
            "original" if f == "accuracy" else f"{p} ({f[:3]})" for f, p in zip(part["family"], part["perturbation"])
        ]
    )
    table = part.pivot_table(index="label", columns="model", values="value", aggfunc="first")
    table = table.loc[["original"] + sorted(i for i in table.index if i != "original")]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    table.plot.bar(ax=ax, width=0.8)
    top = max(1.0, float(table.max().max()))
    ax.set(ylabel=main_metric, xlabel="", ylim=(0, top))
    ax.set_title(f"{scenario}: {main_metric} under perturbation", fontsize=10)
    ax.legend(fontsize=7)
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right", fontsize=8)
    return _png(fig), ""


@_drawn_in_background
def efficiency_scatter(cells: pd.DataFrame, main_metric: dict[str, str]) -> str | None:
    """Mean runtime per instance against the main accuracy metric, a point per model and scenario."""
    acc = cells[(cells["family"] == "accuracy") & (cells["perturbation"] == "")]
    if acc.empty:  # a suite without accuracy (HELM Safety's): nothing to plot runtime against
        return None
    acc = acc[[m == main_metric.get(s) for s, m in zip(acc["scenario"], acc["metric"])]]
    runtime = cells[(cells["family"] == "efficiency") & (cells["metric"] == "runtime_s")]
    points = acc.merge(runtime, on=["model", "scenario"], suffixes=("_acc", "_rt"))
    points = points[points["value_acc"].notna() & points["value_acc"].between(0, 1)]  # bits per byte is no score
    if points.empty:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for model, part in points.groupby("model"):
        ax.scatter(part["value_rt"], part["value_acc"], label=model, s=36)
        for r in part.itertuples():
            ax.annotate(r.scenario, (r.value_rt, r.value_acc), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set(xlabel="runtime per instance (s, log scale)", ylabel="main accuracy metric", xscale="log")
    ax.set_title("efficiency vs accuracy", fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)
