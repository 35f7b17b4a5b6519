"""The static HTML report of a suite version: a folder of pages that opens offline, in three levels.

- index.html, the first screen: per family, models x scenarios, each cell the scenario's headline metric for
  that family with its 95% CI, the mean win rate first (HELM's leaderboard); the regressions found; efficiency
  against accuracy.
- scenarios/<scenario>.html: every metric of every family under every perturbation, the accuracy under
  perturbation chart, the reliability diagram, and a link to the predictions.
- predictions/<scenario>.html: a seeded sample of instances (the same for every model) with the exact prompt,
  the completion, the references, each per-instance score, the perturbed copies beside their original, and the
  top alternative tokens; two models side by side, filterable.

Dataset text and model output are hostile input: every value goes through Jinja2's autoescaping, and the pages'
script reads and writes text only (no innerHTML). The folder is replaced as a whole.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from holistic_dagster.config.redaction import visible
from holistic_dagster.errors import HolisticError
from holistic_dagster.report import plots
from holistic_dagster.report.arena import arena_tables
from holistic_dagster.report.helm_suites import judge_agreement, mean_score_table
from holistic_dagster.report.predictions import load_items, samples
from holistic_dagster.report.tables import scenario_table
from holistic_dagster.results.headline import headline, number
from holistic_dagster.results.leaderboard import (
    borrowed_pools,
    comparisons,
    evaluated_counts,
    has_statistics,
    imported_models,
)
from holistic_dagster.results.scores import original_scores
from holistic_dagster.warehouse import ResultStore

PREDICTIONS_PER_SCENARIO = 20  # original instances per scenario on a predictions page (with their perturbed copies)
PREDICTIONS_SEED = 0


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(files("holistic_dagster.report"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["number"] = number
    env.filters["breakable"] = breakable
    env.filters["visible"] = visible
    return env


def breakable(name: str) -> Markup:
    """A snake_case name that may wrap after its underscores (narrow table headers), escaped."""
    return Markup(str(escape(name)).replace("_", "_<wbr>"))


def build_report(
    warehouse: ResultStore,
    version: str,
    main_metric: dict[str, str],
    folder: Path,
    about: dict[str, dict[str, str]] | None = None,
    predictions_per_scenario: int = PREDICTIONS_PER_SCENARIO,
    mean_score: tuple[str, str] | None = None,
    order: tuple[str, ...] = (),
    min_kappa: float | None = None,
) -> dict[str, Any]:
    """Writes the report's folder (replacing the previous one as a whole) and returns what it holds.
    about: per scenario, what the page says of it (description, adapter method); mean_score: (title, family) of
    the suite's own mean score (HELM Capabilities', HELM Safety's); order: the headline's column order (a HELM
    leaderboard's); min_kappa: the suite's bar for a safety judge (the report names the models it fell short on)."""
    if not has_statistics(warehouse, version):
        raise HolisticError(f"no leaderboard statistics for suite version {version!r}: materialize [leaderboard] first")
    head = headline(warehouse, version, main_metric, order)
    cells, applicability, tables = head.cells, head.applicability, head.tables
    compared = comparisons(warehouse, version)
    rows = original_scores(warehouse, version)
    models = sorted(cells["model"].unique())
    scenarios = sorted(cells["scenario"].unique())
    about = about or {}
    env = _environment()
    common = {
        "version": version,
        "models": models,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "seed": int(cells["bootstrap_seed"].iat[0]),
        "samples": int(cells["bootstrap_samples"].iat[0]),
    }
    pages: dict[str, str] = {}
    worse = compared[compared["verdict"] == "worse"] if len(compared) else compared
    pages["index.html"] = env.get_template("index.html.j2").render(
        **common,
        root="",
        imported=sorted(imported_models(warehouse, version)),
        tables=tables,
        scenarios=[(s, about.get(s, {}).get("description", ""), main_metric.get(s, "")) for s in scenarios],
        comparisons=compared.to_dict("records"),
        worse=worse.to_dict("records"),
        arena=arena_tables(warehouse, version),
        scatter=plots.efficiency_scatter(cells, main_metric),
        suite_score=mean_score_table(rows, *mean_score, main_metric) if mean_score else None,
        judges=judge_agreement(warehouse, version, min_kappa),
    )
    predictions = load_items(
        warehouse, version, samples(warehouse, version, predictions_per_scenario, PREDICTIONS_SEED), main_metric
    )
    evaluated = evaluated_counts(warehouse, version)
    borrowed = borrowed_pools(warehouse, version)
    num_predictions = {}
    for scenario in scenarios:
        items = predictions.get(scenario, [])
        num_predictions[scenario] = len(items)
        info = {
            "scenario": scenario,
            "main_metric": main_metric.get(scenario, ""),
            "num_evaluated": int(evaluated.get(scenario, 0)),
            "description": "",
            "method": "",
            **about.get(scenario, {}),
            "borrowed": borrowed.get(scenario, ""),
        }
        pages.update(_scenario_pages(env, common, info, cells, rows, applicability, models, items))
    num_bytes = _write_folder(folder, pages)
    return {
        "path": str(folder / "index.html"),
        "folder": str(folder),
        "num_models": len(models),
        "num_families": len(tables),
        "num_scenarios": len(scenarios),
        "num_files": len(pages),
        "num_bytes": num_bytes,
        "num_predictions": num_predictions,
    }


def _scenario_pages(env, common: dict, info: dict, cells, rows, applicability, models: list[str], items) -> dict:
    """A scenario's two pages: its table, perturbation chart and reliability diagram; its sampled predictions."""
    scenario, main = info["scenario"], info["main_metric"]
    chart, chart_note = plots.perturbation_chart(cells, scenario, main)
    reliability, reliability_note = plots.reliability_diagram(rows, scenario)
    na = applicability[(applicability["scenario"] == scenario) & ~applicability["applies"].astype(bool)]
    if "calibration" in set(na["family"]):
        reliability_note = "calibration does not apply: " + na.loc[na["family"] == "calibration", "detail"].iat[0]
    return {
        f"scenarios/{scenario}.html": env.get_template("scenario.html.j2").render(
            **common,
            **info,
            root="../",
            table=scenario_table(cells, scenario, models),
            not_applicable=[(r.family, r.detail) for r in na.itertuples()],
            chart=chart,
            chart_note=chart_note,
            reliability=reliability,
            reliability_note=reliability_note,
            num_sampled=len(items),
        ),
        f"predictions/{scenario}.html": env.get_template("predictions.html.j2").render(
            **common,
            **info,
            root="../",
            items=items,
            perturbations=sorted({v.perturbation for i in items for v in i.variants if v.perturbation}),
        ),
    }


def _write_folder(folder: Path, pages: dict[str, str]) -> int:
    """Writes every page into a fresh folder beside `folder`, then swaps it in: a reader sees the old report or
    the new one, never a mix (and a failed write leaves the old one)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    fresh = folder.with_name(f".{folder.name}.new")
    old = folder.with_name(f".{folder.name}.old")
    for stale in (fresh, old):
        shutil.rmtree(stale, ignore_errors=True)
    total = 0
    try:
        for name, html in pages.items():
            path = fresh / name
            path.parent.mkdir(parents=True, exist_ok=True)
            data = html.encode("utf-8")
            path.write_bytes(data)
            total += len(data)
    except OSError:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    if folder.exists():
        folder.rename(old)
    fresh.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return total
