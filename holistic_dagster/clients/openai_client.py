"""OpenAI and OpenAI-compatible servers (vLLM, SGLang, `transformers serve`, ...): the `openai` SDK's base URL and
headers, sent by clients.http.JsonSession (aiohttp).

The API key is read from the environment variable the registry names (`api_key_env`); it is never logged,
stored or put in metadata, and error text that quotes it is redacted (holistic_dagster.config.redaction). Retries,
backoff and concurrency come from clients.http.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx2  # the SDK's HTTP library: only to build an SDK client that sends nothing
import openai
import requests

from holistic_dagster.clients.http import HttpClientBase, JsonSession, PermanentError, tls_context
from holistic_dagster.clients.protocol import OnDone, generated_completion, scored_completion, token_logprobs
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.config.redaction import read_secret
from holistic_dagster.errors import CatalogError
from holistic_dagster.records import Completion, Request

TOP_N = 5  # alternatives asked for per generated token


def _api_key(spec: ModelSpec) -> str:
    if not spec.api_key_env:
        return "EMPTY"  # local OpenAI-compatible servers accept any key
    value = read_secret(spec.api_key_env)  # redacted from every error text from now on
    if not value:
        raise CatalogError(
            f"model {spec.name!r}: environment variable {spec.api_key_env} (its API key) is not set; set it, or "
            f"give the model `api_key_env: null` in resources/models.yaml if its server needs no key"
        )
    return value


def _sdk_request_settings(spec: ModelSpec, key: str) -> tuple[str, dict[str, str]]:
    """The base URL and headers the openai SDK would send (auth, organization and project from OPENAI_ORG_ID /
    OPENAI_PROJECT_ID, OPENAI_BASE_URL when the registry gives none, its user agent): the SDK configures,
    clients.http.JsonSession sends."""
    sdk = openai.AsyncOpenAI(
        base_url=spec.base_url, api_key=key, max_retries=0, http_client=httpx2.AsyncClient(verify=tls_context())
    )
    headers = {**sdk.default_headers, **sdk.auth_headers}
    return str(sdk.base_url), {name: value for name, value in headers.items() if isinstance(value, str)}


class OpenAICompatibleClient(HttpClientBase):
    backend = "openai"

    def __init__(self, spec: ModelSpec):
        super().__init__(spec, default_context=4096)
        self.supports_prompt_logprobs = spec.prompt_logprobs and not spec.chat
        self._base_url, self._headers = _sdk_request_settings(spec, _api_key(spec))

    def tokenize_call(self, text: str):
        """vLLM's (and SGLang's) /tokenize, beside /v1 on an OpenAI-compatible server; OpenAI's own API has none."""
        parts = urlsplit(self._base_url)
        if parts.hostname and parts.hostname.endswith("openai.com"):
            return None
        root = self._base_url.rstrip("/").removesuffix("/v1")
        body = {"model": self.spec.path, "prompt": text, "add_special_tokens": False}
        return f"{root}/tokenize", body, lambda answer: answer["count"]

    @staticmethod
    def served_revision(spec: ModelSpec, timeout_s: float) -> str:
        """The model's entry in the server's /v1/models (its id, root and creation time)."""
        base = (spec.base_url or "").rstrip("/")
        headers = {}
        if spec.api_key_env:
            if not (key := read_secret(spec.api_key_env)):
                raise KeyError(spec.api_key_env)  # (as os.environ[...] did: the variable is not set)
            headers["Authorization"] = f"Bearer {key}"
        listing = requests.get(f"{base}/models", headers=headers, timeout=timeout_s)
        listing.raise_for_status()
        for entry in listing.json().get("data", []):
            if entry.get("id") == spec.path:
                return f"{entry.get('id')}@{entry.get('root', '')}@{entry.get('created', '')}"
        raise LookupError(f"{spec.path!r} is not in {base}/models")

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            # the server the requests go to (OPENAI_BASE_URL when the registry names none): part of the completion
            # cache's key, so two servers that serve the same model name never share cached answers
            "model_path": f"{self._base_url.rstrip('/')} {self.spec.path}",
            "model_revision": self.spec.revision or f"served:{self.spec.path}",
            "batch_size": None,
            "max_context": self.max_context,
            "hardware": "remote",
            "library_versions": {"openai": openai.__version__, "aiohttp": aiohttp.__version__},
            "max_concurrency": self.spec.max_concurrency,
        }

    # --- requests -------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        return self._send_all(requests, self._generate_one, on_done)

    def score(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        if requests and not self.supports_prompt_logprobs:
            raise CatalogError(f"model {self.spec.name!r} cannot return prompt log-probabilities")
        return self._send_all(requests, self._score_one, on_done)

    async def _generate_one(self, session: JsonSession, request: Request) -> Completion:
        started = time.perf_counter()
        body = {"model": self.spec.path, "max_tokens": request.max_tokens, "temperature": request.temperature}
        if request.stop:
            body["stop"] = list(request.stop)
        if self.spec.chat:
            body |= {"messages": [{"role": "user", "content": request.prompt}], "logprobs": True, "top_logprobs": TOP_N}
            response = await session.post("/chat/completions", body)
            choice = response["choices"][0]
            text = choice["message"].get("content") or ""
        else:
            response = await session.post("/completions", body | {"prompt": request.prompt, "logprobs": TOP_N})
            choice = response["choices"][0]
            text = choice["text"]
        tokens, logprobs, top = token_logprobs(choice.get("logprobs") or {"content": []})
        return generated_completion(
            request, text, tokens, logprobs, top, response.get("usage") or {}, choice.get("finish_reason") or "",
            started, self.count_tokens,
        )  # fmt: skip

    async def _score_one(self, session: JsonSession, request: Request) -> Completion:
        """The continuation's log-probability from the prompt logprobs the server echoes back."""
        started = time.perf_counter()
        body = {
            "model": self.spec.path,
            "prompt": request.prompt + request.continuation,
            "echo": True,
            "logprobs": 1,
            "max_tokens": 0,
            "temperature": 0.0,
        }
        lp = (await session.post("/completions", body))["choices"][0].get("logprobs") or {}
        if lp.get("text_offset") is None or lp.get("token_logprobs") is None:
            raise PermanentError("the server returned no prompt log-probabilities (echo + logprobs)")
        start = len(request.prompt)
        picked = [
            (t, float(x))
            for t, off, x in zip(lp["tokens"], lp["text_offset"], lp["token_logprobs"])
            if off >= start and x is not None
        ]
        return scored_completion(
            request,
            [t for t, _ in picked],
            [x for _, x in picked],
            len(lp["tokens"]) - len(picked),
            time.perf_counter() - started,
        )
