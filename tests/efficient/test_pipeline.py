"""An efficient evaluation through Dagster on real (random-weight) transformers models: ten models evaluated in full
on HellaSwag (scored continuations: each answers near chance, each differently), then a new model answers only the
anchors; its estimate is marked as such everywhere and never gated on; evaluated again without --efficient, the
cache pays for the anchors and the cell becomes measured."""

from __future__ import annotations

import shutil

import pytest
from dagster import DagsterInstance

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.settings import REPO_ROOT
from tests.conftest import write

pytestmark = pytest.mark.slow

SUITE = """
version: e1
description: efficient evaluation, tested
toxicity: {kind: lexicon}
scenarios:
  hellaswag: {max_eval_instances: 40, seed: 0}
"""
POPULATION = [f"random-{i:02d}" for i in range(10)]
NEW = "random-new"
GATED = "random-gated"  # evaluated only by the sequential gate's batches


@pytest.fixture(scope="module")
def population(tmp_path_factory, shared_data):
    """Eleven GPT-2-shaped models with random weights (seeds 100-110, the demo model's tokenizer), the first ten
    evaluated in full on suite e1 through Dagster."""
    import torch
    import transformers

    from holistic_dagster.clients.demo_models import ensure_demo_model
    from holistic_dagster.definitions import build_definitions
    from holistic_dagster.defs.resources import HolisticResource
    from holistic_dagster.defs.runner import evaluate_suite
    from holistic_dagster.warehouse import Warehouse

    root = tmp_path_factory.mktemp("efficient")
    base = ensure_demo_model("gpt2-untrained", root / "demo")
    registry = ["models:"]
    for seed, name in enumerate([*POPULATION, NEW, GATED], start=100):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(base))
        model.save_pretrained(root / name)
        transformers.AutoTokenizer.from_pretrained(base).save_pretrained(root / name)
        registry += [f"  {name}:", "    backend: transformers", f"    path: {root / name}"]
    shutil.copytree(REPO_ROOT / "assets", root / "assets")
    write(root / "assets" / "suites" / "e1.yaml", SUITE)
    models = write(root / "models.yaml", "\n".join(registry) + "\n")
    catalog, path = Catalog(root / "assets"), root / "warehouse.duckdb"
    resource = HolisticResource(
        warehouse_path=str(path), catalog_dir=str(catalog.root), models_file=str(models), data_dirs=[str(shared_data)]
    )
    defs = build_definitions(catalog, resource)
    instance = DagsterInstance.ephemeral()
    evaluate_suite(defs, instance, "e1", POPULATION, catalog=catalog)
    runs = evaluate_suite(defs, instance, "e1", [NEW], catalog=catalog, efficient=12)
    return {"defs": defs, "instance": instance, "catalog": catalog, "wh": Warehouse(path), "runs": runs}


def test_the_new_model_answers_only_the_anchors(population):
    wh = population["wh"]
    fit = wh.df("SELECT * FROM anchor_fits WHERE version = 'e1' AND scenario = 'hellaswag'")
    assert fit["method"].iat[0] == "irt" and int(fit["anchors"].iat[0]) == 12 and int(fit["n_full"].iat[0]) == 40
    assert sorted(__import__("json").loads(fit["models"].iat[0])) == POPULATION
    anchors = set(wh.df("SELECT instance_id FROM anchor_instances WHERE version = 'e1'")["instance_id"])
    asked = set(wh.df("SELECT DISTINCT instance_id FROM prompts WHERE model = ?", [NEW])["instance_id"])
    assert asked == anchors and len(anchors) == 12
    partial = wh.df("SELECT * FROM partial_evaluations WHERE model = ?", [NEW])
    assert (int(partial["n_evaluated"].iat[0]), int(partial["n_full"].iat[0])) == (12, 40)
    # the anchors' own prompts are those of a full evaluation (so completing it later reuses their answers)
    full = set(wh.df("SELECT DISTINCT request_id FROM prompts WHERE model = ?", [POPULATION[0]])["request_id"])
    mine = set(wh.df("SELECT DISTINCT request_id FROM prompts WHERE model = ?", [NEW])["request_id"])
    assert mine <= full


