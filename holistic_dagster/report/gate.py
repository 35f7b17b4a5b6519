"""The gate's Markdown summary, for a pull-request comment or a CI job summary: the verdict first, then the
significant changes (one row each, however many scenarios were tested), then for each regression a few instances
where the baseline did better, each linked to the report's predictions page of its scenario (at the instance
where that page shows it)."""

from __future__ import annotations

from holistic_dagster.alerts.gate import GateResult, GateRow, regression_examples
from holistic_dagster.report.predictions import samples
from holistic_dagster.warehouse import ResultStore

EXAMPLES = 3  # instances shown per regression
TEXT = 160  # characters of an input or a prediction shown
HEADLINE = {
    "pass": "**PASS**: no significant regression",
    "regression": "**REGRESSION**",
    "undecided": "**COULD NOT DECIDE**",
}


def gate_markdown(
    warehouse: ResultStore, result: GateResult, report_url: str, predictions_per_scenario: int, seed: int
) -> str:
    """The summary. `report_url`: where the suite version's report is (its index.html's folder), for links;
    the report's predictions sample (`predictions_per_scenario`, `seed`) says which instances have an anchor."""
    r = result
    tested = len({row.scenario for row in r.rows})
    lines = [
        f"## {HEADLINE[r.verdict]}: `{r.candidate}` against `{r.baseline}` (suite `{r.version}`)",
        "",
        _verdict_line(r, tested),
    ]
    if r.undecided:
        lines += ["", "Not decided:", *[f"- {why}" for why in r.undecided]]
    significant = [row for row in r.rows if row.change != "no significant change" or row.level != "ok"]
    if significant:
        lines += [
            "",
            "| scenario | metric | n | baseline | candidate | difference [95% CI] | p (Holm) | grade |",
            "|---|---|---:|---:|---:|---|---:|---|",
        ]
        order = {"critical": 0, "warning": 1, "ok": 2}
        for row in sorted(significant, key=lambda x: (order[x.level], x.scenario, x.rule)):
            lines.append(
                f"| {row.scenario} | {_metric(row)} | {row.n} | {row.baseline_value:.3f} | {row.value:.3f} | "
                f"{row.diff:+.3f} [{row.ci_low:+.3f}, {row.ci_high:+.3f}] | {_p(row.p_adjusted)} | "
                f"{_grade(row)} |"
            )
    shown = samples(warehouse, r.version, predictions_per_scenario, seed) if r.regressions else {}
    base = report_url.rstrip("/")
    for row in r.regressions:
        page = f"{base}/predictions/{row.scenario}.html"
        lines += ["", f"### {row.scenario}: {_metric(row)} {row.diff:+.3f} ({row.threshold})", ""]
        if row.baseline_only is not None:
            lines.append(
                f"{row.baseline_only} instance(s) right for the baseline and wrong for the candidate, "
                f"{row.candidate_only} the other way ({row.test} on these, p = {_p(row.p_value)} before "
                f"adjustment). Some of the first kind ([the scenario's predictions page]({page})):"
            )
        else:
            lines.append(f"Instances where the candidate did worse ([predictions page]({page})):")
        lines.append("")
        sampled = shown.get(row.scenario, [])
        for example in regression_examples(warehouse, r, row, EXAMPLES, sampled).itertuples():
            name = f"`{example.instance_id}`"
            if example.instance_id in sampled:  # the predictions page shows it: link to it there
                name = f"[{name}]({page}#instance-{sampled.index(example.instance_id) + 1})"
            lines += [
                f"- {name}: {_short(example.input)}",
                f"  - baseline: {_short(example.baseline_prediction)}",
                f"  - candidate: {_short(example.candidate_prediction)}",
            ]
    return "\n".join(lines) + "\n"


def _verdict_line(r: GateResult, tested: int) -> str:
    worse = sum(row.change == "worse" for row in r.rows)
    better = sum(row.change == "better" for row in r.rows)
    return (
        f"{tested} scenario(s), {len(r.rows)} test(s) of the rules {', '.join(f'`{x}`' for x in r.rules)}: "
        f"{len(r.regressions)} regression(s), {len(r.warnings)} warning(s); {worse} significantly worse and "
        f"{better} significantly better at alpha {r.alpha:g} after Holm's correction for {len(r.rows)} tests."
    )


def _metric(row: GateRow) -> str:
    return row.metric if row.family == "accuracy" else f"{row.family} {row.metric}"


def _grade(row: GateRow) -> str:
    if row.level != "ok":
        return f"{row.level} ({row.threshold})"
    return row.change


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def _short(text: str) -> str:
    """One line of at most TEXT characters, safe inside a Markdown list (no pipes or backticks to break it)."""
    flat = " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")
    return (flat[: TEXT - 1] + "…") if len(flat) > TEXT else (flat or "(empty)")
