"""A judged battle and the one row shape it is stored as (the arena's `battles`, shadow evaluation's
`shadow_verdicts`, a judge's `qualification_verdicts`): the verdict in each order, named by what the sides are
there (a/b, production/candidate, better/worse), their consistency, the judge's two requests and reasons."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from holistic_dagster.judging.battles import Battle
from holistic_dagster.judging.judge import Judgement
from holistic_dagster.records import Request

AB = {"a": "a", "b": "b", "tie": "tie", "": ""}  # the arena's own names for the sides
# the columns of verdict_row, in order (an empty table's columns; without winner where a table has none)
VERDICT_COLUMNS = ("verdict_first", "verdict_second", "winner", "consistent", "error", "judge_request_first",
                   "judge_request_second", "reason_first", "reason_second", "provenance_id")  # fmt: skip


@dataclass(frozen=True)
class Judged:
    """A battle, the judge's two requests (first order, swapped order), its outputs and the combined verdict."""

    battle: Battle
    requests: tuple[Request, Request]
    outputs: tuple[str, str]
    judgement: Judgement
    provenance_id: str

    def verdict_row(self, sides: Mapping[str, str] = AB, winner: bool = True) -> dict[str, Any]:
        """The verdict columns every judged table shares; `sides` names a and b as the table does."""
        j = self.judgement
        requests = (self.requests[0].request_id, self.requests[1].request_id)
        verdicts = (sides[j.verdict_first], sides[j.verdict_second], sides[j.winner])
        values = (*verdicts, j.consistent, j.error, *requests, *self.outputs, self.provenance_id)
        row = dict(zip(VERDICT_COLUMNS, values, strict=True))
        if not winner:
            del row["winner"]
        return row
