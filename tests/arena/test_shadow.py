"""Shadow evaluation through Dagster on a traffic log written here: the traffic_logs sensor picks the file up,
PII is removed before anything is stored or sent, candidates answer the same prompts, the judge compares them
with production's answers, and each candidate's win rate against production lands per slice with its CI."""

from __future__ import annotations

import json
import shutil

import pytest
from dagster import DagsterInstance, SkipReason, build_sensor_context

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.shadow import CATEGORIES, ShadowSpec, load_shadow_spec
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.errors import CatalogError
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.shadow import read_traffic
from holistic_dagster.stages.shadow import judge_traffic
from holistic_dagster.warehouse import TABLES, Warehouse
from tests.arena.conftest import QA
from tests.conftest import write
from tests.servers.arena_protocol_server import ArenaProtocolTestServer

PII = ("bob@corp.example", "+1 415 555 0100", "u-7731", "carol@corp.example")
# (route, question, production's answer): production is right on the first three and wrong on the others
TRAFFIC = [
    ("geo", QA[0]["q"], "Paris"),
    ("geo", QA[1]["q"], "Rome"),
    ("trivia", QA[2]["q"], "Madrid"),
    ("geo", QA[3]["q"], "Kyoto"),
    ("trivia", QA[4]["q"], "Alexandria"),
    ("trivia", QA[0]["q"], "Lyon"),
    ("", QA[1]["q"], "Milan"),  # a record without the slice field
]


def log_line(k: int, route: str, question: str, answer: str) -> str:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": f"Hi, I am bob@corp.example (call +1 415 555 0100), since 1969-07-20. {question}"},
    ]
    metadata = {"user_email": "carol@corp.example", "latency_s": 0.25 + k / 100, **({"route": route} if route else {})}
    return json.dumps(
        {
            "id": f"req-{k}",
            "timestamp": f"2026-12-01T10:0{k}:00Z",
            "metadata": metadata,
            "request": {"model": "prod-model", "messages": messages, "user": "u-7731", "temperature": 0.7},
            "response": {
                "id": f"chatcmpl-{k}",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 1, "total_tokens": 31},
            },
        }
    )


@pytest.fixture(scope="module")
def shadow_world(tmp_path_factory):
    root = tmp_path_factory.mktemp("shadow")
    shutil.copytree(REPO_ROOT / "assets", root / "assets")
    traffic = root / "traffic"
    write(traffic / "2026-12-01.jsonl", "".join(log_line(k, *t) + "\n" for k, t in enumerate(TRAFFIC)))
    with ArenaProtocolTestServer({r["q"]: r["a"] for r in QA}) as server:
        http = f"backend: openai, base_url: '{server.base_url}', api_key_env: null, max_attempts: 1"
        models = write(
            root / "resources" / "models.yaml",
            "models:\n"
            + "".join(f"  {m}: {{{http}, path: {m}}}\n" for m in ("oracle", "wrong", "rule-judge", "biased-judge")),
        )
        shadow = write(
            root / "resources" / "shadow.yaml",
            f"traffic_dir: {traffic}\ncandidates: [oracle, wrong]\njudge: rule-judge\nbootstrap_samples: 200\n",
        )
        resource = HolisticResource(
            warehouse_path=str(root / "warehouse.duckdb"),
            catalog_dir=str(root / "assets"),
            models_file=str(models),
            shadow_file=str(shadow),
        )
        defs = build_definitions(Catalog(root / "assets"), resource)
        instance = DagsterInstance.ephemeral()
        sensor = defs.get_sensor_def("traffic_logs")
        tick = sensor(build_sensor_context(instance=instance, resources={"holistic": resource}))
        for request in tick.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        runs = [
            defs.resolve_job_def(r.job_name).execute_in_process(partition_key=r.partition_key, instance=instance)
            for r in tick.run_requests
        ]
        yield {
            "root": root,
            "server": server,
            "defs": defs,
            "instance": instance,
            "resource": resource,
            "sensor": sensor,
            "tick": tick,
            "runs": runs,
            "wh": Warehouse(resource.warehouse_path),
        }


def test_the_sensor_picks_up_a_new_log_and_the_run_passes_its_checks(shadow_world):
    tick = shadow_world["tick"]
    assert [r.partition_key for r in tick.run_requests] == ["2026-12-01"]
    (run,) = shadow_world["runs"]
    assert run.success
    checks = {e.check_name: e.passed for e in run.get_asset_check_evaluations()}
    assert checks == {"pii_removed": True, "verdicts_parse": True}
    again = shadow_world["sensor"](
        build_sensor_context(
            instance=shadow_world["instance"], resources={"holistic": shadow_world["resource"]}, cursor=tick.cursor
        )
    )
    assert isinstance(again, SkipReason) and "no new or changed traffic logs" in str(again.skip_message)


def test_pii_is_removed_before_anything_is_stored_or_sent(shadow_world):
    wh, server = shadow_world["wh"], shadow_world["server"]
    traffic = wh.df("SELECT * FROM traffic ORDER BY line")
    assert len(traffic) == 7 and list(traffic["slice"]) == [t[0] for t in TRAFFIC]
    assert traffic["prompt"].iat[0] == (  # a date is no phone number; one from a birth year is masked as a date
        "system: You are a helpful assistant.\nuser: Hi, I am [EMAIL_1] (call [PHONE_1]), since [DATE_1]. "
        f"{QA[0]['q']}\nassistant:"
    )
    stored = "\n".join(wh.df(f"SELECT * FROM {table}").to_csv() for table in TABLES)
    sent = "\n".join(prompt for _, prompt in server.hits)
    for secret in PII:
        assert secret not in stored and secret not in sent, secret
    assert "[EMAIL_1]" in sent  # the candidates and the judge saw the masked text


