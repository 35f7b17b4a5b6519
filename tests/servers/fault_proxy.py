"""A reverse proxy on 127.0.0.1 in front of a real HTTP server (here llama.cpp's), injecting scripted faults into
the requests whose prompt carries a marker, one fault per attempt (the markers and scripts of the OpenAI-protocol
test server: FAULT429, FAULT500, SLOW, MALFORMED, ALWAYS500); every other request, and a scripted one once its
faults are spent, is forwarded as it is and answered by the real server. It counts the requests per prompt."""

from __future__ import annotations

import asyncio
from collections import Counter

import aiohttp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.servers import LoopbackServer
from tests.servers.openai_protocol_server import SCRIPTS


class FaultInjectingProxy(LoopbackServer):
    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.hits: Counter[str] = Counter()
        super().__init__(Starlette(routes=[Route("/{path:path}", self.forward, methods=["GET", "POST"])]))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def forward(self, http: Request) -> Response:
        raw = await http.body()
        prompt = ""
        if http.method == "POST" and http.url.path.endswith("completions"):
            body = await http.json()
            prompt = body.get("prompt") if isinstance(body.get("prompt"), str) else str(body.get("prompt"))
            self.hits[prompt] += 1
            marker = next((m for m in SCRIPTS if m in prompt), None)
            if marker:
                script = SCRIPTS[marker]
                action = script[min(self.hits[prompt] - 1, len(script) - 1)]
                if action == "429":
                    return JSONResponse({"error": {"message": "slow down"}}, 429, headers={"Retry-After": "0.3"})
                if action == "500":
                    return JSONResponse({"error": {"message": "boom"}}, 500)
                if action == "slow":
                    await asyncio.sleep(3)
                if action == "malformed":
                    return Response('{"choices": [', media_type="application/json")
        async with aiohttp.ClientSession() as session:
            async with session.request(
                http.method, self.upstream + http.url.path, data=raw, headers={"Content-Type": "application/json"}
            ) as answer:
                return Response(await answer.read(), answer.status, media_type="application/json")
