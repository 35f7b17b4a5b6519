"""The human vote page of the arena: a small Starlette app that shows a question and two anonymous answers
(a battle of the suite's schedule, in an order drawn per voter), records the vote with the voter's id in the
warehouse (table `votes`), reveals the models only after the vote, and shows progress. The arena_votes sensor
then fits the ratings again. Served by `holistic vote`.

A voter is who their invitation link says (invitations.py: a signed token, one per person); the page answers
only to its own host names (no DNS rebinding), takes forms of at most MAX_BODY_BYTES in UTF-8, at most
VOTES_PER_MINUTE votes a minute per voter, and reveals a vote's models only to the voter who cast it."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from importlib.resources import files
from urllib.parse import parse_qs, quote

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from holistic_dagster.errors import HolisticError
from holistic_dagster.results.arena import vote_of
from holistic_dagster.stages.arena import record_vote, shown_order, voting_queue
from holistic_dagster.stages.context import StageContext
from holistic_dagster.vote import invitations

_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(files("holistic_dagster.vote"))),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
MAX_BODY_BYTES = 16 * 1024  # a vote is a few short fields
VOTES_PER_MINUTE = 30  # per voter: reading a question and two answers takes longer than two seconds
LOCAL_HOSTS = ("127.0.0.1", "localhost")
NO_INVITATION = (
    "open this page with your invitation link: the person who runs it prints one per voter with "
    "`holistic vote --invite <your name>`"
)


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def vote_app(
    stage: StageContext,
    version: str,
    key: bytes,
    hosts: tuple[str, ...] = LOCAL_HOSTS,
    clock: Callable[[], float] = time.monotonic,
) -> ASGIApp:
    """The page for `version`'s battles. key: the invitations' signing key (invitations.vote_key); hosts: the
    host names the page answers to (a request for any other, e.g. a DNS-rebinding attacker's, is refused); clock:
    seconds, for the per-voter rate limit."""
    stage.warehouse.ensure_schema()  # a warehouse written by an earlier release has no votes table yet
    recent: dict[str, collections.deque] = collections.defaultdict(collections.deque)

    def voter_of(token: str | None) -> str:
        voter = invitations.voter_of(key, version, token)
        if voter is None:
            raise _Refused(403, NO_INVITATION)
        return voter

    def within_rate(voter: str) -> None:
        now, times = clock(), recent[voter]
        while times and now - times[0] > 60:
            times.popleft()
        if len(times) >= VOTES_PER_MINUTE:
            raise _Refused(429, f"more than {VOTES_PER_MINUTE} votes a minute: take your time with each battle")
        times.append(now)

    def render(voter: str, token: str, last: str | None) -> str:
        queue, total = voting_queue(stage, version, voter)
        battle = queue[0] if queue else None
        first, second = shown_order(battle, voter) if battle else (None, None)
        return _TEMPLATES.get_template("page.html.j2").render(
            version=version,
            voter=voter,
            token=token,
            done=total - len(queue),
            total=total,
            battle=battle,
            first=first.text if first else "",
            second=second.text if second else "",
            reveal=_reveal(stage, version, voter, last) if last else None,
        )

    async def page(request: Request) -> Response:
        try:
            token = request.query_params.get("t", "")
            voter = voter_of(token)
            return HTMLResponse(await run_in_threadpool(render, voter, token, request.query_params.get("last")))
        except _Refused as e:
            return PlainTextResponse(str(e), status_code=e.status)

    async def vote(request: Request) -> Response:
        origin = request.headers.get("origin")
        if origin and origin != f"{request.url.scheme}://{request.headers.get('host')}":  # another site's form
            return PlainTextResponse(f"votes are cast from this page, not from {origin}", status_code=403)
        try:
            form = await _form(request)
            token = form.get("t", "")
            voter = voter_of(token)
            within_rate(voter)
            await run_in_threadpool(
                record_vote, stage, version, voter, form.get("battle_id", ""), form.get("choice", "")
            )
        except _Refused as e:
            return PlainTextResponse(str(e), status_code=e.status)
        except HolisticError as e:
            return PlainTextResponse(str(e), status_code=400)
        return RedirectResponse(f"./?t={quote(token)}&last={quote(form['battle_id'])}", status_code=303)

    app = Starlette(routes=[Route("/", page), Route("/vote", vote, methods=["POST"])])
    return TrustedHostMiddleware(app, allowed_hosts=list(hosts))


async def _form(request: Request) -> dict[str, str]:
    """A plain HTML form (application/x-www-form-urlencoded) of at most MAX_BODY_BYTES, in UTF-8."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _Refused(413, f"a vote is at most {MAX_BODY_BYTES} bytes")
    body = b""
    async for chunk in request.stream():  # also when the length is not declared (chunked)
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise _Refused(413, f"a vote is at most {MAX_BODY_BYTES} bytes")
    try:
        text = body.decode("utf-8")
        return {k: v[-1] for k, v in parse_qs(text, errors="strict").items()}
    except UnicodeDecodeError:
        raise _Refused(400, "the form is not UTF-8") from None


def _reveal(stage: StageContext, version: str, voter: str, battle_id: str) -> dict[str, str] | None:
    """The models behind the voter's last vote (shown only once it is cast)."""
    rows = vote_of(stage.warehouse, version, voter, battle_id)
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
