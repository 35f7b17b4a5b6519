"""The arena stages: battles between models' stored answers on a suite's open-ended scenarios, judged by the
suite's judge models in both position orders (table `battles`), and the ratings fitted to the verdicts
(tables `arena_ratings`, `arena_win_rates`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from holistic_dagster.arena.ratings import (
    HUMAN,
    ONE_PROMPT,
    UNBOUNDED,
    bootstrap_ratings,
    online_elo,
    win_rate_matrix,
)
from holistic_dagster.config.catalog import ArenaSpec
from holistic_dagster.errors import CatalogError, HolisticError
from holistic_dagster.judging.battles import Answer, Battle, candidate_battles, draw, schedule
from holistic_dagster.stages.context import StageContext
from holistic_dagster.stages.judging import qualify, run_judge, stored_qualifications
from holistic_dagster.warehouse.access import Battles, Completions, Votes
from holistic_dagster.warehouse.records import ArenaJudgesRow, ArenaRatingsRow, VotesRow
from holistic_dagster.warehouse.rows import references_of
from holistic_dagster.warehouse.tables.arena import ARENA_JUDGES, ARENA_RATINGS, ARENA_WIN_RATES, BATTLES, VOTES


def arena_spec(stage: StageContext, version: str) -> ArenaSpec:
    arena = stage.catalog.suite(version).arena
    if arena is None:
        raise CatalogError(
            f"suite {version!r} has no `arena:` section: name its open-ended scenarios and judges in "
            f"assets/suites/{version}.yaml to run battles"
        )
    return arena


def scheduled_battles(stage: StageContext, version: str) -> list[Battle]:
    """The suite's battles: every pair of models whose stored completions answer the same original instance of
    an arena scenario, sampled to the suite's max_battles (seeded)."""
    arena = arena_spec(stage, version)
    rows = Completions(stage.warehouse).generated_on_originals(version, list(arena.scenarios))
    answers: dict[tuple[str, str], list[Answer]] = {}
    questions: dict[tuple[str, str], tuple[str, str]] = {}
    for r in rows.itertuples(index=False):
        key = (r.scenario, r.instance_id)
        answers.setdefault(key, []).append(Answer(r.model, r.request_id, r.text, int(r.num_completion_tokens)))
        refs = references_of(r.refs)
        questions[key] = (r.input, next((x["output"] for x in refs if x["correct"]), ""))
    return schedule(candidate_battles(answers, questions, arena.seed), arena.max_battles, arena.seed)


def judge_battles(stage: StageContext, version: str) -> dict[str, Any]:
    """Each of the suite's judges judges every scheduled battle in both orders (through its backend and the
    completion cache: a re-run sends nothing it has answered); each judge's rows replace its earlier ones at
    once. Human votes (judge 'human') are left as they are."""
    arena = arena_spec(stage, version)
    stage.warehouse.ensure_schema()  # a warehouse from an earlier release gets the arena's tables
    if not arena.judges:  # people's votes only (holistic vote)
        return {"num_battles": 0, "judges": "none: the suite's arena names no judge models (arena.judges)"}
    battles = scheduled_battles(stage, version)
    if not battles:
        raise HolisticError(
            f"suite {version!r}: no battles: fewer than two models have completions of the arena scenarios "
            f"({', '.join(arena.scenarios)}); evaluate at least two models first"
        )
    metadata: dict[str, Any] = {"num_battles": len(battles), "num_models": len({m for b in battles for m in b.models})}
    for judge in arena.judges:
        # measured first (stored with the judge's identity); its verdicts are kept whatever the outcome, and rate()
        # gives ratings only to a qualified judge
        measured, qualification_sent = qualify(stage, judge, arena.template, arena.max_tokens, arena.qualification)
        frame, sent = _judge(stage, version, judge, arena, battles)
        stage.warehouse.replace({"version": version, "judge": judge}, {"battles": frame})
        voted = frame[frame["winner"] != ""]
        metadata[judge] = {
            "qualification": measured.label,
            "qualification_judgements_sent": qualification_sent,
            "judgements_sent": sent,
            "votes": len(voted),
            "no_verdict": int((frame["winner"] == "").sum()),
            "position_inconsistency_rate": round(float((~voted["consistent"]).mean()), 4) if len(voted) else None,
            **{f"wins_{w}": int((voted["winner"] == w).sum()) for w in ("a", "b", "tie")},
        }
    return metadata


