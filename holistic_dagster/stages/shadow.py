"""The shadow-evaluation stages, one traffic log at a time: the log's records (PII removed) with production's
answers (table `traffic`); each candidate model's answers to the same prompts (`shadow_completions`, through the
completion cache); the judge's comparison of each candidate answer with production's in both position orders
(`shadow_verdicts`) and the candidate's win rate against production per traffic slice with a bootstrap CI
(`shadow_win_rates`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from holistic_dagster.adaptation.adapter import greedy_request
from holistic_dagster.config.redaction import redact
from holistic_dagster.config.shadow import ShadowSpec
from holistic_dagster.errors import HolisticError
from holistic_dagster.judging.battles import Answer, Battle, draw
from holistic_dagster.metrics.statistics import bootstrap_ci
from holistic_dagster.records import sha256_file, sha256_json
from holistic_dagster.shadow import Quarantined, read_traffic
from holistic_dagster.shadow.pii_check import TRAFFIC_TEXTS, DetectorError, found_per_row
from holistic_dagster.stages.budget import metered
from holistic_dagster.stages.completions import answer_requests
from holistic_dagster.stages.context import StageContext
from holistic_dagster.stages.judging import qualify, run_judge
from holistic_dagster.warehouse.access import ShadowCompletions, Traffic
from holistic_dagster.warehouse.records import (
    ShadowCompletionsRow,
    ShadowWinRatesRow,
    TrafficQuarantineRow,
    TrafficRow,
)
from holistic_dagster.warehouse.tables.shadow import (
    SHADOW_COMPLETIONS,
    SHADOW_VERDICTS,
    SHADOW_WIN_RATES,
    TRAFFIC_QUARANTINE,
)
from holistic_dagster.warehouse.tables.shadow import TRAFFIC as TRAFFIC_TABLE

TRAFFIC = "traffic"  # the scenario name shadow battles carry
BUDGET_SOURCE = "shadow.yaml's max_cost"


def load_traffic(stage: StageContext, spec: ShadowSpec, log: str, path: Path) -> dict[str, Any]:
    """The log file's records, PII removed, replacing the log's partition at once; malformed records are
    quarantined (table traffic_quarantine: line and reason, none of their text), and so is every record in which
    the independent detector (shadow.pii_check) still finds personal data: it runs before anything is stored,
    so a record the remover failed on is never stored, sent or judged. A detector that cannot run stores
    nothing (fails closed)."""
    try:
        records, quarantined = read_traffic(path, spec)
    except DetectorError as e:  # fail closed: unchecked text is never stored
        raise HolisticError(
            f"{path}: the independent PII detector could not run, nothing was stored: {redact(str(e))}"
        ) from e
    if not records:
        lines = ", ".join(str(q.line) for q in quarantined[:10]) or "none"
        raise HolisticError(f"{path}: no well-formed records (quarantined lines: {lines})")
    checksum = sha256_file(path)
    frame = TRAFFIC_TABLE.frame(
        TrafficRow(
            log=log, record_id=r.record_id, line=r.line, slice=r.slice,
            messages=json.dumps(list(r.messages), ensure_ascii=False), prompt=r.prompt, production=spec.production,
            production_text=r.response, production_tokens=r.response_tokens, production_latency_s=r.latency_s,
            logged_at=r.logged_at, source_uri=str(path), source_sha256=checksum,
        )
        for r in records
    )  # fmt: skip
    try:
        found = found_per_row(frame, TRAFFIC_TEXTS, spec.pii.policy)
    except Exception as e:  # fail closed: unchecked text is never stored
        raise HolisticError(
            f"{path}: the independent PII detector could not run, nothing was stored: {redact(str(e))}"
        ) from e
    leaked = [i for i, kinds in enumerate(found) if kinds]
    quarantined += [
        Quarantined(int(frame["line"].iat[i]), f"personal data the remover missed ({found[i]}): not stored")
        for i in leaked
    ]
    frame = frame.drop(index=frame.index[leaked]).reset_index(drop=True)
    quarantine = TRAFFIC_QUARANTINE.frame(
        TrafficQuarantineRow(log=log, line=q.line, reason=q.reason) for q in sorted(quarantined, key=lambda q: q.line)
    )
    stage.warehouse.replace({"log": log}, {"traffic": frame, "traffic_quarantine": quarantine})
    if frame.empty:
        raise HolisticError(
            f"{path}: every record was quarantined ({len(leaked)} with personal data the remover missed); only the "
            "quarantine records were stored"
        )
    slices = frame["slice"].value_counts().to_dict()
    return {
        "num_records": len(frame),
        "quarantined": len(quarantine),
        "quarantined_lines": [q.line for q in quarantined],
        "slices": {str(k): int(v) for k, v in slices.items()},
        "sha256": checksum,
    }


def answer_traffic(stage: StageContext, spec: ShadowSpec, log: str) -> dict[str, Any]:
    """Each candidate answers every prompt of the log (greedy, max_tokens), as a chat model where its registry
    entry says so; requests it has answered before come from the completion cache."""
    traffic = Traffic(stage.warehouse).rows(log)
    rows, metadata = [], {}
    for candidate in spec.candidates:
        client = stage.client(candidate)
        layout = getattr(client, "chat_prompt", None)
        requests = []
        for r in traffic.itertuples(index=False):
            prompt = layout(r.prompt) if layout else r.prompt
            requests.append(greedy_request(r.record_id, prompt, spec.max_tokens, client.count_tokens))
        decoding = {"method": "shadow", "max_tokens": spec.max_tokens, "temperature": 0.0, "stop": []}
        task = f"{candidate!r} answering traffic log {log!r}"
        spend = metered(stage, candidate, requests, spec.max_cost, BUDGET_SOURCE, task)
        done, info, sent = answer_requests(stage, candidate, requests, decoding, task, spend)
        for q in requests:
            c, provenance_id = done[q.request_id]
            rows.append(
                ShadowCompletionsRow(
                    log=log, record_id=q.instance_id, model=candidate, request_id=q.request_id, prompt=q.prompt,
                    text=c.text, num_completion_tokens=c.num_completion_tokens, latency_s=c.latency_s, error=c.error,
                    provenance_id=provenance_id,
                )
            )  # fmt: skip
        metadata[candidate] = {
            "sent": sent,
            "from_cache": len(requests) - sent,
            "failed": sum(1 for q in requests if done[q.request_id][0].error),
        }
    stage.warehouse.replace({"log": log}, {"shadow_completions": SHADOW_COMPLETIONS.frame(rows)})
    return metadata


def judge_traffic(stage: StageContext, spec: ShadowSpec, log: str) -> dict[str, Any]:
    """The judge compares each candidate answer with production's in both orders (the arena's judge and rules:
    a verdict that flips with the order is a tie; no verdict is an error, never a vote); then each candidate's
    win rate against production per slice."""
    traffic = Traffic(stage.warehouse).rows(log).set_index("record_id")
    # the answers to the log's current records (a changed log whose answers step failed left older ones)
    answers = ShadowCompletions(stage.warehouse).answered(log)
    battles = []
    for a in answers.itertuples(index=False):
        record = traffic.loc[a.record_id]
        bid = sha256_json([log, a.record_id, a.model])[:16]
        production = Answer(spec.production, "", record.production_text, int(record.production_tokens))
        candidate = Answer(a.model, a.request_id, a.text, int(a.num_completion_tokens))
        first = draw(spec.seed, bid, "order") % 2 == 0  # production shown first
        battles.append(Battle(bid, TRAFFIC, a.record_id, record.prompt, "", production, candidate, first))
    budget = (spec.max_cost, BUDGET_SOURCE) if spec.max_cost is not None else None
    measured, _ = qualify(stage, spec.judge, spec.template, spec.judge_max_tokens, spec.qualification, budget)
    judged, sent = run_judge(
        stage, spec.judge, battles, spec.template, spec.judge_max_tokens, "shadow_judge", budget, f"on log {log!r}"
    )
    side = {"a": "production", "b": "candidate", "tie": "tie", "": ""}
    rows = [
        {
            "log": log, "record_id": j.battle.instance_id, "candidate": j.battle.b.model, "judge": spec.judge,
            "slice": traffic.loc[j.battle.instance_id, "slice"], "candidate_first": not j.battle.a_first,
            **j.verdict_row(side),
        }
        for j in judged
    ]  # fmt: skip
    verdicts = SHADOW_VERDICTS.frame(rows)
    # an unqualified judge's verdicts are kept, but give no win rates (and so no alerts)
    rates = win_rates(verdicts if measured.qualified else verdicts.iloc[:0], spec.bootstrap_samples, spec.seed)
    stage.warehouse.replace({"log": log}, {"shadow_verdicts": verdicts, "shadow_win_rates": rates})
    voted = verdicts[verdicts["winner"] != ""]
    return {
        "qualification": measured.label,
        "judgements_sent": sent,
        "no_verdict": int((verdicts["winner"] == "").sum()),
        "position_inconsistency_rate": round(float((~voted["consistent"]).mean()), 4) if len(voted) else None,
        "win_rates": {
            f"{r.candidate} [{r.slice or 'all'}]": f"{r.win_rate:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}] n={r.n}"
            for r in rates.itertuples()
        },
    }


SCORE = {"candidate": 1.0, "tie": 0.5, "production": 0.0}
UNSLICED = "(no slice)"


def win_rates(verdicts: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Per candidate and slice ('' = all traffic): the share of records where the candidate's answer won
    (ties half), with a 95% percentile bootstrap CI over records. Verdicts without a winner are left out."""
    voted = verdicts[verdicts["winner"] != ""]
    rows = []
    for (log, candidate, judge), part in voted.groupby(["log", "candidate", "judge"]):
        # '' is all traffic; records the slice field is missing from are the slice UNSLICED
        named = part.assign(slice=part["slice"].replace("", UNSLICED))
        groups = [("", part), *sorted(named.groupby("slice"))] if part["slice"].ne("").any() else [("", part)]
        for slice_, group in groups:
            scores = group["winner"].map(SCORE).to_numpy(float)
            low, high = bootstrap_ci(scores, n_boot=n_boot, seed=seed)
            rows.append(
                ShadowWinRatesRow(
                    log=log, candidate=candidate, judge=judge, slice=slice_, n=len(scores),
                    wins=int((group["winner"] == "candidate").sum()), ties=int((group["winner"] == "tie").sum()),
                    losses=int((group["winner"] == "production").sum()), win_rate=float(np.mean(scores)), ci_low=low,
                    ci_high=high,
                )
            )  # fmt: skip
    return SHADOW_WIN_RATES.frame(rows)
