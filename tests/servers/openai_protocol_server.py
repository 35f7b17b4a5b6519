"""OpenAI-protocol test server with fault injection (a test double, named for what it is).

It speaks the `/v1/completions` wire format (including `echo` + `logprobs` prompt log-probabilities) and
answers with a real local transformers model, so its text and log-probabilities are real. Prompts that
contain a fault marker get scripted faults, one per attempt, to exercise retries:
  FAULT429 -> 429 with Retry-After: 0.3, then OK        FAULT500 -> 500, 500, then OK
  SLOW     -> sleeps 3 s (past the client timeout), then OK   MALFORMED -> a body that is not JSON
  ALWAYS500 -> 500 on every attempt      ECHOKEY -> 400 on every attempt, the error body quoting the request's
                                          key and Authorization header (as servers that echo a request do)
It counts requests per prompt and the most requests it ever had in flight, and keeps the last request's headers
and the usage it reported on each answer it gave (`billed`: what a provider would charge).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import torch
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from holistic_dagster.records import Request
from tests.servers import LoopbackServer

SCRIPTS = {
    "FAULT429": ["429", "ok"],
    "FAULT500": ["500", "500", "ok"],
    "SLOW": ["slow", "ok"],
    "MALFORMED": ["malformed"] * 10,
    "ALWAYS500": ["500"] * 100,
    "ECHOKEY": ["echo_key"] * 100,
}


class OpenAIProtocolTestServer(LoopbackServer):
    def __init__(self, client, api_key: str | None = None, usage_scale: int = 1, tokenize: bool = False):
        self.client = client  # a TransformersClient: the real model behind the answers
        self.api_key = api_key
        # the usage it reports: the model's token counts times this, as a provider whose tokenizer counts more
        self.usage_scale = usage_scale
        self.tokenized = 0  # /tokenize calls answered (served only with tokenize=True, as vLLM does)
        self.hits: Counter[str] = Counter()
        self.hits_by_key: Counter[tuple[str, str]] = Counter()  # (Authorization header, prompt): who sent what
        self.in_flight = 0
        self.max_in_flight = 0
        self.auth_failures = 0
        self.last_headers: dict[str, str] = {}  # of the last request answered
        self._lock = asyncio.Lock()
        self._answer_limit: int | None = None  # see hold_after
        self._answered = 0
        self._gate = threading.Event()
        self.held = 0  # requests waiting at the gate right now
        # (prompt, prompt tokens, completion tokens) of each answer given, as its usage reported them; an answer
        # held until release() is left out (given after its client was killed, it reaches no one)
        self.billed: list[tuple[str, int, int]] = []
        routes = [Route("/v1/completions", self.completions, methods=["POST"])]
        if tokenize:
            routes.append(Route("/tokenize", self.tokenize, methods=["POST"]))
        super().__init__(Starlette(routes=routes))

    async def tokenize(self, http: HttpRequest) -> JSONResponse:
        """vLLM's /tokenize: {"model", "prompt", "add_special_tokens"} -> {"count", "max_model_len", "tokens"}."""
        body = await http.json()
        count = self.client.count_tokens(body["prompt"]) * self.usage_scale
        self.tokenized += 1
        return JSONResponse({"count": count, "max_model_len": self.client.max_context, "tokens": list(range(count))})

    def hold_after(self, n: int) -> None:
        """Answer the next `n` requests, then hold every further one (received and counted in `hits`, never
        answered) until release(): how a test kills a client at a known point, whatever the timing."""
        self._answer_limit, self._answered = n, 0
        self._gate.clear()

    def release(self) -> None:
        self._answer_limit = None
        self._gate.set()

    def __exit__(self, *exc):
        self.release()  # held requests must not keep the server from stopping
        return super().__exit__(*exc)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def completions(self, http: HttpRequest) -> Response:
        if self.api_key and http.headers.get("authorization") != f"Bearer {self.api_key}":
            self.auth_failures += 1
            return JSONResponse({"error": {"message": "invalid api key", "type": "invalid_request_error"}}, 401)
        body = await http.json()
        prompt = body["prompt"]
        self.hits[prompt] += 1
        self.hits_by_key[(http.headers.get("authorization", ""), prompt)] += 1
        self.last_headers = dict(http.headers)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        held = False
        try:
            await asyncio.sleep(0.05)  # some latency, so concurrent requests overlap
            marker = next((m for m in SCRIPTS if m in prompt), None)
            if marker:
                script = SCRIPTS[marker]
                action = script[min(self.hits[prompt] - 1, len(script) - 1)]
                if action == "429":
                    return JSONResponse(
                        {"error": {"message": "slow down", "type": "rate_limit"}}, 429, headers={"Retry-After": "0.3"}
                    )
                if action == "500":
                    return JSONResponse({"error": {"message": "boom", "type": "server_error"}}, 500)
                if action == "slow":
                    await asyncio.sleep(3)
                if action == "echo_key":
                    header = http.headers.get("authorization", "")
                    message = f"bad request from key {header.removeprefix('Bearer ')} (Authorization: {header})"
                    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, 400)
                if action == "malformed":
                    return Response('{"id": "x", "choices": [', media_type="application/json")
            if self._answer_limit is not None:  # (one event loop: the check and the count cannot interleave)
                if self._answered >= self._answer_limit:
                    self.held += 1
                    await asyncio.to_thread(self._gate.wait)
                    self.held -= 1
                    held = True
                else:
                    self._answered += 1
            async with self._lock:  # one model call at a time
                answer = await asyncio.to_thread(self._echo if body.get("echo") else self._generate, body)
            if not held:
                usage = answer["usage"]
                self.billed.append((prompt, usage["prompt_tokens"], usage["completion_tokens"]))
            return JSONResponse(answer)
        finally:
            self.in_flight -= 1

    def _generate(self, body: dict) -> dict:
        request = Request(
            request_id="r",
            instance_id="i",
            kind="generate",
            prompt=body["prompt"],
            max_tokens=body.get("max_tokens", 16),
            stop=tuple(body.get("stop") or ()),
        )
        (c,) = self.client.generate([request])
        return {
            "id": "cmpl-test",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "text": c.text,
                    "finish_reason": "stop" if c.finish_reason == "stop" else "length",
                    "logprobs": {
                        "tokens": list(c.tokens),
                        "token_logprobs": list(c.logprobs),
                        "text_offset": [],
                        "top_logprobs": None,
                    },
                }
            ],
            "usage": {
                "prompt_tokens": c.num_prompt_tokens * self.usage_scale,
                "completion_tokens": c.num_completion_tokens * self.usage_scale,
                "total_tokens": (c.num_prompt_tokens + c.num_completion_tokens) * self.usage_scale,
            },
        }

    @torch.inference_mode()
    def _echo(self, body: dict) -> dict:
        """Prompt log-probabilities, as OpenAI's legacy completions API returns them with echo=True."""
        text = body["prompt"]
        tok = self.client.tokenizer
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc["input_ids"]
        logprobs = torch.log_softmax(self.client.model(torch.tensor([ids])).logits[0].float(), dim=-1)
        token_logprobs = [None] + [float(logprobs[k - 1, ids[k]]) for k in range(1, len(ids))]
        return {
            "id": "cmpl-echo",
            "object": "text_completion",
            "created": int(time.time()),
            "model": "test",
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "finish_reason": "length",
                    "logprobs": {
                        "tokens": tok.convert_ids_to_tokens(ids),
                        "token_logprobs": token_logprobs,
                        "text_offset": [start for start, _ in enc["offset_mapping"]],
                        "top_logprobs": None,
                    },
                }
            ],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": 0, "total_tokens": len(ids)},
        }
