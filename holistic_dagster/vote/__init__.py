"""The human vote page of the arena: a small Starlette app that shows a question and two anonymous answers
(a battle of the suite's schedule, in an order drawn per voter), records the vote with the voter's id in the
warehouse (table `votes`), reveals the models only after the vote, and shows progress. The arena_votes sensor
then fits the ratings again. Served by `holistic vote`."""

from __future__ import annotations

import re
from importlib.resources import files
from urllib.parse import parse_qs, quote

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from holistic_dagster.errors import HolisticError
from holistic_dagster.stages.arena import record_vote, shown_order, voting_queue
from holistic_dagster.stages.context import StageContext

VOTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(files("holistic_dagster.vote"))),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def vote_app(stage: StageContext, version: str, default_voter: str | None = None) -> Starlette:
    stage.warehouse.ensure_schema()  # a warehouse written by an earlier release has no votes table yet

    def voter_of(given: str | None) -> str:
        voter = (given or default_voter or "").strip()
        if not VOTER.match(voter):
            raise HolisticError(
                f"voter id {voter!r}: give one (?voter=alice) of letters, digits and . _ @ -, at most 64 characters"
            )
        return voter

    def render(voter: str, last: str | None) -> str:
        queue, total = voting_queue(stage, version, voter)
        battle = queue[0] if queue else None
        first, second = shown_order(battle, voter) if battle else (None, None)
        return _TEMPLATES.get_template("page.html.j2").render(
            version=version,
            voter=voter,
            done=total - len(queue),
            total=total,
            battle=battle,
            first=first.text if first else "",
            second=second.text if second else "",
            reveal=_reveal(stage, version, voter, last) if last else None,
        )

    async def page(request: Request) -> Response:
        try:
            voter = voter_of(request.query_params.get("voter"))
            return HTMLResponse(await run_in_threadpool(render, voter, request.query_params.get("last")))
        except HolisticError as e:
            return PlainTextResponse(str(e), status_code=400)

    async def vote(request: Request) -> Response:
        origin = request.headers.get("origin")
        if origin and origin != f"{request.url.scheme}://{request.headers.get('host')}":  # another site's form
            return PlainTextResponse(f"votes are cast from this page, not from {origin}", status_code=403)
        # a plain HTML form (application/x-www-form-urlencoded): parsed here, no multipart library needed
        form = {k: v[-1] for k, v in parse_qs((await request.body()).decode("utf-8")).items()}
        try:
            voter = voter_of(form.get("voter"))
            await run_in_threadpool(
                record_vote, stage, version, voter, form.get("battle_id", ""), form.get("choice", "")
            )
        except HolisticError as e:
            return PlainTextResponse(str(e), status_code=400)
        return RedirectResponse(f"./?voter={quote(voter)}&last={quote(form['battle_id'])}", status_code=303)

    return Starlette(routes=[Route("/", page), Route("/vote", vote, methods=["POST"])])


def _reveal(stage: StageContext, version: str, voter: str, battle_id: str) -> dict[str, str] | None:
    """The models behind the voter's last vote (shown only once it is cast)."""
    rows = stage.warehouse.df(
        "SELECT model_a, model_b, shown_first, winner FROM votes WHERE version = ? AND voter = ? AND battle_id = ?",
        [version, voter, battle_id],
    )
    if rows.empty:
        return None
    r = rows.iloc[0]
    second = r.model_b if r.shown_first == r.model_a else r.model_a
    choice = (
        "tie"
        if r.winner == "tie"
        else ("Answer 1" if (r.model_a if r.winner == "a" else r.model_b) == r.shown_first else "Answer 2")
    )
    return {"first": r.shown_first, "second": second, "choice": f"{choice} better" if choice != "tie" else "tie"}