def test_verdicts_and_win_rates_per_slice_by_hand(shadow_world):
    wh = shadow_world["wh"]
    verdicts = wh.df("SELECT * FROM shadow_verdicts").set_index(["candidate", "record_id"])
    # the oracle ties where production is right, wins where it is wrong; "wrong" loses where production is right
    # and ties where both are wrong
    assert [verdicts.loc[("oracle", f"req-{k}"), "winner"] for k in range(7)] == ["tie"] * 3 + ["candidate"] * 4
    assert [verdicts.loc[("wrong", f"req-{k}"), "winner"] for k in range(7)] == ["production"] * 3 + ["tie"] * 4
    assert verdicts["consistent"].all() and (verdicts["error"] == "").all()
    rates = wh.df("SELECT * FROM shadow_win_rates").set_index(["candidate", "slice"])
    # oracle: all 3 x 0.5 + 4 x 1 over 7; geo (req 0, 1, 3): 0.5, 0.5, 1; trivia (req 2, 4, 5): 0.5, 1, 1;
    # req 6 (no slice field): 1
    assert rates.loc[("oracle", ""), ["n", "wins", "ties", "losses"]].tolist() == [7, 4, 3, 0]
    assert rates.loc[("oracle", ""), "win_rate"] == pytest.approx(5.5 / 7)
    assert rates.loc[("oracle", "(no slice)"), ["n", "win_rate"]].tolist() == [1, 1.0]
    assert rates.loc[("oracle", "geo"), "win_rate"] == pytest.approx(2 / 3)
    assert rates.loc[("oracle", "trivia"), "win_rate"] == pytest.approx(5 / 6)
    assert rates.loc[("wrong", ""), "win_rate"] == pytest.approx(2 / 7)
    low, high = rates.loc[("oracle", ""), ["ci_low", "ci_high"]]
    assert 0.5 <= low < 5.5 / 7 < high <= 1.0


def test_an_unqualified_judge_keeps_its_verdicts_and_gives_no_win_rates(shadow_world):
    stage, wh = shadow_world["resource"].stage("test"), shadow_world["wh"]
    spec = stage.deployment.shadow()
    before = wh.df("SELECT * FROM shadow_win_rates ORDER BY ALL")
    try:
        # a judge that names whichever answer it is shown first: 0.5 on battles with a known answer
        metadata = judge_traffic(stage, spec.model_copy(update={"judge": "biased-judge"}), "2026-12-01")
        assert metadata["qualification"] == "unqualified judge: agreement 0.50, position consistency 0.00"
        verdicts = wh.df("SELECT * FROM shadow_verdicts WHERE judge = 'biased-judge'")
        assert len(verdicts) == 2 * len(TRAFFIC) and (verdicts["winner"] == "tie").all()  # kept, every one flips
        assert wh.df("SELECT * FROM shadow_win_rates WHERE log = '2026-12-01'").empty
        assert metadata["win_rates"] == {}
    finally:
        judge_traffic(stage, spec, "2026-12-01")  # the rule-following judge's results, for the other tests
    assert wh.df("SELECT * FROM shadow_win_rates ORDER BY ALL").equals(before)


def test_a_rerun_sends_nothing_twice_and_a_bad_log_leaves_earlier_results_intact(shadow_world):
    server, wh, instance = shadow_world["server"], shadow_world["wh"], shadow_world["instance"]
    hits = sum(server.hits.values())
    job = shadow_world["defs"].resolve_job_def("shadow_job")
    assert job.execute_in_process(partition_key="2026-12-01", instance=instance).success
    assert sum(server.hits.values()) == hits  # candidates' answers and judgements all from the completion cache
    traffic = shadow_world["root"] / "traffic"
    bad = ['{"request": {"messages": []}, "response": {}}', '{"request": {"prompt": "x"}, "response": {"choices": 1}}']
    write(traffic / "2026-12-02.jsonl", "\n".join(bad) + "\n")
    records, quarantined = read_traffic(traffic / "2026-12-02.jsonl", ShadowSpec(candidates=("oracle",), judge="j"))
    assert records == [] and [(q.line, q.reason) for q in quarantined] == [
        (1, "response.choices is empty: no production answer"),
        (2, "response.choices is empty: no production answer"),
    ]
    tick = shadow_world["sensor"](
        build_sensor_context(
            instance=instance, resources={"holistic": shadow_world["resource"]}, cursor=shadow_world["tick"].cursor
        )
    )
    assert [r.partition_key for r in tick.run_requests] == ["2026-12-02"]
    instance.add_dynamic_partitions("traffic_log", ["2026-12-02"])
    failed = job.execute_in_process(partition_key="2026-12-02", instance=instance, raise_on_error=False)
    assert not failed.success
    assert wh.df("SELECT count(*) FROM traffic WHERE log = '2026-12-02'").iat[0, 0] == 0
    assert wh.df("SELECT count(*) FROM traffic WHERE log = '2026-12-01'").iat[0, 0] == 7


def test_no_configuration_says_what_to_write_and_the_example_is_valid(tmp_path):
    resource = HolisticResource(shadow_file=str(tmp_path / "shadow.yaml"))
    with pytest.raises(CatalogError, match="shadow evaluation is not configured"):
        resource.deployment().shadow()
    example = load_shadow_spec(REPO_ROOT / "resources" / "shadow.example.yaml")
    assert example.pii.redact == CATEGORIES and example.slice_by == "metadata.route"
    bad = write(tmp_path / "bad.yaml", "candidates: [a]\njudge: b\npii: {redact: [email, ssn]}\n")
    with pytest.raises(CatalogError, match=r"bad.yaml: pii.redact: .*unknown PII categories \['ssn'\]"):
        load_shadow_spec(bad)
