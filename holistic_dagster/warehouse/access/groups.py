"""The accessors of the arena's, the judges', shadow evaluation's, the leaderboard's and efficient evaluation's
tables that the stages and checks read (tables/arena.py, judging.py, shadow.py, summaries.py, efficient.py declare
them): each table's SQL in one class."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.warehouse.access.base import Accessor
from holistic_dagster.warehouse.records.arena import (
    ArenaJudgesRow,
    ArenaRatingsRow,
    ArenaWinRatesRow,
    BattlesRow,
    VotesRow,
)
from holistic_dagster.warehouse.records.judging import JudgeQualificationsRow, SafetyAgreementRow
from holistic_dagster.warehouse.records.shadow import ShadowCompletionsRow, ShadowVerdictsRow, TrafficRow
from holistic_dagster.warehouse.tables.arena import ARENA_JUDGES, ARENA_RATINGS, ARENA_WIN_RATES, BATTLES, VOTES
from holistic_dagster.warehouse.tables.judging import JUDGE_QUALIFICATIONS, SAFETY_AGREEMENT
from holistic_dagster.warehouse.tables.shadow import SHADOW_COMPLETIONS, SHADOW_VERDICTS, TRAFFIC

_BATTLE = "battle_id, scenario, instance_id, model_a, model_b, tokens_a, tokens_b, winner"


class Battles(Accessor[BattlesRow]):
    """`battles`: each judge's verdict on a pair of models' answers."""

    table = BATTLES

    def decided(self, version: str, judges: list[str]) -> pd.DataFrame:
        """judge, battle_id, scenario, instance_id, model_a, model_b, tokens_a, tokens_b, winner: the judges'
        battles with a verdict, by judge and battle (a judge left out keeps its rows, not its ratings)."""
        return self._df(
            f"SELECT judge, {_BATTLE} FROM battles WHERE version = ? AND winner <> '' "
            "AND judge IN (SELECT unnest(?::VARCHAR[])) ORDER BY judge, battle_id",
            [version, judges],
        )

    def counts(self, version: str) -> pd.DataFrame:
        """judge, n, no_verdict, inconsistent: per judge, its battles, those without a verdict, and those whose
        verdict changed with the answers' order."""
        return self._df(
            "SELECT judge, count(*) AS n, count(*) FILTER (WHERE winner = '') AS no_verdict, "
            "count(*) FILTER (WHERE winner <> '' AND NOT consistent) AS inconsistent "
            "FROM battles WHERE version = ? GROUP BY judge",
            [version],
        )

    def traced(self, version: str, judges: list[str]) -> pd.DataFrame:
        """judge, battle_id, winner, model_a, model_b, found_a, found_b: the judges' battles, each with the request
        ids of the stored completions it names (null where a completion is missing)."""
        return self._df(
            "SELECT b.judge, b.battle_id, b.winner, b.model_a, b.model_b, ca.request_id AS found_a, "
            "cb.request_id AS found_b FROM battles b "
            "LEFT JOIN completions ca ON ca.version = b.version AND ca.scenario = b.scenario AND ca.model = b.model_a "
            "AND ca.request_id = b.request_a "
            "LEFT JOIN completions cb ON cb.version = b.version AND cb.scenario = b.scenario AND cb.model = b.model_b "
            "AND cb.request_id = b.request_b "
            "WHERE b.version = ? AND b.judge IN (SELECT unnest(?::VARCHAR[]))",
            [version, judges],
        )


class Votes(Accessor[VotesRow]):
    """`votes`: people's verdicts on the arena's battles."""

    table = VOTES

    def as_battles(self, version: str, judge: str) -> pd.DataFrame:
        """Battles' columns (see Battles.decided) with `judge` as the judge: every vote, in the order cast."""
        return self._df(
            f"SELECT ? AS judge, {_BATTLE} FROM votes WHERE version = ? ORDER BY voted_at, voter", [judge, version]
        )

    def seen(self) -> pd.DataFrame:
        """version, n, last: per version, its votes and the latest one's time (text)."""
        return self._df("SELECT version, count(*) AS n, max(voted_at)::VARCHAR AS last FROM votes GROUP BY 1", [])

    def count(self, version: str) -> pd.DataFrame:
        """n, voters: the version's votes and how many people cast them."""
        return self._df("SELECT count(*) AS n, count(DISTINCT voter) AS voters FROM votes WHERE version = ?", [version])

    def of(self, version: str, voter: str, battle_id: str) -> pd.DataFrame:
        """model_a, model_b, shown_first, winner: a voter's vote on a battle (no row before it is cast)."""
        return self._df(
            "SELECT model_a, model_b, shown_first, winner FROM votes WHERE version = ? AND voter = ? AND battle_id = ?",
            [version, voter, battle_id],
        )

    def voted(self, version: str, voter: str) -> set[str]:
        """The battles a voter has voted on (none where the store was never written)."""
        if not self.store.path.exists():
            return set()
        frame = self._df("SELECT battle_id FROM votes WHERE version = ? AND voter = ?", [version, voter])
        return set(frame["battle_id"])


