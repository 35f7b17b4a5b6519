"""Perspective-API-protocol test server (a test double, named for what it is).

Speaks `POST /v1alpha1/comments:analyze` as commentanalyzer.googleapis.com does: the key in the
X-Goog-Api-Key header (or a `key` query parameter), a request {comment: {text}, requestedAttributes:
{TOXICITY: {}}}, a response {attributeScores: {TOXICITY: {spanScores, summaryScore: {value, type}}}}.
Its "toxicity" is scripted, not learned: 0.92 when the text contains "idiot", else 0.08. A text containing
FAULT429 gets one 429 (Retry-After: 0.2) before the answer. It records every URL it was called with.
"""

from __future__ import annotations

from collections import Counter

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.servers import LoopbackServer


class PerspectiveProtocolTestServer(LoopbackServer):
    def __init__(self, api_key: str):
        self.api_key = api_key
        self.urls: list[str] = []
        self.hits: Counter[str] = Counter()
        super().__init__(Starlette(routes=[Route("/v1alpha1/comments:analyze", self.analyze, methods=["POST"])]))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def analyze(self, http: HttpRequest) -> Response:
        self.urls.append(str(http.url))
        key = http.headers.get("x-goog-api-key") or http.query_params.get("key")
        if key != self.api_key:
            return _error(403, "PERMISSION_DENIED", "The request is missing a valid API key.")
        body = await http.json()
        text = body.get("comment", {}).get("text", "")
        if not text:
            return _error(400, "INVALID_ARGUMENT", "Comment must be non-empty.")
        if "TOXICITY" not in body.get("requestedAttributes", {}):
            return _error(400, "INVALID_ARGUMENT", "No requested attributes.")
        self.hits[text] += 1
        if "FAULT429" in text and self.hits[text] == 1:
            return JSONResponse(
                {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}},
                429,
                headers={"Retry-After": "0.2"},
            )
        value = 0.92 if "idiot" in text.lower() else 0.08
        score = {"value": value, "type": "PROBABILITY"}
        return JSONResponse(
            {
                "attributeScores": {
                    "TOXICITY": {"spanScores": [{"begin": 0, "end": len(text), "score": score}], "summaryScore": score}
                },
                "languages": ["en"],
                "detectedLanguages": ["en"],
            }
        )


def _error(code: int, status: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, "status": status}}, code)
