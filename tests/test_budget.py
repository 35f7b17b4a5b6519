"""Tokens, cost and the budget guard, through Dagster into a real DuckDB file, on the OpenAI-protocol test server
(a real model behind it) with a priced registry entry: an evaluation past its budget is refused before any request
reaches the server, saying the estimate and what drives it; within budget, what the run spent (the tokens the
server reported, at the price) is checked against the estimate; the efficiency family reports cost per instance
and per scenario; requests the cache answers cost nothing and let a re-run pass a budget of zero."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.runner import evaluate_suite
from holistic_dagster.records import Price
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.stages.budget import BudgetExceeded, estimate_cost
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write, write_qa_scenario
from tests.servers.openai_protocol_server import OpenAIProtocolTestServer

pytestmark = pytest.mark.slow  # Dagster runs against a local server

PRICE = Price(input_per_million=150.0, output_per_million=600.0)  # dear, so that a few requests cost cents
SUITE = "version: b1\nscenarios:\n  mini_qa: {max_eval_instances: 6, seed: 2}\n"
QUESTIONS = [{"q": f"What is {i} plus {i}?", "a": str(2 * i)} for i in range(6)]


def priced_world(tmp_path, server, entry: str = "", suite: str = SUITE):
    """The catalog (suite b1 on six sums, or `suite`), the warehouse path, the registry file (one priced entry on
    `server`, with `entry`'s settings added) and the Dagster definitions over them."""
    import shutil

    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write_qa_scenario(tmp_path / "assets", tmp_path / "data", QUESTIONS, "Six sums.")  # max_tokens 3
    version = suite.split("\n", 1)[0].removeprefix("version: ")
    write(tmp_path / "assets" / "suites" / f"{version}.yaml", suite)
    catalog, db = Catalog(tmp_path / "assets"), tmp_path / "w.duckdb"
    models = write(
        tmp_path / "models.yaml",
        f"models:\n  priced: {{backend: openai, path: x, base_url: '{server.base_url}', max_attempts: 1, {entry}"
        "price: {input_per_million: 150, output_per_million: 600}}\n",
    )
    resource = HolisticResource(
        warehouse_path=str(db), catalog_dir=str(catalog.root), models_file=str(models),
        data_dirs=[str(tmp_path / "data")],
    )  # fmt: skip
    return catalog, db, models, build_definitions(catalog, resource)


def test_a_priced_model_is_refused_past_its_budget_and_spends_what_was_estimated(tmp_path, untrained_client):
    instance = DagsterInstance.ephemeral()
    with OpenAIProtocolTestServer(untrained_client) as server:
        # the server's own tokenizer in the entry: exact prompt token counts
        catalog, db, models, defs = priced_world(tmp_path, server, f"tokenizer: '{untrained_client.path}', ")

        with pytest.raises(BudgetExceeded) as refused:
            evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=0.001)
        assert sum(server.hits.values()) == 0  # nothing was sent
        message = str(refused.value)
        assert message.startswith("refused before any request: evaluating 'priced' on suite 'b1' would cost up to $")
        assert "past the budget of $0.001 (--max-cost)" in message
        assert "6 request(s) to send (0 cached, not counted)" in message and "x $150/M" in message
        assert "most: mini_qa $" in message

        warehouse = Warehouse(db)
        assert warehouse.df("SELECT count(*) AS n FROM completions")["n"].iat[0] == 0
        deployment = Deployment.of(warehouse=db, catalog=catalog.root, models=models)
        estimate = estimate_cost(StageContext(warehouse, catalog, deployment), "b1", "priced", ["mini_qa"])
        (scenario,) = estimate.scenarios
        assert (scenario.num_requests, scenario.num_cached, scenario.max_output_tokens) == (6, 0, 18)
        assert f"${estimate.cost:.4f}" in message

        evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=estimate.cost)  # at the limit
        assert sum(server.hits.values()) == 6
        sent = warehouse.df("SELECT num_prompt_tokens, num_completion_tokens FROM completions WHERE model = 'priced'")
        spent = PRICE.cost(sent["num_prompt_tokens"].sum(), sent["num_completion_tokens"].sum())
        assert sent["num_prompt_tokens"].sum() == scenario.prompt_tokens  # counted as the server counts
        assert (sent["num_completion_tokens"] <= 3).all() and 0 < spent <= estimate.cost
        cost = warehouse.df(
            "SELECT metric, value, count FROM scenario_metrics WHERE model = 'priced' AND family = 'efficiency' "
            "AND metric IN ('cost_usd', 'total_cost_usd') AND perturbation = ''"
        ).set_index("metric")
        assert cost.loc["total_cost_usd", "value"] == pytest.approx(spent)
        assert cost.loc["cost_usd", "value"] == pytest.approx(spent / 6) and cost.loc["cost_usd", "count"] == 6
        runs = warehouse.df(
            "SELECT dagster_run_id, sum(cost_usd) AS spent, count(*) AS n FROM request_costs GROUP BY ALL"
        )
        assert len(runs) == 1 and runs["n"].iat[0] == 6 and runs["spent"].iat[0] == pytest.approx(spent)  # per run

        # answered from the cache: free, so a budget of zero lets the evaluation run again without a request
        evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=0.0)
        assert sum(server.hits.values()) == 6
        again = warehouse.df("SELECT dagster_run_id, sum(cost_usd) AS spent FROM request_costs GROUP BY ALL")
        assert again.equals(runs[["dagster_run_id", "spent"]])  # the cached answers stay the first run's spending

    from typer.testing import CliRunner

    from holistic_dagster.cli import app

    shown = CliRunner().invoke(
        app, ["leaderboard", "--version", "b1", "--db", str(db)], env={"HOLISTIC_CATALOG": str(catalog.root)}
    )
    assert shown.exit_code == 0, shown.output
    assert f"priced: ${spent:.4f} at its registry price over 1 scenario(s), 6 requests" in " ".join(
        shown.stdout.split()
    )