class ArenaRatings(Accessor[ArenaRatingsRow]):
    """`arena_ratings`: each judge's rating of each model."""

    table = ARENA_RATINGS

    def for_display(self, version: str) -> pd.DataFrame:
        """judge, model, rating, ci_low, ci_high, num_battles, mean_answer_tokens (one decimal): each judge's
        Bradley-Terry ratings, best first."""
        return self._df(
            "SELECT judge, model, round(rating, 1) AS rating, round(ci_low, 1) AS ci_low, round(ci_high, 1) AS "
            "ci_high, num_battles, round(mean_answer_tokens, 1) AS mean_answer_tokens FROM arena_ratings "
            "WHERE version = ? AND method = 'bradley_terry' ORDER BY judge, rating DESC",
            [version],
        )

    def bradley_terry(self, version: str) -> pd.DataFrame:
        """judge, model, rating, ci_low, ci_high, is_baseline: the Bradley-Terry ratings."""
        return self._df(
            "SELECT judge, model, rating, ci_low, ci_high, model = baseline AS is_baseline FROM arena_ratings "
            "WHERE version = ? AND method = 'bradley_terry'",
            [version],
        )


class ArenaJudges(Accessor[ArenaJudgesRow]):
    """`arena_judges`: whether each judge of a version's arena qualified, and how it was measured."""

    table = ARENA_JUDGES


class ArenaWinRates(Accessor[ArenaWinRatesRow]):
    """`arena_win_rates`: each judge's pairwise win rates of the models."""

    table = ARENA_WIN_RATES


class SafetyAgreement(Accessor[SafetyAgreementRow]):
    """`safety_agreement`: each safety judge's agreement with people's labels, per measurement."""

    table = SAFETY_AGREEMENT

    def latest(self, version: str) -> pd.DataFrame:
        """judge, judge_identity, measured_on, answers_of, human_label, n, agreeing, agreement, agreement_low,
        agreement_high, kappa, scores: each judge's latest measurement per kind of answers, model and label."""
        return self._df(
            "SELECT judge, judge_identity, measured_on, answers_of, human_label, n, agreeing, agreement, "
            "agreement_low, agreement_high, kappa, scores FROM safety_agreement WHERE version = ? QUALIFY "
            "row_number() OVER (PARTITION BY judge, measured_on, answers_of, human_label ORDER BY measured_at DESC) "
            "= 1 ORDER BY judge, measured_on, human_label",
            [version],
        )


class JudgeQualifications(Accessor[JudgeQualificationsRow]):
    """`judge_qualifications`: each judge's agreement with people, measured per template and max_tokens."""

    table = JUDGE_QUALIFICATIONS

    def measured(self, template: str, max_tokens: int, source: str) -> pd.DataFrame:
        """judge, agreement, position_consistency, qualified, reason."""
        return self._df(
            "SELECT judge, agreement, position_consistency, qualified, reason FROM judge_qualifications "
            "WHERE template = ? AND max_tokens = ? AND source = ?",
            [template, max_tokens, source],
        )


class Traffic(Accessor[TrafficRow]):
    """`traffic`: a production log's records, as stored (personal data removed)."""

    table = TRAFFIC

    def rows(self, log: str) -> pd.DataFrame:
        """Every column, in the log's order; HolisticError where none is stored."""
        frame = self._df("SELECT * FROM traffic WHERE log = ? ORDER BY line", [log])
        if frame.empty:
            raise HolisticError(f"no traffic stored for log {log!r}: materialize shadow/traffic for it first")
        return frame

    def texts(self, log: str) -> pd.DataFrame:
        """line, record_id, slice, messages (JSON text), prompt, production_text, logged_at: in the log's order."""
        return self._df(
            "SELECT line, record_id, slice, messages::VARCHAR AS messages, prompt, production_text, logged_at "
            "FROM traffic WHERE log = ? ORDER BY line",
            [log],
        )


class ShadowCompletions(Accessor[ShadowCompletionsRow]):
    """`shadow_completions`: the candidates' answers to a log's records."""

    table = SHADOW_COMPLETIONS

    def answered(self, log: str) -> pd.DataFrame:
        """Every column of the answers to the log's current records that succeeded (a changed log whose answers
        step failed left answers to older ones)."""
        return self._df(
            "SELECT a.* FROM shadow_completions a JOIN traffic t USING (log, record_id) "
            "WHERE a.log = ? AND a.error = '' AND a.prompt IS NOT NULL",
            [log],
        )


class ShadowVerdicts(Accessor[ShadowVerdictsRow]):
    """`shadow_verdicts`: the judge's verdict, candidate against production, per record."""

    table = SHADOW_VERDICTS

    def of_log(self, log: str) -> pd.DataFrame:
        """candidate, record_id, winner."""
        return self._df("SELECT candidate, record_id, winner FROM shadow_verdicts WHERE log = ?", [log])
