"""Text Generation Inference servers: TGI's /generate protocol (huggingface_hub's headers: its user agent and the
locally saved Hugging Face token, as Inference Endpoints need), sent by clients.http.JsonSession.

Generation asks for details (token logprobs, top-n alternatives); scoring sends prompt + continuation with
decoder_input_details=True and reads the continuation's prompt log-probabilities from the prefill tokens,
so the separate multiple-choice methods and language-model scoring work through TGI. The server's /info
(model id, model sha, version) is recorded with the results.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import aiohttp
import huggingface_hub
from huggingface_hub.utils import build_hf_headers

from holistic_dagster.clients.http import HttpClientBase, JsonSession, PermanentError, server_json
from holistic_dagster.clients.protocol import OnDone, cut_at_stop, keep_tokens_within, scored_completion
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Completion, Request

TOP_N = 5


def _details(output: dict[str, Any]) -> dict[str, Any]:
    details = output.get("details")
    if not details:
        raise PermanentError("malformed response: no details (the server ignored details=true)")
    return details


def completion_from_tgi(output: dict[str, Any], request: Request, latency_s: float) -> Completion:
    """Our completion record from a TGI /generate response (its JSON) with details."""
    details = _details(output)
    text, stopped = cut_at_stop(output["generated_text"], request.stop)
    generated = [t for t in details["tokens"] if not t["special"]]
    top = [{t["text"]: t["logprob"] for t in alternatives} for alternatives in (details.get("top_tokens") or [])]
    tokens, logprobs = [t["text"] for t in generated], [float(t["logprob"]) for t in generated]
    top = top or [{}] * len(generated)
    if stopped:  # TGI's tokens include the stop sequence's; our text ends before it
        tokens, logprobs, top = keep_tokens_within(text, tokens, logprobs, top)
    prefill = details.get("prefill")
    return Completion(
        request_id=request.request_id,
        text=text,
        tokens=tuple(tokens),
        logprobs=tuple(logprobs),
        logprob=float(sum(logprobs)),
        top_logprobs=tuple(t for t in top if t),
        num_prompt_tokens=len(prefill) if prefill else 0,
        num_completion_tokens=details["generated_tokens"],
        latency_s=latency_s,
        finish_reason="stop" if stopped else str(details["finish_reason"]),
    )


def continuation_from_prefill(output: dict[str, Any], request: Request, latency_s: float) -> Completion:
    """The continuation's tokens are the last prefill tokens whose texts spell it."""
    prefill = (output.get("details") or {}).get("prefill")
    if not prefill:
        raise PermanentError("malformed response: no prefill tokens (decoder_input_details ignored)")
    taken, spelled = [], ""
    for token in reversed(prefill):
        if len(spelled) >= len(request.continuation):
            break
        taken.insert(0, token)
        spelled = token["text"] + spelled
    if not spelled.endswith(request.continuation.strip()) or any(t["logprob"] is None for t in taken):
        raise PermanentError(f"prefill tokens do not spell the continuation {request.continuation!r}")
    return scored_completion(
        request, [t["text"] for t in taken], [t["logprob"] for t in taken], len(prefill) - len(taken), latency_s
    )


class TGIClient(HttpClientBase):
    backend = "tgi"
    supports_prompt_logprobs = True

    def __init__(self, spec: ModelSpec):
        if not spec.base_url:
            raise HolisticError(f"model {spec.name!r}: a TGI backend needs base_url (the server's address)")
        self.info = self.server_info(spec, spec.timeout_s)
        self._base_url = spec.base_url
        self._headers = build_hf_headers()  # the user agent, and the saved Hugging Face token if there is one
        super().__init__(spec, default_context=int(self.info.get("max_input_tokens") or 4096))

    def tokenize_call(self, text: str):
        return "/tokenize", {"inputs": text}, len  # TGI answers with the list of tokens

    @staticmethod
    def server_info(spec: ModelSpec, timeout_s: float) -> dict[str, Any]:
        """The server's /info (the model it serves, its revision, its limits)."""
        return server_json(spec, "/info", "TGI", timeout_s)

    @staticmethod
    def served_revision(spec: ModelSpec, timeout_s: float) -> str:
        info = TGIClient.server_info(spec, timeout_s)
        return f"{info.get('model_id')}@{info.get('model_sha')}"

    def describe(self) -> dict[str, Any]:
        info = self.info
        return {
            "backend": self.backend,
            "model_path": f"{self.spec.base_url} {info.get('model_id')}",
            "model_revision": self.spec.revision or info.get("model_sha") or f"{info.get('model_id')}@unpinned",
            "batch_size": None,
            "max_context": self.max_context,
            "hardware": "remote",
            "library_versions": {
                "huggingface_hub": huggingface_hub.__version__,
                "aiohttp": aiohttp.__version__,
                "text-generation-inference": info.get("version"),
            },
            "max_concurrency": self.spec.max_concurrency,
        }

    def generate(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        async def one(session: JsonSession, r: Request) -> Completion:
            started = time.perf_counter()
            parameters = {
                "details": True,
                "max_new_tokens": r.max_tokens,
                "do_sample": r.temperature > 0,
                "top_n_tokens": TOP_N,
                "return_full_text": False,
            }
            if r.stop:
                parameters["stop"] = list(r.stop)
            if r.temperature > 0:  # TGI refuses a temperature of 0
                parameters["temperature"] = r.temperature
            output = await session.post("/generate", {"inputs": r.prompt, "parameters": parameters})
            return completion_from_tgi(output, r, time.perf_counter() - started)

        return self._send_all(requests, one, on_done)

    def score(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        async def one(session: JsonSession, r: Request) -> Completion:
            started = time.perf_counter()
            parameters = {"details": True, "decoder_input_details": True, "max_new_tokens": 1}
            output = await session.post("/generate", {"inputs": r.prompt + r.continuation, "parameters": parameters})
            return continuation_from_prefill(output, r, time.perf_counter() - started)

        return self._send_all(requests, one, on_done)
