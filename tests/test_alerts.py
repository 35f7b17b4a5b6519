"""Graded regression alerts on a warehouse built by hand (known per-instance scores and per-request latencies,
so every mean, difference and p-value below is computed by hand), and the webhook against a real local
receiver. p-values of the sign-flip test: with k nonzero differences all of one sign, p = 2 / 2^k (estimated
from 2000 seeded permutations)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from holistic_dagster.alerts.delivery import Alert, AlertDeliveryError, notify, send_alerts, slack_payload, webhook_url
from holistic_dagster.alerts.grading import Finding, baselines, evaluate_alerts
from holistic_dagster.config.alerts import AlertsSpec, load_alerts
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.config.redaction import redact
from holistic_dagster.errors import CatalogError
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.warehouse import Warehouse
from tests.helpers import free_port
from tests.servers.webhook_receiver import TOKEN
from tests.servers.webhook_receiver import WebhookReceiver as Receiver

VERSION = "t1"
ALPHA = 0.05
MAIN = {s: "exact_match" for s in ("floor", "sharp", "mild", "noisy", "better")}
MODELS = {
    "base": ModelSpec(name="base", backend="transformers", path="demo:gpt2-untrained"),
    "cand": ModelSpec(name="cand", backend="transformers", path="demo:gpt2-untrained", previous="base"),
    "solo": ModelSpec(name="solo", backend="transformers", path="demo:gpt2-untrained"),  # no previous
}


def correct(n: int, which) -> list[float]:
    """n exact_match values: 1.0 at the indices in `which`."""
    return [1.0 if i in set(which) else 0.0 for i in range(n)]


# scenario -> (n, base's exact_match, cand's exact_match)
ACCURACY = {
    "floor": (20, correct(20, range(12)), correct(20, range(8))),  # 0.6 -> 0.4: 4 drops, p = 1/8
    "sharp": (20, correct(20, range(18)), correct(20, range(10))),  # 0.9 -> 0.5: 8 drops, p = 1/128
    "mild": (40, correct(40, range(36)), correct(40, range(29))),  # 0.9 -> 0.725: 7 drops, p = 1/64
    # 0.5 -> 0.25: 7 drops and 2 gains: p = P(|sum of 9 signs| >= 5) = 2 * (1 + 9 + 36) / 512 = 0.18
    "noisy": (20, correct(20, range(10)), correct(20, [0, 1, 2, 10, 11])),
    "better": (20, correct(20, range(10)), correct(20, range(16))),  # 0.5 -> 0.8
}
# scenario -> (base's, cand's) per-instance toxicity: lower is better
TOXICITY = {"sharp": ([0.1] * 20, [0.2] * 20), "better": ([0.3] * 20, [0.1] * 20)}
SLOW = [0.1 + 0.01 * i for i in range(20)]  # base's per-request latencies (s)
# scenario -> (base's, cand's) per-request latency_s
LATENCY = {
    "lat_warn": (SLOW, [2 * x for x in SLOW]),  # every request twice as slow: ratio 2, p = 1/2001
    "lat_crit": (SLOW, [4 * x for x in SLOW]),  # ratio 4
    "lat_noisy": (SLOW, [10 * x if i >= 18 else x for i, x in enumerate(SLOW)]),  # two outliers: p = 1/2
}

SPEC = {
    "rules": [
        {
            "kind": "metric",
            "name": "floor",
            "scenarios": ["floor", "sharp"],
            "warning": {"below": 0.7},
            "critical": {"below": 0.5},
        },
        {
            "kind": "metric",
            "name": "drop",
            "scenarios": ["sharp", "mild", "noisy", "better"],
            "warning": {"drop": 0.05},
            "critical": {"drop": 0.2},
        },
        {"kind": "metric", "family": "toxicity", "metric": "toxicity", "warning": {"drop": 0.05}},
        {"kind": "latency", "statistic": "p95", "warning": {"ratio": 1.5}, "critical": {"ratio": 3}},
        {"kind": "latency", "statistic": "p50", "scenarios": ["lat_noisy"], "warning": {"ratio": 1.5}},
    ]
}


def _score_rows(model: str, scenario: str, values: list[float], family: str, name: str) -> list[dict]:
    return [
        {
            "model": model,
            "version": VERSION,
            "scenario": scenario,
            "instance_id": f"i{i}",
            "metric": name,
            "family": family,
            "value": v,
            "request_id": f"{scenario}-r{i}",
            "prediction": "",
            "provenance_id": "p",
        }
        for i, v in enumerate(values)
    ]


def _completion(model: str, scenario: str, request_id: str, latency_s: float, error: str = "") -> dict:
    return {
        "model": model,
        "version": VERSION,
        "scenario": scenario,
        "request_id": request_id,
        "text": "",
        "tokens": "[]",
        "logprobs": "[]",
        "logprob": 0.0,
        "num_prompt_tokens": 1,
        "num_completion_tokens": 1,
        "latency_s": latency_s,
        "finish_reason": "stop",
        "error": error,
        "provenance_id": "p",
    }


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    instances, scores, completions = [], [], []
    for scenario, (n, base, cand) in ACCURACY.items():
        instances += [
            {
                "version": VERSION,
                "scenario": scenario,
                "instance_id": f"i{i}",
                "split": "test",
                "subset": "",
                "input": "q",
                "references": "[]",
                "num_correct_references": 1,
                "is_multiple_choice": False,
                "source_uri": "generator://t",
                "record": str(i),
            }
            for i in range(n)
        ]
        scores += _score_rows("base", scenario, base, "accuracy", "exact_match")
        scores += _score_rows("cand", scenario, cand, "accuracy", "exact_match")
    scores += _score_rows("solo", "sharp", [1.0] * 20, "accuracy", "exact_match")  # no previous: never graded
    for scenario, (base, cand) in TOXICITY.items():
        scores += _score_rows("base", scenario, base, "toxicity", "toxicity")
        scores += _score_rows("cand", scenario, cand, "toxicity", "toxicity")
    for scenario, (base, cand) in LATENCY.items():
        for i, (a, b) in enumerate(zip(base, cand)):
            completions += [_completion("base", scenario, f"r{i}", a), _completion("cand", scenario, f"r{i}", b)]
        # requests the baseline did not answer, or that failed, are not paired
        completions.append(_completion("cand", scenario, "only-cand", 99.0))
        completions.append(_completion("base", scenario, "failed", 0.1))
        completions.append(_completion("cand", scenario, "failed", 50.0, error="HTTP 500"))
    wh = Warehouse(tmp_path_factory.mktemp("alerts") / "warehouse.duckdb")
    wh.replace(
        {"version": VERSION},
        {
            "instances": pd.DataFrame(instances),
            "instance_scores": pd.DataFrame(scores),
            "completions": pd.DataFrame(completions),
        },
    )
    return wh


@pytest.fixture(scope="module")
def findings(warehouse) -> list[Finding]:
    return evaluate_alerts(warehouse, VERSION, AlertsSpec.model_validate(SPEC), MODELS, ALPHA, MAIN)


def by_key(findings: list[Finding]) -> dict[tuple[str, str], Finding]:
    found = {(f.rule, f.scenario): f for f in findings}
    assert len(found) == len(findings), "one finding per rule and scenario"
    return found


def test_levels_of_metric_rules(findings):
    f = by_key(findings)
    # absolute floors judge the candidate's mean alone, significant or not (floor: p = 1/8)
    assert f["floor", "floor"].level == "critical" and f["floor", "floor"].value == pytest.approx(0.4)
    assert f["floor", "floor"].threshold == "below 0.5" and f["floor", "floor"].p_value > ALPHA
    assert f["floor", "sharp"].level == "warning"  # 0.5 is not below 0.5, but below 0.7
    # a significant drop of 0.4 > 0.2: critical
    sharp = f["drop", "sharp"]
    assert (sharp.level, sharp.threshold) == ("critical", "drop > 0.2")
    assert (sharp.value, sharp.baseline_value, sharp.diff, sharp.n) == pytest.approx((0.5, 0.9, -0.4, 20))
    assert sharp.p_value == pytest.approx(1 / 128, abs=0.005) and sharp.ci_low <= -0.4 <= sharp.ci_high < 0
    assert sharp.message.startswith("cand vs base on sharp: exact_match 0.5 vs 0.9 (-0.4, 95% CI [")
    assert sharp.message.endswith(": critical (drop > 0.2)") and f"p = {sharp.p_value:.3g}" in sharp.message
    # a significant drop of 0.175, between 0.05 and 0.2: warning
    mild = f["drop", "mild"]
    assert (mild.level, mild.threshold, mild.n) == ("warning", "drop > 0.05", 40)
    assert mild.diff == pytest.approx(-0.175) and mild.p_value == pytest.approx(1 / 64, abs=0.008)
    # a drop of 0.25 > 0.2, but on 9 changed instances out of 20: not significant, so ok, and it says why
    noisy = f["drop", "noisy"]
    assert noisy.diff == pytest.approx(-0.25) and 0.14 < noisy.p_value < 0.22
    assert (noisy.level, noisy.threshold) == ("ok", "")
    assert noisy.message.endswith("ok (drop > 0.2, but not significantly worse at alpha 0.05)")
    # an improvement: ok
    assert f["drop", "better"].level == "ok" and f["drop", "better"].diff == pytest.approx(0.3)
    assert f["drop", "better"].message.endswith(": ok")


def test_lower_is_better_metrics_are_worse_when_higher(findings):
    f = by_key(findings)
    rose = f["toxicity toxicity", "sharp"]  # 0.1 -> 0.2 on every instance
    assert (rose.level, rose.threshold, rose.family) == ("warning", "rise > 0.05", "toxicity")
    assert rose.diff == pytest.approx(0.1) and rose.p_value < 0.001
    assert "toxicity toxicity 0.2 vs 0.1 (+0.1," in rose.message
    fell = f["toxicity toxicity", "better"]  # 0.3 -> 0.1: a drop of toxicity is an improvement
    assert fell.level == "ok" and fell.diff == pytest.approx(-0.2)


def test_latency_ratio_with_significance(findings):
    f = by_key(findings)
    warn, crit, noisy = f["latency p95", "lat_warn"], f["latency p95", "lat_crit"], f["latency p95", "lat_noisy"]
    # p95 of 0.10, 0.11, ..., 0.29 (numpy's linear interpolation): 0.28 + 0.05 * 0.01
    assert warn.baseline_value == pytest.approx(0.2805) and warn.value == pytest.approx(0.561)
    assert (warn.level, warn.threshold, warn.ratio, warn.n) == ("warning", "ratio > 1.5", pytest.approx(2.0), 20)
    assert warn.p_value == pytest.approx(1 / 2001) and warn.ci_low == pytest.approx(2.0) == warn.ci_high
    assert (warn.metric, warn.family, warn.diff) == ("latency_p95", "efficiency", None)
    assert "p95 latency 0.561 s vs 0.281 s (x2, 95% CI [2, 2], p = 0.0005): warning (ratio > 1.5)" in warn.message
    assert (crit.level, crit.ratio) == ("critical", pytest.approx(4.0))
    # two outliers make the p95 ten times higher, but two requests are no evidence (p = 1/2): ok
    assert noisy.ratio > 3 and noisy.p_value > 0.3 and noisy.level == "ok"
    assert noisy.message.endswith("ok (ratio > 3, but not significantly worse at alpha 0.05)")
    assert f["latency p50", "lat_noisy"].ratio == pytest.approx(1.0)  # the median is untouched


def test_only_models_with_a_baseline_are_graded(findings, warehouse):
    assert {(f.model, f.baseline) for f in findings} == {("cand", "base")}  # base and solo have no `previous`
    named = AlertsSpec.model_validate({**SPEC, "baseline": "base"})
    assert baselines(named, MODELS) == {"cand": "base", "solo": "base"}
    graded = evaluate_alerts(warehouse, VERSION, named, MODELS, ALPHA, MAIN)
    solo = [f for f in graded if f.model == "solo"]
    # solo has scores on sharp only: the floor and drop rules there (1.0 vs 0.9: ok)
    assert {(f.rule, f.scenario, f.level) for f in solo} == {("floor", "sharp", "ok"), ("drop", "sharp", "ok")}
    assert not [f for f in graded if f.model == "base"]
    with pytest.raises(CatalogError, match="baseline 'nobody' is not in the model registry"):
        baselines(AlertsSpec(baseline="nobody"), MODELS)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "alerts.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, problem",
    [
        ("baseline: previous\nrule: []\n", "rule: Extra inputs are not permitted"),
        (
            "rules:\n  - kind: metric\n    warning: {below: 0.5, drop: 0.1}\n",
            "give exactly one of below, above, drop (found below, drop)",
        ),
        ("rules:\n  - kind: metric\n    metric: exact_matc\n    warning: {drop: 0.1}\n", "unknown metric 'exact_matc'"),
        ("rules:\n  - kind: metric\n    family: toxicity\n    warning: {drop: 0.1}\n", "name a toxicity metric"),
        ("rules:\n  - kind: latency\n    statistic: p99\n    warning: {ratio: 2}\n", "rules.0.latency.statistic"),
        ("rules:\n  - kind: metric\n    warning: {drop: 0.1}\n    critical: {drop: 0.05}\n", "less strict"),
        ("rules:\n  - kind: metric\n", "give a warning or a critical threshold"),
        ("rules:\n  - kind: stability\n    warning: {above: 0.5}\n", "agreement is better when higher"),
        (
            "rules:\n  - {kind: metric, critical: {below: 0.6}}\n  - {kind: metric, warning: {drop: 0.1}}\n",
            "rules ['accuracy main'] share a label",
        ),
        # a threshold no value can cross (every comparison with NaN is false): the rule would never fire
        ("rules:\n  - kind: metric\n    critical: {below: .nan}\n", "Input should be a finite number"),
        ("rules:\n  - kind: metric\n    critical: {drop: .nan}\n", "Input should be a finite number"),
        ("rules:\n  - kind: metric\n    critical: {drop: -0.1}\n", "greater than or equal to 0"),
        ("rules: [unclosed\n", "not valid YAML"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_bad_files_are_named_with_their_problem(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(CatalogError) as e:
        load_alerts(path)
    assert str(e.value).startswith(f"{path}: ") and problem in str(e.value)


def test_a_webhook_url_in_the_file_is_refused_without_repeating_it(tmp_path):
    path = write(tmp_path, "webhook:\n  url_env: https://hooks.slack.com/services/T000/B000/filetoken123\n")
    with pytest.raises(CatalogError, match="NAME of the environment variable") as e:
        load_alerts(path)
    assert "filetoken123" not in str(e.value) and str(path) in str(e.value)


def test_files_missing_and_shipped(tmp_path, monkeypatch):
    with pytest.raises(CatalogError, match="file not found"):
        load_alerts(tmp_path / "nowhere.yaml")  # a named file must exist
    monkeypatch.setenv("HOLISTIC_RESOURCES", str(tmp_path))
    assert Deployment().alerts() == AlertsSpec()  # the deployment's default file is optional: no rules
    assert write(tmp_path, "# every line commented out\n") and Deployment().alerts() == AlertsSpec()
    with pytest.raises(CatalogError, match="nowhere.yaml: file not found"):
        Deployment.of(alerts=tmp_path / "nowhere.yaml").alerts()  # one named on its own must exist
    text = (REPO_ROOT / "resources" / "alerts.yaml").read_text()
    shipped = load_alerts(REPO_ROOT / "resources" / "alerts.yaml")
    # no rule active by default (a critical finding fails the run); the commented example rules are valid
    assert (
        shipped.baseline == "previous" and shipped.rules == () and shipped.webhook.url_env == "HOLISTIC_ALERT_WEBHOOK"
    )
    example = text.split("#   rules:\n")[1].split("\nbaseline:")[0]
    uncommented = "rules:\n" + "\n".join(line.removeprefix("#   ") for line in example.splitlines()) + "\n"
    rules = load_alerts(write(tmp_path, uncommented)).rules
    assert [r.kind for r in rules] == ["metric", "metric", "latency", "stability"]


# --- the webhook ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def receiver():
    with Receiver() as server:
        yield server


def test_notify_posts_a_slack_message_naming_the_failing_items(receiver, findings):
    receiver.bodies.clear()
    failed_check = Alert("critical", "run 1a2b: completions_succeed", "3 of 20 requests failed")
    failing = [f for f in findings if f.level != "ok"]
    assert notify([*findings, failed_check], receiver.url(), timeout_s=5) == len(failing) + 1
    [body] = receiver.bodies
    header, *sections = body["blocks"]
    assert header["type"] == "header" and header["text"]["type"] == "plain_text"
    assert header["text"]["text"] == "holistic-dagster: 4 critical, 4 warning"
    assert len(sections) == len(failing) + 1 and all(s["type"] == "section" for s in sections)
    texts = [s["text"]["text"] for s in sections]
    assert all(t.startswith(":red_circle: *CRITICAL*") for t in texts[:4])  # critical first
    assert any("run 1a2b: completions_succeed" in t for t in texts)
    for f in failing:  # each failing finding in its own section, with its message (escaped for Slack's mrkdwn)
        shown = f.message.replace(">", "&gt;")
        assert any(f"cand vs base on {f.scenario}: {f.rule}" in t and shown in t for t in texts)
    assert "on noisy" not in body["text"] and "on better" not in body["text"]  # ok findings are not sent
    assert body["text"].startswith("holistic-dagster: 4 critical, 4 warning\n[CRITICAL] ")
    assert len(body["text"].splitlines()) == len(failing) + 2


def test_notify_at_a_level_and_with_nothing_to_say(receiver, findings):
    receiver.bodies.clear()
    assert notify(findings, receiver.url(), timeout_s=5, min_level="critical") == 3
    assert {b["blocks"][1]["text"]["text"].split("*")[1] for b in receiver.bodies} == {"CRITICAL"}
    assert notify([f for f in findings if f.level == "ok"], receiver.url(), timeout_s=5) == 0
    assert len(receiver.bodies) == 1  # nothing posted
    key = "sk-" + "abcdefghijklmnopqrstuvwx"  # built here: no key-shaped literal in the repository
    leak = Alert("warning", "check failed", f"server said: Authorization: Bearer {key}")
    assert notify([leak], receiver.url(), timeout_s=5) == 1
    assert key not in str(receiver.bodies[-1])  # redacted before it leaves


def test_send_alerts_reads_the_url_from_the_named_variable(receiver, monkeypatch):
    spec = AlertsSpec.model_validate({"webhook": {"url_env": "TEAM_HOOK", "min_level": "critical"}})
    monkeypatch.delenv("TEAM_HOOK", raising=False)
    alerts = [Alert("critical", "a", "b"), Alert("warning", "c", "d")]
    assert webhook_url(spec) is None and send_alerts(alerts, spec) == 0
    monkeypatch.setenv("TEAM_HOOK", receiver.url())
    receiver.bodies.clear()
    assert webhook_url(spec) == receiver.url() and send_alerts(alerts, spec) == 1 and len(receiver.bodies) == 1
    assert TOKEN not in redact(f"posting to {receiver.url()}")  # read as a secret: redacted from logs from now on
    monkeypatch.setenv("TEAM_HOOK", f"hooks.example/{TOKEN}")
    with pytest.raises(CatalogError, match="TEAM_HOOK does not hold an http") as e:
        webhook_url(spec)
    assert TOKEN not in str(e.value)


def test_failed_posts_say_why_without_the_url(receiver):
    alerts = [Alert("warning", "title", "text")]
    with pytest.raises(AlertDeliveryError) as e:
        notify(alerts, receiver.url("broken"), timeout_s=5, url_env="TEAM_HOOK")
    message = str(e.value)
    assert "could not post 1 alert(s) to the webhook in $TEAM_HOOK: HTTP 500: internal error handling" in message
    assert TOKEN not in message and str(receiver.port) not in message and "/broken/" not in message
    closed = f"http://127.0.0.1:{free_port()}/hooks/T000/B000/{TOKEN}"  # nothing listens there
    with pytest.raises(AlertDeliveryError, match=r"\$HOLISTIC_ALERT_WEBHOOK: ConnectionError$") as e:
        notify(alerts, closed, timeout_s=5)
    assert TOKEN not in str(e.value) and "127.0.0.1" not in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__  # no chained exception carries the URL


def test_slack_limits():
    many = [Alert("warning", f"t{i}", "x" * 5000) for i in range(60)]
    payload = slack_payload(many, header="suite v2")
    assert len(payload["blocks"]) == 50 and payload["blocks"][-1]["elements"][0]["text"] == "… and 12 more"
    assert all(len(b["text"]["text"]) <= 3000 for b in payload["blocks"][1:49]) and len(payload["text"]) <= 4000
    assert slack_payload([Alert("critical", "<a & b>", "")])["blocks"][1]["text"]["text"].endswith(
        "&lt;a &amp; b&gt;\n"
    )


# --- the CI gate (alerts.gate) on the same warehouse: exact McNemar per scenario, Holm over all tests ---------


def test_mcnemar_and_holm_against_hand_computed_values():
    import numpy as np

    from holistic_dagster.alerts.gate import holm, mcnemar_exact

    a, b = np.array(correct(20, range(10))), np.array(correct(20, [0, 1, 2, 10, 11]))
    assert mcnemar_exact(a, b) == pytest.approx(2 * (1 + 9 + 36) / 512)  # 7 against 2 discordant pairs
    assert mcnemar_exact(a, a) == 1.0
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])  # 3 x 0.01; 2 x 0.03; max(0.04, 0.06)


def test_the_gate_with_the_default_rule_fails_only_where_holm_still_finds_a_drop(warehouse):
    from holistic_dagster.alerts.gate import REGRESSION, gate, gate_rules

    result = gate(warehouse, VERSION, "cand", "base", gate_rules(AlertsSpec()), ALPHA, MAIN)
    rows = {r.scenario: r for r in result.rows}
    assert set(rows) == set(ACCURACY) and all(r.test == "exact McNemar" for r in rows.values())
    # McNemar: floor 4 vs 0 discordant (2/16), sharp 8 vs 0 (2/256), mild 7 vs 0 (2/128), noisy 7 vs 2
    # (92/512), better 0 vs 6 (2/64); Holm over the five: sharp 5 x 2/256, mild 4 x 2/128, better 3 x 2/64,
    # floor 2 x 2/16, noisy max(92/512, 0.25)
    expected = {"sharp": 5 * 2 / 256, "mild": 4 * 2 / 128, "better": 3 * 2 / 64, "floor": 0.25, "noisy": 0.25}
    assert {s: r.p_adjusted for s, r in rows.items()} == pytest.approx(expected)
    assert rows["mild"].p_value == pytest.approx(2 / 128)  # significant alone, not after the correction
    assert [r.scenario for r in result.regressions] == ["sharp"] and rows["sharp"].threshold == "drop > 0"
    assert rows["better"].change == "no significant change" and rows["mild"].level == "ok"
    assert (rows["noisy"].baseline_only, rows["noisy"].candidate_only) == (7, 2)
    assert result.verdict == "regression" and result.exit_status == REGRESSION


def test_the_gate_grades_with_the_alerts_files_metric_rules(warehouse):
    from holistic_dagster.alerts.gate import gate, gate_rules

    spec = AlertsSpec.model_validate(SPEC)
    assert [r.label for r in gate_rules(spec)] == ["floor", "drop", "toxicity toxicity"]  # latency is not gated
    result = gate(warehouse, VERSION, "cand", "base", gate_rules(spec), ALPHA, MAIN)
    rows = {(r.rule, r.scenario): r for r in result.rows}
    assert len(rows) == 8  # floor x 2, drop x 4, toxicity x 2: Holm over eight tests
    assert rows[("floor", "floor")].level == "critical"  # 0.4, below 0.5: the mean alone decides
    assert rows[("floor", "sharp")].level == "warning"  # 0.5: below 0.7, not below 0.5
    sharp = rows[("drop", "sharp")]  # 6th smallest p of 8 once tied: 2/256 x 6 < 0.05
    assert sharp.p_adjusted == pytest.approx(6 * 2 / 256) and sharp.level == "critical"
    assert rows[("drop", "mild")].level == "ok"  # a drop of 0.175 > 0.05, but 4 x 2/128 = 0.0625
    toxicity = rows[("toxicity toxicity", "sharp")]
    assert toxicity.test == "permutation" and toxicity.level == "warning" and toxicity.change == "worse"
    assert rows[("toxicity toxicity", "better")].change == "better"
    assert [(r.rule, r.scenario) for r in result.regressions] == [("floor", "floor"), ("drop", "sharp")]


def test_the_gate_cannot_decide_without_runs_or_with_too_few_shared_instances(warehouse):
    from holistic_dagster.alerts.gate import REGRESSION, UNDECIDED, gate, gate_rules

    rules = gate_rules(AlertsSpec())
    missing = gate(warehouse, VERSION, "nobody", "base", rules, ALPHA, MAIN)
    assert missing.exit_status == UNDECIDED and missing.undecided == [
        "nobody has no scores in suite version t1: evaluate it first"
    ]
    few = gate(warehouse, VERSION, "cand", "base", rules, ALPHA, MAIN, min_instances=30)
    assert "floor: 20 shared instance(s) for accuracy (at least 30 needed)" in few.undecided
    # only mild has 40: one test, nothing to correct for, 2/128 < 0.05: a regression shown decides the gate
    assert [r.scenario for r in few.rows] == ["mild"] and few.rows[0].level == "critical"
    assert few.exit_status == REGRESSION
