"""The static HTML report of a suite version: per family, the mean win rates and the leaderboard with n and
95% CIs; a reliability diagram per model; accuracy under each perturbation; efficiency against accuracy;
the regressions found. Plots are matplotlib figures embedded as PNG, so the one file opens offline."""

from __future__ import annotations

import base64
import io
from datetime import datetime, timezone
from importlib.resources import files
from pathlib import Path

import jinja2
import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.metrics import FAMILIES, PERTURBATION_FAMILIES, REFERENCE_FAMILIES
from holistic_dagster.metrics.calibration import equal_mass_bins
from holistic_dagster.stages.summaries import calibration_pairs, original_scores
from holistic_dagster.warehouse import Warehouse


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display: render to files only
    import matplotlib.pyplot as plt

    return plt


def reliability_diagrams(warehouse: Warehouse, version: str, num_bins: int = 10) -> dict[str, str]:
    """Per model: accuracy against confidence in equal-mass bins, pooled over the calibration scenarios
    (correct = the instance's exact_match, as calibration uses)."""
    rows = original_scores(warehouse, version)
    pairs = [
        calibration_pairs(rows, model, scenario).assign(model=model)
        for model, scenario in rows[["model", "scenario"]].drop_duplicates().itertuples(index=False)
    ]
    frame = pd.concat(pairs, ignore_index=True).rename(columns={"p": "prob", "c": "correct"}) if pairs else None
    if frame is None or frame.empty:
        return {}
    plt = _pyplot()
    out = {}
    for model, part in frame.groupby("model"):
        fig, ax = plt.subplots(figsize=(4.2, 4.2))
        ax.plot([0, 1], [0, 1], color="#999", linestyle="--", linewidth=1, label="perfect calibration")
        bins = equal_mass_bins(part["prob"].to_numpy(), part["correct"].to_numpy(), num_bins)
        conf, acc, _ = zip(*bins)
        ax.plot(conf, acc, marker="o", color="#1f77b4", label=f"{len(part)} instances, {len(bins)} bins")
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence (max_prob)", ylabel="accuracy", title=model)
        ax.legend(loc="upper left", fontsize=8)
        out[model] = _png(fig)
    return out


def perturbation_bars(cells: pd.DataFrame, main_metric: dict[str, str]) -> dict[str, str]:
    """Per scenario with robustness or fairness: the main metric unperturbed, under each perturbation and in
    the worst case, one bar group per model."""
    plt = _pyplot()
    out = {}
    relevant = cells[cells["family"].isin(REFERENCE_FAMILIES)]
    for scenario, part in relevant.groupby("scenario"):
        part = part[part["metric"] == main_metric.get(scenario)]
        if not part["family"].isin(PERTURBATION_FAMILIES).any():
            continue
        part = part.assign(
            label=part.apply(
                lambda r: "original" if r.family == "accuracy" else f"{r.perturbation} ({r.family[:3]})", axis=1
            )
        )
        table = part.pivot_table(index="label", columns="model", values="value", aggfunc="first")
        order = ["original"] + sorted(i for i in table.index if i != "original")
        table = table.loc[order]
        fig, ax = plt.subplots(figsize=(8, 3.2))
        table.plot.bar(ax=ax, width=0.8)
        ax.set(ylabel=main_metric[scenario], xlabel="", title=f"{scenario}: accuracy under perturbation", ylim=(0, 1))
        ax.legend(fontsize=8)
        plt.setp(ax.get_xticklabels(), rotation=35, ha="right", fontsize=8)
        out[scenario] = _png(fig)
    return out


def efficiency_scatter(cells: pd.DataFrame, main_metric: dict[str, str]) -> str | None:
    """Mean runtime per instance against the main accuracy metric, a point per model and scenario."""
    acc = cells[(cells["family"] == "accuracy") & (cells["perturbation"] == "")]
    acc = acc[acc.apply(lambda r: r.metric == main_metric.get(r.scenario), axis=1)]
    runtime = cells[(cells["family"] == "efficiency") & (cells["metric"] == "runtime_s")]
    points = acc.merge(runtime, on=["model", "scenario"], suffixes=("_acc", "_rt"))
    if points.empty:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for model, part in points.groupby("model"):
        ax.scatter(part["value_rt"], part["value_acc"], label=model, s=40)
        for r in part.itertuples():
            ax.annotate(r.scenario, (r.value_rt, r.value_acc), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set(xlabel="runtime per instance (s)", ylabel="main accuracy metric", title="efficiency vs accuracy")
    ax.legend(fontsize=8)
    return _png(fig)


def _cell(r) -> str:
    if pd.isna(r.value):
        return "undefined"
    ci = "" if pd.isna(r.ci_low) else f" [{r.ci_low:.3f}, {r.ci_high:.3f}]"
    return f"{r.value:.3f}{ci} n={r.n}"


def build_report(warehouse: Warehouse, version: str, main_metric: dict[str, str], path: Path) -> dict[str, object]:
    """Writes the report to `path` (atomically) and returns what it holds."""
    cells = warehouse.df("SELECT * FROM leaderboard_stats WHERE version = ?", [version])
    if cells.empty:
        raise HolisticError(f"no leaderboard statistics for suite version {version!r}: materialize [leaderboard] first")
    rates = warehouse.df("SELECT * FROM win_rates WHERE version = ?", [version])
    comparisons = warehouse.df("SELECT * FROM comparisons WHERE version = ?", [version])
    applicability = warehouse.df("SELECT * FROM applicability WHERE version = ? AND NOT applies", [version])
    models = sorted(cells["model"].unique())
    families = []
    for family in FAMILIES:
        part = cells[cells["family"] == family]
        if part.empty:
            continue
        part = part.assign(
            row=part["scenario"] + " · " + part["metric"] + part["perturbation"].map(lambda p: f" [{p}]" if p else ""),
            cell=part.apply(_cell, axis=1),
        )
        table = part.pivot_table(index="row", columns="model", values="cell", aggfunc="first").reindex(columns=models)
        win = rates[rates["family"] == family].set_index("model").reindex(models)
        na = applicability[applicability["family"] == family]
        families.append(
            {
                "name": family,
                "win_rates": [(m, win.loc[m, "mean_win_rate"], win.loc[m, "num_columns"]) for m in models],
                "rows": [
                    (row, [table.loc[row, m] if isinstance(table.loc[row, m], str) else "-" for m in models])
                    for row in table.index
                ],  # fmt: skip
                "not_applicable": [(r.scenario, r.detail) for r in na.itertuples()],
            }
        )
    worse = comparisons[comparisons["verdict"] == "worse"] if len(comparisons) else comparisons
    template = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
        files("holistic_dagster.report").joinpath("report.html.j2").read_text(encoding="utf-8")
    )
    html = template.render(
        version=version,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        models=models,
        families=families,
        reliability=reliability_diagrams(warehouse, version),
        perturbations=perturbation_bars(cells, main_metric),
        scatter=efficiency_scatter(cells, main_metric),
        comparisons=comparisons.to_dict("records"),
        worse=worse.to_dict("records"),
        seed=int(cells["bootstrap_seed"].iat[0]),
        samples=int(cells["bootstrap_samples"].iat[0]),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return {"path": str(path), "num_models": len(models), "num_families": len(families), "num_bytes": len(html)}