def test_the_estimate_is_marked_in_sql_the_statistics_and_the_terminal(population, capsys):
    wh = population["wh"]
    row = wh.df("SELECT * FROM estimates WHERE model = ? AND family = 'accuracy' AND metric = 'exact_match'", [NEW])
    row = row.iloc[0]
    assert row["metric"] == "exact_match" and row["method"] == "irt" and row["ci_low"] < row["value"] < row["ci_high"]
    cell = wh.df(
        "SELECT * FROM leaderboard WHERE model = ? AND family = 'accuracy' AND metric = 'exact_match'", [NEW]
    ).iloc[0]
    assert bool(cell["estimated"]) and int(cell["n_full"]) == 40 and int(cell["count"]) == 12
    assert cell["value"] == pytest.approx(row["value"])
    measured = wh.df("SELECT DISTINCT estimated FROM leaderboard WHERE model = ? AND metric <> ''", [POPULATION[0]])
    assert measured["estimated"].tolist() == [False]
    stats = wh.df(
        "SELECT * FROM leaderboard_stats WHERE model = ? AND family = 'accuracy' AND metric = 'exact_match'", [NEW]
    ).iloc[0]
    assert bool(stats["estimated"]) and (stats["ci_low"], stats["ci_high"]) == (row["ci_low"], row["ci_high"])
    other = wh.df("SELECT value, note FROM leaderboard WHERE model = ? AND family = 'calibration'", [NEW])
    assert other["value"].isna().all() and other["note"].str.startswith("not estimated").all()
    # every other mean over instances (efficiency's runtimes and token counts here) is the anchors' stratified mean
    weights = dict(wh.df("SELECT instance_id, weight FROM anchor_instances WHERE version = 'e1'").values)
    others = wh.df("SELECT * FROM estimates WHERE model = ? AND method <> 'irt'", [NEW])
    assert {"runtime_s", "num_prompt_tokens"} <= set(others["metric"]) and set(others["method"]) == {
        "stratified sample"
    }
    for e in others.itertuples():
        mine = wh.df(
            "SELECT instance_id, value FROM instance_scores WHERE model = ? AND version = 'e1' AND family = ? "
            "AND metric = ? AND perturbation IN ('', 'worst')",
            [NEW, e.family, e.metric],
        )
        w = mine["instance_id"].map(weights)
        assert e.value == pytest.approx((w * mine["value"]).sum() / w.sum()) and e.ci_low <= e.value <= e.ci_high
        cell = wh.df(
            "SELECT * FROM leaderboard WHERE model = ? AND family = ? AND metric = ?", [NEW, e.family, e.metric]
        )
        assert cell["value"].iat[0] == pytest.approx(e.value) and bool(cell["estimated"].iat[0])

    from holistic_dagster.cli.leaderboard_table import print_leaderboard
    from holistic_dagster.config.deployment import Deployment

    print_leaderboard(Deployment.of(warehouse=wh.path, catalog=population["catalog"].root), "e1", full=False)
    shown = capsys.readouterr().out
    assert f"≈{row['value']:.3f}" in shown and "12/40" in shown


def test_an_estimate_is_never_gated_on(population):
    from holistic_dagster.alerts.gate import DEFAULT_RULE, gate

    result = gate(population["wh"], "e1", NEW, POPULATION[0], [DEFAULT_RULE], 0.05, {"hellaswag": "exact_match"})
    assert result.verdict == "undecided" and not result.rows
    assert any("evaluated efficiently (12 of 40 instances" in why for why in result.undecided)


def test_the_sequential_gate_reads_full_results_and_states_what_it_used(population):
    from holistic_dagster.alerts.gate import DEFAULT_RULE
    from holistic_dagster.alerts.sequential_gate import sequential_gate_of
    from holistic_dagster.efficient.validation import full_draw_verdict

    wh, main = population["wh"], {"hellaswag": "exact_match"}
    for baseline, candidate in [(POPULATION[0], POPULATION[1]), (POPULATION[1], POPULATION[0])]:
        result = sequential_gate_of(wh, "e1", candidate, baseline, DEFAULT_RULE, 0.05, main, look=10)
        (row,) = result.rows
        assert row.result.n_full == 40 and 10 <= row.result.stopped_at <= 40 and row.alpha == 0.05
        assert result.instances_used == (row.result.stopped_at, 40)
        values = wh.df(
            "SELECT model, instance_id, value FROM instance_scores WHERE version = 'e1' AND metric = 'exact_match' "
            "AND model IN (?, ?) ORDER BY instance_id",
            [baseline, candidate],
        ).pivot(index="instance_id", columns="model", values="value")
        full = full_draw_verdict(values[baseline].to_numpy(), values[candidate].to_numpy(), 0.05, 0.0)
        assert full == "pass" or row.result.verdict == "regression"  # a regression the full draw shows is not missed
    estimated = sequential_gate_of(wh, "e1", NEW, POPULATION[0], DEFAULT_RULE, 0.05, main)
    assert estimated.verdict == "undecided" and "evaluated efficiently" in estimated.undecided[0]