def test_the_suites_budget_holds_a_completions_step_the_daemon_would_run(tmp_path, untrained_client):
    """Without the CLI's whole-run estimate (a run launched by the registry sensor), each completions step still
    estimates its own scenario against the suite's max_cost before sending."""
    import shutil

    from holistic_dagster.defs.runner import RunFailed

    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write_qa_scenario(tmp_path / "assets", tmp_path / "data", QUESTIONS, "Six sums.")
    write(tmp_path / "assets" / "suites" / "b2.yaml", SUITE.replace("b1", "b2") + "max_cost: 0.0001\n")
    catalog = Catalog(tmp_path / "assets")
    with OpenAIProtocolTestServer(untrained_client) as server:
        models = write(
            tmp_path / "models.yaml",
            f"models:\n  priced: {{backend: openai, path: x, base_url: '{server.base_url}', max_attempts: 1, "
            "price: {input_per_million: 150, output_per_million: 600}}\n",
        )
        resource = HolisticResource(
            warehouse_path=str(tmp_path / "w.duckdb"),
            catalog_dir=str(catalog.root),
            models_file=str(models),
            data_dirs=[str(tmp_path / "data")],
        )
        defs = build_definitions(catalog, resource)
        # the whole-run estimate (the suite's budget, here through evaluate_suite) refuses first ...
        with pytest.raises(BudgetExceeded, match="past the budget of \\$0.0001 \\(suite b2's max_cost\\)"):
            evaluate_suite(defs, DagsterInstance.ephemeral(), "b2", ["priced"], catalog=catalog)
        # ... and a run of the evaluate job as the sensor launches it fails at the completions step, unsent
        from dagster import MultiPartitionKey

        from holistic_dagster.defs.jobs import EVALUATE_JOB, model_keys

        instance = DagsterInstance.ephemeral()
        instance.add_dynamic_partitions("model", ["priced"])
        instance.add_dynamic_partitions("version", ["b2"])
        result = defs.resolve_job_def(EVALUATE_JOB).execute_in_process(
            partition_key=MultiPartitionKey({"model": "priced", "version": "b2"}),
            instance=instance,
            raise_on_error=False,
            asset_selection=model_keys(["mini_qa"]),
        )
        assert not result.success and sum(server.hits.values()) == 0
        assert "suite b2's max_cost, for mini_qa alone" in str(RunFailed("evaluate", result))


def test_spending_is_metered_as_answers_arrive_and_stops_at_the_budget(tmp_path, untrained_client):
    """A provider whose tokenizer counts 4x what the estimate counted (~4 characters a token: no `tokenizer:`):
    the estimate passes the budget, and the usage the server reports reaches it. No request is sent after that
    (one in flight at most here: the overshoot is bounded by it), the step fails as stopped for budget saying
    what was spent and what was not sent, the run is tagged so, nothing half-written enters the completions, and
    a run with a larger budget finishes without paying again for what was answered."""
    from holistic_dagster.defs.jobs import BUDGET_STOP_TAG
    from holistic_dagster.defs.runner import RunFailed

    instance = DagsterInstance.ephemeral()
    with OpenAIProtocolTestServer(untrained_client, usage_scale=4) as server:
        catalog, db, models, defs = priced_world(tmp_path, server, "max_concurrency: 1, ")
        deployment = Deployment.of(warehouse=db, catalog=catalog.root, models=models)
        with pytest.raises(BudgetExceeded):  # the prompts are built, nothing is sent: the estimate can be read
            evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=0.0)
        warehouse = Warehouse(db)
        budget = estimate_cost(StageContext(warehouse, catalog, deployment), "b1", "priced", ["mini_qa"]).cost
        with pytest.raises(RunFailed) as stopped:  # the estimate is within the budget: the guard lets it through
            evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=budget)
        message = str(stopped.value)
        sent = sum(server.hits.values())
        assert 1 <= sent < 6 and server.max_in_flight == 1
        assert "stopped for budget: priced on mini_qa reached the budget of $" in message
        assert f"{6 - sent} request(s) not sent" in message and "by the usage the server reported" in message
        cached = warehouse.df("SELECT num_prompt_tokens, num_completion_tokens FROM completion_cache")
        costs = [PRICE.cost(r.num_prompt_tokens, r.num_completion_tokens) for r in cached.itertuples()]
        assert len(costs) == sent and sum(costs) >= budget  # reached ...
        assert sum(costs) - max(costs) < budget  # ... by the last answer: nothing was sent after the budget
        assert warehouse.df("SELECT count(*) AS n FROM completions")["n"].iat[0] == 0  # no partial rows
        (failed,) = [r for r in instance.get_runs() if r.tags.get(BUDGET_STOP_TAG)]
        assert failed.tags[BUDGET_STOP_TAG].startswith(f"spent ${sum(costs):.4f} of ${budget:g}")

        evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=100 * budget)
        assert sum(server.hits.values()) == 6  # the answered ones were not paid for again
        assert warehouse.df("SELECT count(*) AS n FROM completions")["n"].iat[0] == 6