def _judge(
    stage: StageContext, version: str, judge: str, arena: ArenaSpec, battles: list[Battle]
) -> tuple[pd.DataFrame, int]:
    judged, sent = run_judge(stage, judge, battles, arena.template, arena.max_tokens, "arena_judge")
    rows = [
        {
            "version": version, "judge": judge, "battle_id": j.battle.battle_id, "scenario": j.battle.scenario,
            "instance_id": j.battle.instance_id, "model_a": j.battle.a.model, "model_b": j.battle.b.model,
            "request_a": j.battle.a.request_id, "request_b": j.battle.b.request_id,
            "tokens_a": j.battle.a.num_tokens, "tokens_b": j.battle.b.num_tokens, "a_first": j.battle.a_first,
            **j.verdict_row(),
        }
        for j in judged
    ]  # fmt: skip
    return BATTLES.frame(rows), sent


def rate(stage: StageContext, version: str) -> dict[str, Any]:
    """Per judge: Bradley-Terry ratings (Elo scale, the suite's baseline at 1000) with bootstrap 95% CIs over
    prompts, the same with style control (answer length difference as a covariate), online Elo in battle
    order, and the win-rate matrix. Battles without a verdict are not votes."""
    arena = arena_spec(stage, version)
    stage.warehouse.ensure_schema()
    # the suite's judges only: a judge taken out of arena.judges keeps its rows in `battles`, not its ratings
    battles = Battles(stage.warehouse).decided(version, list(arena.judges))
    # people's votes are the judge 'human', in the order they were cast (what online Elo follows)
    votes = Votes(stage.warehouse).as_battles(version, HUMAN)
    battles = pd.concat([battles, votes], ignore_index=True) if len(votes) else battles
    ratings: list[ArenaRatingsRow] = []
    matrices: list[pd.DataFrame] = []
    metadata: dict[str, Any] = {}
    qualifications = stored_qualifications(stage, arena.template, arena.max_tokens)
    judges = [
        ArenaJudgesRow(version=version, judge=judge, qualified=q.qualified, agreement=q.agreement,
                       position_consistency=q.consistency, reason=q.reason) if (q := qualifications.get(judge)) else
        ArenaJudgesRow(version=version, judge=judge, qualified=False, agreement=None, position_consistency=None,
                       reason="unqualified judge: not measured (run the arena's battles first)")
        for judge in arena.judges
    ]  # fmt: skip
    for judge, part in battles.groupby("judge", sort=True):
        decided = next((j for j in judges if j.judge == judge), None)
        if judge != HUMAN and (decided is None or not decided.qualified):
            metadata[judge] = {"skipped": decided.reason if decided else "not a judge of the suite"}
            continue
        frame = part.assign(
            prompt=part["scenario"] + "/" + part["instance_id"],
            length=_length_difference(part["tokens_a"].to_numpy(), part["tokens_b"].to_numpy()),
        ).reset_index(drop=True)
        models = sorted(set(frame["model_a"]) | set(frame["model_b"]))
        baseline = arena.baseline or models[0]
        if baseline not in models:  # e.g. people have not voted on the baseline's battles yet
            metadata[judge] = {
                "skipped": f"the baseline {baseline!r} has no battles judged by {judge!r} yet (models with "
                f"battles: {', '.join(models)}): no ratings anchored at it"
            }
            continue
        ratings += _judge_ratings(version, judge, frame, baseline, arena)
        matrices.append(_win_rates(version, judge, frame))
        metadata[judge] = {"num_votes": len(frame), "num_models": len(models), "baseline": baseline}
    stage.warehouse.replace(
        {"version": version},
        {
            "arena_ratings": ARENA_RATINGS.frame(ratings),
            "arena_win_rates": pd.concat(matrices) if matrices else ARENA_WIN_RATES.frame([]),
            "arena_judges": ARENA_JUDGES.frame(judges),
        },
    )
    return metadata


def _judge_ratings(
    version: str, judge: str, frame: pd.DataFrame, baseline: str, arena: ArenaSpec
) -> list[ArenaRatingsRow]:
    """One judge's rating rows: Bradley-Terry with and without style control (bootstrap CIs), and online Elo."""
    counts = _per_model(frame)
    n_boot, seed = arena.bootstrap_samples, arena.seed
    rows = []
    for method, table in (
        ("bradley_terry", bootstrap_ratings(frame, baseline, n_boot=n_boot, seed=seed)),
        ("bradley_terry_style", bootstrap_ratings(frame, baseline, n_boot=n_boot, seed=seed, style=["length"])),
    ):
        for r in table.itertuples(index=False):
            note = UNBOUNDED if r.unbounded else ONE_PROMPT if frame["prompt"].nunique() < 2 else ""
            rows.append(
                _rating_row(
                    version,
                    judge,
                    method,
                    r.model,
                    r.rating,
                    r.ci_low,
                    r.ci_high,
                    counts,
                    baseline,
                    seed,
                    n_boot,
                    note,
                )  # fmt: skip
            )
    note = f"sequential K={arena.k_factor:g} updates in battle order: depends on that order, unlike Bradley-Terry"
    for model, value in online_elo(frame, k=arena.k_factor, baseline=baseline).items():
        rows.append(
            _rating_row(version, judge, "online_elo", model, value, None, None, counts, baseline, seed, 0, note)
        )
    return rows


