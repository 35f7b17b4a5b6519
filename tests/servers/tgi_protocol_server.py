"""TGI-protocol emulator for tests (no real TGI can run on these machines).

It serves a real local transformers model and follows TGI's documented `/generate` (and the compat `/`),
`/info` and `/health` schemas (docs/openapi.json in huggingface/text-generation-inference): greedy
generation with token details and top-n alternatives, and prompt log-probabilities ("prefill") when
decoder_input_details is set, the first prompt token's logprob being null as in TGI.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import torch
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.servers import LoopbackServer


class TGIProtocolEmulator(LoopbackServer):
    def __init__(self, client, model_id: str = "holistic/demo-llama-tuned"):
        self.client, self.model_id = client, model_id
        self.hits: Counter[str] = Counter()
        self.responses: list[dict] = []  # every /generate body sent, for schema validation
        app = Starlette(
            routes=[
                Route("/generate", self.generate, methods=["POST"]),
                Route("/", self.generate, methods=["POST"]),
                Route("/info", self.info, methods=["GET"]),
                Route("/health", self.health, methods=["GET"]),
            ]
        )
        super().__init__(app)
        self._model_lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def health(self, _: HttpRequest) -> Response:
        return Response(status_code=200)

    async def info(self, _: HttpRequest) -> JSONResponse:
        return JSONResponse(self.info_body())

    def info_body(self) -> dict:
        return {
            "model_id": self.model_id,
            "model_sha": "0123456789abcdef0123456789abcdef01234567",
            "model_pipeline_tag": "text-generation",
            "max_concurrent_requests": 128,
            "max_best_of": 2,
            "max_stop_sequences": 4,
            "max_input_tokens": self.client.max_context - 64,
            "max_total_tokens": self.client.max_context,
            "validation_workers": 2,
            "max_client_batch_size": 4,
            "router": "text-generation-router",
            "version": "3.3.6-dev0",
            "sha": None,
            "docker_label": None,
        }

    async def generate(self, http: HttpRequest) -> JSONResponse:
        body = await http.json()
        self.hits[body["inputs"]] += 1
        if "ALWAYS500" in body["inputs"]:  # TGI's error body
            return JSONResponse({"error": "Request failed during generation", "error_type": "generation"}, 500)
        result = await asyncio.to_thread(self._generate, body["inputs"], body.get("parameters") or {})
        self.responses.append(result)
        return JSONResponse(result)

    @torch.inference_mode()
    def _generate(self, prompt: str, params: dict) -> dict:
        tok, model = self.client.tokenizer, self.client.model
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        top_n = params.get("top_n_tokens") or 0
        stop = params.get("stop") or []
        with self._model_lock:
            logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
            prefill = [{"id": ids[0], "text": tok.decode([ids[0]]), "logprob": None}] + [
                {"id": ids[k], "text": tok.decode([ids[k]]), "logprob": float(logprobs[k - 1, ids[k]])}
                for k in range(1, len(ids))
            ]
            tokens, top_tokens, generated, finish = [], [], list(ids), "length"
            for _ in range(params.get("max_new_tokens") or 20):
                step = torch.log_softmax(model(torch.tensor([generated])).logits[0, -1].float(), dim=-1)
                nxt = int(step.argmax())
                if nxt == tok.eos_token_id:
                    finish = "eos_token"
                    break
                generated.append(nxt)
                tokens.append({"id": nxt, "text": tok.decode([nxt]), "logprob": float(step[nxt]), "special": False})
                if top_n:
                    values, indices = step.topk(top_n)
                    top_tokens.append(
                        [
                            {"id": int(i), "text": tok.decode([int(i)]), "logprob": float(v), "special": False}
                            for v, i in zip(values, indices)
                        ]
                    )
                text = tok.decode(generated[len(ids) :])
                if any(s in text for s in stop):
                    finish = "stop_sequence"
                    break
        details = {
            "finish_reason": finish,
            "generated_tokens": len(tokens),
            "seed": None,
            "prefill": prefill if params.get("decoder_input_details") else [],
            "tokens": tokens,
            "top_tokens": top_tokens,
            "best_of_sequences": None,
        }
        text = tok.decode(generated[len(ids) :])
        if params.get("return_full_text"):
            text = prompt + text
        return {"generated_text": text, "details": details if params.get("details", True) else None}
