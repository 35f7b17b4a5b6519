"""Arena: pairwise battles, people's votes and the ratings made from them."""

from __future__ import annotations

from holistic_dagster.warehouse.tables.base import Column, Table, glossed

BATTLES = Table(
    "battles",
    "Arena: pairwise battles between two models' stored answers to one instance, judged in both position orders. "
    "judge: a registered model's name (LLM as judge), or 'human' (votes cast on `holistic vote`'s page). winner: a "
    "| b | tie, or '' when a judgement gave no verdict (error says why: such a row is never a vote). request_a / "
    "request_b: the judged completions (lineage to prompts and instances); judge_request_*: the judge's own "
    "requests, keys of the completion cache.",
    key=("version", "judge", "battle_id"),
    columns=(
        *glossed(
            "VARCHAR",
            "version",
            "judge",
            "battle_id",
            "scenario",
            "instance_id",
            "model_a",
            "model_b",
            "request_a",
            "request_b",
        ),
        *glossed("INTEGER", "tokens_a", "tokens_b"),
        Column("a_first", "BOOLEAN", 'the first judgement showed a\'s answer as "Assistant A"'),
        Column("verdict_first", "VARCHAR", "a | b | tie | '' per order"),
        Column("verdict_second", "VARCHAR", "a | b | tie | '' per order"),
        Column("winner", "VARCHAR"),
        Column("consistent", "BOOLEAN"),
        *glossed("VARCHAR", "error", "judge_request_first", "judge_request_second"),
        Column("reason_first", "VARCHAR", "the judge's outputs"),
        Column("reason_second", "VARCHAR", "the judge's outputs"),
        Column("provenance_id", "VARCHAR"),
    ),
)

VOTES = Table(
    "votes",
    "People's votes on `holistic vote`'s page: a battle of the suite's schedule, shown with its two answers in an "
    'order drawn per voter (shown_first: the model whose answer was "Answer 1"); model names shown only after the '
    "vote. The ratings count them as the judge 'human'.",
    key=("version", "battle_id", "voter"),
    columns=(
        *glossed(
            "VARCHAR",
            "version",
            "battle_id",
            "voter",
            "scenario",
            "instance_id",
            "model_a",
            "model_b",
            "request_a",
            "request_b",
        ),
        *glossed("INTEGER", "tokens_a", "tokens_b"),
        Column("shown_first", "VARCHAR", "a | b | tie"),
        Column("winner", "VARCHAR", "a | b | tie"),
        Column("voted_at", "TIMESTAMP"),
    ),
)

ARENA_RATINGS = Table(
    "arena_ratings",
    "Ratings per judge: Bradley-Terry (maximum likelihood, ties half) on the Elo scale with the suite's baseline at "
    "1000 and a bootstrap 95% CI over prompts; the same with style control (answer length); online Elo.",
    key=("version", "judge", "method", "model"),
    columns=(
        *glossed("VARCHAR", "version", "judge"),
        Column("method", "VARCHAR", "bradley_terry | bradley_terry_style | online_elo"),
        Column("model", "VARCHAR"),
        Column("rating", "DOUBLE"),
        Column("ci_low", "DOUBLE", null=True),
        Column("ci_high", "DOUBLE", null=True),
        Column("num_battles", "INTEGER", "ties count half"),
        Column("wins", "DOUBLE", "ties count half"),
        Column("mean_answer_tokens", "DOUBLE"),
        Column("baseline", "VARCHAR"),
        *glossed("INTEGER", "bootstrap_seed", "bootstrap_samples"),
        Column("note", "VARCHAR"),
    ),
)

ARENA_JUDGES = Table(
    "arena_judges",
    "The suite's judge models as its ratings used them: each one's qualification (judge_qualifications, over all "
    "sets, for the arena's template and max_tokens); an unqualified judge has battles but no ratings.",
    key=("version", "judge"),
    columns=(
        *glossed("VARCHAR", "version", "judge"),
        Column("qualified", "BOOLEAN"),
        Column("agreement", "DOUBLE", null=True),
        Column("position_consistency", "DOUBLE", null=True),
        Column("reason", "VARCHAR"),
    ),
)

ARENA_WIN_RATES = Table(
    "arena_win_rates",
    "Row model's share of wins against the column model (ties half) over their battles.",
    key=("version", "judge", "model", "opponent"),
    columns=(
        *glossed("VARCHAR", "version", "judge", "model", "opponent"),
        Column("win_rate", "DOUBLE"),
        Column("num_battles", "INTEGER"),
    ),
)