def _length_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Arena-Hard's style covariate: (len_a - len_b) / (len_a + len_b), 0 when both answers are empty."""
    total = a + b
    return np.asarray(np.divide(a - b, total, out=np.zeros(len(a), dtype=float), where=total > 0))


def _per_model(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Battles, wins (ties half) and mean answer length (tokens) per model."""
    score = frame["winner"].map({"a": 1.0, "b": 0.0, "tie": 0.5})
    sides = pd.concat(
        [
            pd.DataFrame({"model": frame["model_a"], "win": score, "tokens": frame["tokens_a"]}),
            pd.DataFrame({"model": frame["model_b"], "win": 1.0 - score, "tokens": frame["tokens_b"]}),
        ]
    )
    grouped = sides.groupby("model").agg(num_battles=("win", "size"), wins=("win", "sum"), tokens=("tokens", "mean"))
    per_model: dict[str, dict[str, float]] = grouped.to_dict("index")
    return per_model


def _rating_row(
    version: str, judge: str, method: str, model: str, rating: float, low: float | None, high: float | None,
    counts: dict[str, dict[str, float]], baseline: str, seed: int, n_boot: int, note: str,
) -> ArenaRatingsRow:  # fmt: skip
    c = counts[model]
    return ArenaRatingsRow(
        version=version, judge=judge, method=method, model=model, rating=float(rating),
        ci_low=None if low is None else float(low), ci_high=None if high is None else float(high),
        num_battles=int(c["num_battles"]), wins=float(c["wins"]), mean_answer_tokens=float(c["tokens"]),
        baseline=baseline, bootstrap_seed=seed, bootstrap_samples=n_boot, note=note or "",
    )  # fmt: skip


def _win_rates(version: str, judge: str, frame: pd.DataFrame) -> pd.DataFrame:
    rates, counts = win_rate_matrix(frame)
    long = rates.stack().rename("win_rate").reset_index()
    long.columns = ["model", "opponent", "win_rate"]
    n = counts.stack().rename("num_battles").reset_index()
    n.columns = ["model", "opponent", "num_battles"]
    out = long.merge(n, on=["model", "opponent"])
    out = out[out["num_battles"] > 0].assign(version=version, judge=judge)
    return out[list(ARENA_WIN_RATES.column_names)]


def shown_order(battle: Battle, voter: str) -> tuple[Answer, Answer]:
    """The order a voter sees a battle's answers in ("Answer 1", "Answer 2"): drawn per voter and battle, so
    position favours neither model, and the same voter sees the same order on reload."""
    return (battle.a, battle.b) if draw(0, voter, battle.battle_id) % 2 == 0 else (battle.b, battle.a)


def voting_queue(stage: StageContext, version: str, voter: str) -> tuple[list[Battle], int]:
    """The scheduled battles this voter has not voted on (in schedule order), and how many there are in all."""
    battles = scheduled_battles(stage, version)
    voted = Votes(stage.warehouse).voted(version, voter)
    return [b for b in battles if b.battle_id not in voted], len(battles)


def record_vote(stage: StageContext, version: str, voter: str, battle_id: str, choice: str) -> tuple[Battle, str]:
    """Stores a vote ("first", "second" or "tie": of the answers as this voter was shown them); returns the
    battle and its winner (a | b | tie). A second vote on the same battle by the same voter replaces the first."""
    if choice not in ("first", "second", "tie"):
        raise HolisticError(f"a vote is first, second or tie, not {choice!r}")
    battle = next((b for b in scheduled_battles(stage, version) if b.battle_id == battle_id), None)
    if battle is None:
        raise HolisticError(f"no battle {battle_id!r} in suite {version!r}'s arena schedule")
    first, second = shown_order(battle, voter)
    winner = "tie" if choice == "tie" else ("a" if (first if choice == "first" else second) is battle.a else "b")
    row = VotesRow(
        version=version, battle_id=battle_id, voter=voter, scenario=battle.scenario, instance_id=battle.instance_id,
        model_a=battle.a.model, model_b=battle.b.model, request_a=battle.a.request_id, request_b=battle.b.request_id,
        tokens_a=battle.a.num_tokens, tokens_b=battle.b.num_tokens, shown_first=first.model, winner=winner,
        voted_at=datetime.now(timezone.utc).replace(tzinfo=None),
    )  # fmt: skip
    stage.warehouse.upsert("votes", VOTES.frame([row]))
    return battle, winner
