"""The arena section of the report's first page, read from the warehouse's arena tables: per judge the ratings
(Bradley-Terry with its 95% CI, the same with style control, online Elo), how many battles it judged and how
consistently, and the win-rate matrix. `holistic arena` prints the same in the terminal."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from holistic_dagster.arena.ratings import HUMAN, ONE_PROMPT
from holistic_dagster.results.arena import arena_record
from holistic_dagster.warehouse import ResultStore

HUMAN_LABEL = "people's votes (holistic vote)"
UNBOUNDED_PREFIX = "unbounded"  # how stages.arena notes a rating the data do not bound


@dataclass(frozen=True)
class Rating:
    text: str  # "-" where there is none
    ci: str = ""
    unbounded: bool = False  # marked *: only "above (below) all"
    note: str = ""  # why, for an unbounded one
    best: bool = False


@dataclass(frozen=True)
class RatingRow:
    model: str
    bradley_terry: Rating
    style: Rating
    online: Rating
    num_battles: int
    wins: str
    mean_answer_tokens: str


@dataclass(frozen=True)
class WinCell:
    opponent: str  # the column's model
    text: str  # the row model's share of wins against it, or "-"
    num_battles: int = 0


@dataclass(frozen=True)
class JudgeArena:
    judge: str
    label: str
    baseline: str
    rows: list[RatingRow]  # best Bradley-Terry rating first
    matrix: list[tuple[str, list[WinCell]]]  # row model -> a cell per column (the rows' models, same order)
    num_battles: int  # LLM judge: battles judged; people: votes
    no_verdict: int = 0
    inconsistency: str = "-"  # share of verdicts that flip with the order, e.g. "12.5%"
    num_voters: int = 0  # people: who have voted so far
    num_cast: int = 0  # people: the votes cast so far (the ratings are fitted on num_battles of them)
    # an LLM judge's qualification: "qualified judge: agreement 0.96, ..." or "unqualified judge: ..." (then
    # rows and matrix are empty: its verdicts are kept, its ratings refused)
    qualification: str = ""
    qualified: bool = True

    @property
    def human(self) -> bool:
        return self.judge == HUMAN

    @property
    def any_unbounded(self) -> bool:
        return any(r.bradley_terry.unbounded or r.style.unbounded for r in self.rows)


def arena_tables(store: ResultStore, version: str) -> list[JudgeArena]:
    """Per judge with ratings (sorted by name), what the arena section shows; empty when the version has no
    ratings, or the warehouse predates the arena tables."""
    record = arena_record(store, version)
    if record is None:
        return []
    ratings, votes, wins = record.ratings, record.votes, record.wins
    counts = record.battle_counts.set_index("judge")
    decided = record.judges.set_index("judge")
    out = []
    for judge in sorted(decided.index[~decided["qualified"].astype(bool)]):
        c = counts.loc[judge] if judge in counts.index else None
        out.append(
            JudgeArena(
                judge,
                f"judge {judge}",
                "",
                [],
                [],
                int(c["n"]) if c is not None else 0,
                int(c["no_verdict"]) if c is not None else 0,
                qualification=_qualification(decided.loc[judge]),
                qualified=False,
            )  # fmt: skip
        )
    for judge, part in ratings.groupby("judge", sort=True):
        out.append(_rated_judge(judge, part, counts, decided, votes, wins))
    return sorted(out, key=lambda a: (not a.qualified, a.judge))


def _rated_judge(judge: str, part: pd.DataFrame, counts, decided, votes, wins) -> JudgeArena:
    """A judge's (or the people's) ratings by every method, its battles' tally and its win-rate matrix."""
    by_method = {m: g.set_index("model") for m, g in part.groupby("method")}
    bt = by_method.get("bradley_terry", pd.DataFrame(columns=part.columns).set_index("model"))
    models = sorted(set(part["model"]), key=lambda m: (-bt["rating"].get(m, -math.inf), m))
    columns = {
        method: _ratings(by_method.get(method), models, ci=method == "bradley_terry")
        for method in ("bradley_terry", "bradley_terry_style", "online_elo")
    }
    first = part.drop_duplicates("model").set_index("model")  # the counts are the same for every method
    rows = [
        RatingRow(
            m,
            columns["bradley_terry"][i],
            columns["bradley_terry_style"][i],
            columns["online_elo"][i],
            int(first.at[m, "num_battles"]),
            f"{first.at[m, 'wins']:g}",
            f"{first.at[m, 'mean_answer_tokens']:.1f}",
        )
        for i, m in enumerate(models)
    ]
    if judge == HUMAN:
        # the votes the ratings were fitted on (each vote is one battle of two models), not those cast since
        fitted = int(first["num_battles"].sum()) // 2
        cast = int(votes["n"].iat[0])
        tally = {"num_battles": fitted, "num_voters": int(votes["voters"].iat[0]), "num_cast": cast}
    elif judge in counts.index:
        c = counts.loc[judge]
        voted = int(c["n"] - c["no_verdict"])
        rate = f"{c['inconsistent'] / voted:.1%}" if voted else "-"
        tally = {"num_battles": int(c["n"]), "no_verdict": int(c["no_verdict"]), "inconsistency": rate}
    else:
        tally = {"num_battles": 0}
    return JudgeArena(
        judge,
        HUMAN_LABEL if judge == HUMAN else f"judge {judge}",
        str(part["baseline"].iat[0]),
        rows,
        _matrix(wins[wins["judge"] == judge], models),
        **tally,
        qualification=_qualification(decided.loc[judge]) if judge in decided.index else "",
    )


def _qualification(row: pd.Series) -> str:
    """A judge's qualification as the report shows it."""
    if pd.isna(row["agreement"]):
        return str(row["reason"])
    state = "qualified judge" if row["qualified"] else "unqualified judge"
    return f"{state}: agreement {row['agreement']:.2f}, position consistency {row['position_consistency']:.2f}"


def _ratings(frame: pd.DataFrame | None, models: list[str], ci: bool) -> list[Rating]:
    """One method's ratings in the rows' order; the highest is bold (unless all are equal)."""
    if frame is None:
        return [Rating("-") for _ in models]
    values = [frame["rating"].get(m) for m in models]
    present = [v for v in values if v is not None and not pd.isna(v)]
    top = round(max(present)) if len(present) > 1 and round(min(present)) != round(max(present)) else None
    out = []
    for m, v in zip(models, values):
        if v is None or pd.isna(v):
            out.append(Rating("-"))
            continue
        r = frame.loc[m]
        interval = ""
        if ci and not (pd.isna(r["ci_low"]) or pd.isna(r["ci_high"])):
            interval = f"[{r['ci_low']:.0f}, {r['ci_high']:.0f}]"
        elif ci and str(r["note"]) == ONE_PROMPT:
            interval = "no CI: one prompt"
        unbounded = str(r["note"]).startswith(UNBOUNDED_PREFIX)
        out.append(Rating(f"{v:.0f}", interval, unbounded, str(r["note"]) if unbounded else "", round(v) == top))
    return out


def _matrix(wins: pd.DataFrame, models: list[str]) -> list[tuple[str, list[WinCell]]]:
    """Row model against column model (ties half); "-" on the diagonal and where the two never met."""
    cells = {(r.model, r.opponent): (r.win_rate, int(r.num_battles)) for r in wins.itertuples(index=False)}
    grid = []
    for m in models:
        row = []
        for o in models:
            rate, n = cells.get((m, o), (None, 0))
            row.append(WinCell(o, "-") if m == o or rate is None or not n else WinCell(o, f"{rate:.2f}", n))
        grid.append((m, row))
    return grid
