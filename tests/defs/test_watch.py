"""A watched server's reported revision is part of a model's identity: a new TGI model_sha or a new
/v1/models entry means a new revision; a server that cannot be reached keeps the last identity."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from holistic_dagster.clients.identity import model_identity
from holistic_dagster.config.models import ModelSpec
from tests.servers import LoopbackServer


class ServedModels(LoopbackServer):
    """Answers TGI's GET /info and an OpenAI-compatible GET /v1/models with a revision the test sets."""

    def __init__(self):
        self.sha = "aaa111"
        super().__init__(Starlette(routes=[Route("/info", self.info), Route("/v1/models", self.models)]))

    async def info(self, request):
        return JSONResponse({"model_id": "org/model", "model_sha": self.sha, "version": "3.3.6"})

    async def models(self, request):
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": "served-model", "object": "model", "created": 1, "root": f"/m/{self.sha}"}],
            }
        )


def test_watched_revisions_change_the_identity():
    with ServedModels() as server:
        base = f"http://127.0.0.1:{server.port}"
        tgi = ModelSpec(name="t", backend="tgi", path="t", base_url=base, watch=True)
        openai = ModelSpec(name="o", backend="openai", path="served-model", base_url=f"{base}/v1", watch=True)
        first = {spec.name: model_identity(spec, None)[0] for spec in (tgi, openai)}
        assert {s.name: model_identity(s, None)[0] for s in (tgi, openai)} == first  # stable
        server.sha = "bbb222"
        second = {spec.name: model_identity(spec, None)[0] for spec in (tgi, openai)}
        assert second["t"] != first["t"] and second["o"] != first["o"]
        unwatched = ModelSpec(name="t", backend="tgi", path="t", base_url=base)
        assert model_identity(unwatched, None)[0] == model_identity(unwatched.model_copy(), None)[0]
    gone = ModelSpec(name="t", backend="tgi", path="t", base_url=base, watch=True)  # the server is down now
    identity, warning = model_identity(gone, "previous-identity")
    assert identity == "previous-identity" and "could not read the served revision" in warning
    missing = openai.model_copy(update={"path": "other-model"})
    with ServedModels() as server:
        moved = missing.model_copy(update={"base_url": f"http://127.0.0.1:{server.port}/v1"})
        assert "is not in" in model_identity(moved, "x")[1]