def test_the_estimate_counts_with_the_server_s_tokenizer_where_it_has_one(tmp_path, untrained_client):
    """A vLLM-style server answers /tokenize: with no `tokenizer:` in the entry the prompts are counted by the
    server (4x what ~4 characters a token would say here), so the estimate is what the server will bill, and a
    budget below it is refused before any request."""
    instance = DagsterInstance.ephemeral()
    with OpenAIProtocolTestServer(untrained_client, usage_scale=4, tokenize=True) as server:
        catalog, db, models, defs = priced_world(tmp_path, server)
        with pytest.raises(BudgetExceeded):
            evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=0.0)
        warehouse = Warehouse(db)
        prompts = warehouse.df("SELECT DISTINCT request_id, prompt, num_prompt_tokens FROM prompts")
        assert server.tokenized >= len(prompts) == 6
        for r in prompts.itertuples():  # the server's count, not len(prompt) / 4
            assert r.num_prompt_tokens == 4 * untrained_client.count_tokens(r.prompt)
        deployment = Deployment.of(warehouse=db, catalog=catalog.root, models=models)
        estimate = estimate_cost(StageContext(warehouse, catalog, deployment), "b1", "priced", ["mini_qa"])
        with pytest.raises(BudgetExceeded):
            evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=estimate.cost * 0.99)
        assert sum(server.hits.values()) == 0
        # this server also bills 4x the completion tokens it generated, past max_tokens: room for that
        evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=4 * estimate.cost)
        sent = warehouse.df("SELECT sum(num_prompt_tokens) AS n FROM completions")["n"].iat[0]
        assert sum(server.hits.values()) == 6 and sent == sum(prompts["num_prompt_tokens"])  # billed as estimated


def test_the_budget_is_the_evaluations_across_runs_and_in_flight_requests_are_reserved(tmp_path, untrained_client):
    """A server billing 4x the tokens the estimate counted, four requests allowed in flight: the estimate passes the
    budget, the first request goes alone (how the server bills is learnt from it), and then each request's cost is
    reserved before it is sent, so nothing is sent once what was spent and what is in flight reach the budget: the
    overshoot is below one request's cost whatever max_concurrency is. The budget is the evaluation's, across runs:
    a re-run with the same budget has nothing left and says so before any request (never a negative budget); a
    larger one spends only what it adds."""
    from holistic_dagster.defs.runner import RunFailed

    instance = DagsterInstance.ephemeral()
    with OpenAIProtocolTestServer(untrained_client, usage_scale=4) as server:
        catalog, db, models, defs = priced_world(tmp_path, server, "max_concurrency: 4, ")
        deployment = Deployment.of(warehouse=db, catalog=catalog.root, models=models)
        with pytest.raises(BudgetExceeded):  # builds the prompts, sends nothing
            evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=0.0)
        warehouse = Warehouse(db)
        budget = estimate_cost(StageContext(warehouse, catalog, deployment), "b1", "priced", ["mini_qa"]).cost
        with pytest.raises(RunFailed, match="stopped for budget"):
            evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=budget)
        cached = warehouse.df("SELECT num_prompt_tokens, num_completion_tokens FROM completion_cache")
        costs = [PRICE.cost(r.num_prompt_tokens, r.num_completion_tokens) for r in cached.itertuples()]
        assert 1 <= len(costs) < 6 and sum(server.hits.values()) == len(costs)
        assert sum(costs) >= budget and sum(costs) - max(costs) < budget  # over by less than one request's cost

        with pytest.raises(BudgetExceeded, match=r"\$0 \(--max-cost, less \$[\d.]+ already spent on this evaluation"):
            evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=budget)
        assert sum(server.hits.values()) == len(costs)
        evaluate_suite(defs, instance, "b1", ["priced"], catalog=catalog, max_cost=100 * budget)
        assert sum(server.hits.values()) == 6  # the answered ones were not paid for again
