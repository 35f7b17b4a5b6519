"""Shadow evaluation's candidates and judge are metered and budgeted like any model (shadow.yaml's max_cost, per
log and model, counted across runs): past the budget nothing is sent and the refusal says what it would cost;
within it the answers are billed once, in request_costs with what asked them; a re-run spends only what is left."""

from __future__ import annotations

import shutil

import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.config.shadow import ShadowSpec
from holistic_dagster.judging.battles import Answer, Battle
from holistic_dagster.records import Price
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.stages.budget import BudgetExceeded, metered
from holistic_dagster.stages.context import StageContext
from holistic_dagster.stages.judging import run_judge
from holistic_dagster.stages.shadow import answer_traffic, load_traffic
from holistic_dagster.warehouse import Warehouse
from tests.arena.conftest import QA
from tests.arena.test_shadow import TRAFFIC, log_line
from tests.conftest import write
from tests.servers.arena_protocol_server import ArenaProtocolTestServer

PRICE = "price: {input_per_million: 1000, output_per_million: 2000}"  # a token costs a tenth of a cent or more


@pytest.fixture
def world(tmp_path):
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    log = write(tmp_path / "traffic" / "day1.jsonl", "".join(log_line(k, *t) + "\n" for k, t in enumerate(TRAFFIC)))
    with ArenaProtocolTestServer({r["q"]: r["a"] for r in QA}) as server:
        http = f"backend: openai, base_url: '{server.base_url}', api_key_env: null, max_attempts: 1, {PRICE}"
        models = write(
            tmp_path / "models.yaml",
            "models:\n" + "".join(f"  {m}: {{{http}, path: {m}}}\n" for m in ("oracle", "rule-judge")),
        )
        deployment = Deployment.of(warehouse=tmp_path / "w.duckdb", catalog=tmp_path / "assets", models=models)
        stage = StageContext(Warehouse(tmp_path / "w.duckdb"), Catalog(tmp_path / "assets"), deployment)
        spec = ShadowSpec(candidates=("oracle",), judge="rule-judge", max_tokens=4)
        load_traffic(stage, spec, "day1", log)
        yield stage, spec, server


def test_a_candidate_past_the_budget_sends_nothing_and_within_it_pays_once(world):
    stage, spec, server = world
    with pytest.raises(BudgetExceeded) as refused:
        answer_traffic(stage, spec.model_copy(update={"max_cost": 0.01}), "day1")
    assert server.sent("oracle") == 0
    message = str(refused.value)
    assert message.startswith("refused before any request: 'oracle' answering traffic log 'day1' would cost up to $")
    assert (
        "past the budget of $0.01 (shadow.yaml's max_cost)" in message and "5 request(s) to send (0 cached" in message
    )  # 7 records, 5 distinct prompts

    answer_traffic(stage, spec.model_copy(update={"max_cost": 1.0}), "day1")
    assert server.sent("oracle") == 5
    costs = stage.warehouse.df("SELECT * FROM request_costs WHERE model = 'oracle'")
    assert len(costs) == 5 and set(costs["method"]) == {"shadow"} and costs["version"].isna().all()
    cache = stage.warehouse.df("SELECT num_prompt_tokens AS p, num_completion_tokens AS c FROM completion_cache")
    billed = Price(input_per_million=1000, output_per_million=2000).cost(cache["p"].sum(), cache["c"].sum())
    assert costs["cost_usd"].sum() == pytest.approx(billed) and billed > 0.01

    # the same log again under a budget below what it already cost: nothing left to send, so nothing refused
    answer_traffic(stage, spec.model_copy(update={"max_cost": 0.01}), "day1")
    assert server.sent("oracle") == 5
    spend = metered(stage, "oracle", [], 1.0, "shadow.yaml's max_cost", "again")
    assert spend is not None and spend.earlier == 0.0  # no request named: nothing of this task billed before


def test_a_priced_judge_past_the_budget_judges_nothing(world):
    stage, spec, server = world
    battles = [
        Battle(f"b{k}", "traffic", f"r{k}", r["q"], "", Answer("production", "", " Berlin", 1),
               Answer("oracle", "", f" {r['a']}", 1), True)
        for k, r in enumerate(QA)
    ]  # fmt: skip
    with pytest.raises(BudgetExceeded, match=r"'rule-judge' judging 5 battles on log 'day1' would cost up to \$"):
        run_judge(stage, "rule-judge", battles, spec.template, 64, "shadow_judge", (0.001, "shadow"), "on log 'day1'")
    assert server.sent("rule-judge") == 0
    judged, sent = run_judge(stage, "rule-judge", battles, spec.template, 64, "shadow_judge", (5.0, "shadow"))
    assert sent == 10 == server.sent("rule-judge") and all(j.judgement.error == "" for j in judged)
    costs = stage.warehouse.df("SELECT method, count(*) AS n FROM request_costs GROUP BY ALL")
    assert costs.values.tolist() == [["shadow_judge", 10]]
