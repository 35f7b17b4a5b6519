"""A Slack-compatible incoming webhook on loopback (a test double, named for what it is): /hooks/... records
the JSON bodies posted to it and answers "ok"; /broken/... answers 500 echoing the request path (as some servers
do), to check that an error message hides the URL; /reject/... answers 403 echoing the path and the query (a
signature in it); /moved/... redirects (307) to /hooks/... on this server, /elsewhere/<port>/... to another
server's /hooks/... (another host, for a webhook: another origin)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.routing import Route

from tests.servers import LoopbackServer

TOKEN = "fake-token-7f3a9c"


class WebhookReceiver(LoopbackServer):
    def __init__(self):
        self.bodies: list[dict] = []
        routes = [
            Route("/hooks/{rest:path}", self.hook, methods=["POST"]),
            Route("/broken/{rest:path}", self.broken, methods=["POST"]),
            Route("/reject/{rest:path}", self.reject, methods=["POST"]),
            Route("/moved/{rest:path}", self.moved, methods=["POST"]),
            Route("/elsewhere/{port:int}/{rest:path}", self.elsewhere, methods=["POST"]),
        ]
        super().__init__(Starlette(routes=routes))

    async def hook(self, request: Request):
        self.bodies.append(await request.json())
        return PlainTextResponse("ok")

    async def broken(self, request: Request):
        return PlainTextResponse(f"internal error handling {request.url.path}", status_code=500)

    async def reject(self, request: Request):
        return PlainTextResponse(f"forbidden: {request.url.path}?{request.url.query}", status_code=403)

    async def moved(self, request: Request):
        return RedirectResponse(f"/hooks/{request.path_params['rest']}", status_code=307)

    async def elsewhere(self, request: Request):
        port, rest = request.path_params["port"], request.path_params["rest"]
        return RedirectResponse(f"http://127.0.0.1:{port}/hooks/{rest}", status_code=307)

    def url(self, kind: str = "hooks") -> str:
        return f"http://127.0.0.1:{self.port}/{kind}/T000/B000/{TOKEN}"