def test_the_completion_sensor_asks_for_the_scenarios_whose_place_is_undecided(population):
    import dagster as dg

    defs, resource = population["defs"], population["defs"].resources["holistic"]
    sensor = defs.get_sensor_def("complete_undecided")
    automation = resource.deployment().automation_path
    context = dg.build_sensor_context(instance=population["instance"], resources={"holistic": resource})
    assert isinstance(sensor(context), dg.SkipReason)  # not asked for in resources/automation.yaml
    automation.write_text("efficient_anchors: 12\n")
    try:
        context = dg.build_sensor_context(instance=population["instance"], resources={"holistic": resource})
        requests = sensor(context)
    finally:
        automation.unlink()
    estimate = population["wh"].df("SELECT ci_low, ci_high FROM estimates WHERE model = ?", [NEW]).iloc[0]
    values = population["wh"].df(
        "SELECT value FROM scenario_metrics WHERE model <> ? AND metric = 'exact_match' AND family = 'accuracy'", [NEW]
    )["value"]
    if not values.between(estimate["ci_low"], estimate["ci_high"]).any():
        pytest.skip("this draw's estimate holds no other model's value: nothing is undecided")
    (request,) = requests
    assert request.partition_key == dg.MultiPartitionKey({"model": NEW, "version": "e1"})
    assert set(request.asset_selection) == {dg.AssetKey(["hellaswag", s]) for s in ("prompts", "completions", "scores")}
    assert request.run_key == f"complete:{NEW}:e1:hellaswag" and "holistic/efficient" not in request.tags


def test_completing_it_later_pays_only_for_the_rest(population):
    from holistic_dagster.defs.runner import evaluate_suite

    wh = population["wh"]
    estimate = wh.df("SELECT value, ci_low, ci_high FROM estimates WHERE model = ?", [NEW]).iloc[0]
    runs = evaluate_suite(population["defs"], population["instance"], "e1", [NEW], catalog=population["catalog"])
    completions = [
        e.materialization.metadata
        for r in runs
        if r.result is not None
        for e in r.result.get_asset_materialization_events()
        if e.asset_key.path == ["hellaswag", "completions"]
    ][0]
    assert completions["num_from_cache"].value == 12 * 4  # the anchors' four choices each, answered before
    assert wh.df("SELECT count(*) AS n FROM estimates WHERE model = ?", [NEW])["n"].iat[0] == 0
    assert wh.df("SELECT count(*) AS n FROM partial_evaluations WHERE model = ?", [NEW])["n"].iat[0] == 0
    cell = wh.df(
        "SELECT * FROM leaderboard WHERE model = ? AND family = 'accuracy' AND metric = 'exact_match'", [NEW]
    ).iloc[0]
    assert not bool(cell["estimated"]) and int(cell["count"]) == 40
    # the measurement, for the record: the stated interval is a claim about it (not asserted: one draw)
    print(f"estimate {estimate['value']:.3f} [{estimate['ci_low']:.3f}, {estimate['ci_high']:.3f}]; "
          f"measured {cell['value']:.3f}")  # fmt: skip


def test_the_gate_evaluates_a_candidate_batch_by_batch_and_decides_as_over_its_full_results(population):
    from holistic_dagster.alerts.gate import DEFAULT_RULE
    from holistic_dagster.alerts.sequential_gate import sequential_gate_of
    from holistic_dagster.defs.runner import evaluate_suite, gate_in_batches

    wh, main, baseline = population["wh"], {"hellaswag": "exact_match"}, POPULATION[3]
    lines = []
    batched = gate_in_batches(
        population["defs"], population["instance"], "e1", GATED, baseline, DEFAULT_RULE, 0.05, main, 10, lines.append
    )
    (row,) = batched.rows
    used = row.result.stopped_at
    assert used in (10, 20, 30, 40) and len(lines) == used // 10
    asked = wh.df("SELECT DISTINCT instance_id FROM prompts WHERE model = ?", [GATED])["instance_id"]
    assert len(asked) == used  # the candidate answered only what the test read
    if used < 40:  # stopped early: its cell is an estimate from that random sample, marked as one
        estimate = wh.df("SELECT method, n_evaluated FROM estimates WHERE model = ?", [GATED]).iloc[0]
        assert (estimate["method"], int(estimate["n_evaluated"])) == ("random sample", used)
    # the same test over the candidate's full results, read in the same order, stops at the same look, the same way
    evaluate_suite(population["defs"], population["instance"], "e1", [GATED], catalog=population["catalog"])
    full = sequential_gate_of(wh, "e1", GATED, baseline, DEFAULT_RULE, 0.05, main, look=10)
    assert (full.rows[0].result.verdict, full.rows[0].result.stopped_at) == (row.result.verdict, used)
