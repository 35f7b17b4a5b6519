"""What every HTTP backend shares: bounded concurrency, timeouts, and bounded retries with exponential
backoff and jitter that honour Retry-After. A request that still fails becomes a failed completion (a row
with `error` set, never a score); it does not stop the run."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import requests
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from holistic_dagster.clients.protocol import OnDone, StopSending, not_sent
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.config.redaction import redact
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import Completion, Request

CHARS_PER_TOKEN = 4  # used only when no local tokenizer is configured


class TransientError(Exception):
    """Worth retrying: a timeout, a 429 (with the server's Retry-After, if it gave one), a 5xx."""

    def __init__(self, message: str, retry_after_s: float | None = None):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PermanentError(Exception):
    """Not worth retrying: a 4xx other than 429, or a malformed response."""


# what reading a response body of another shape than expected raises (a malformed response: permanent)
MALFORMED = (ValueError, KeyError, TypeError, IndexError, AttributeError)


def failed_completion(request: Request, error: Exception) -> Completion:
    """A request that failed for good, as stored: no text, the error (the server's error body may quote the
    request, key included: stored and logged without it)."""
    return Completion(request_id=request.request_id, text="", error=redact(f"{type(error).__name__}: {error}"))


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    initial_delay_s: float = 0.5
    max_delay_s: float = 30.0
    timeout_s: float = 120.0


def backoff_delay(attempt: int, policy: RetryPolicy, retry_after_s: float | None, rng: random.Random) -> float:
    """Seconds to wait before retry number `attempt` (0-based): the server's Retry-After when given,
    otherwise exponential backoff with jitter (between half and all of initial * 2^attempt), capped."""
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), policy.max_delay_s)
    return min(policy.max_delay_s, policy.initial_delay_s * 2**attempt) * rng.uniform(0.5, 1.0)


async def with_retries(
    call: Callable[[], Awaitable[Completion]], policy: RetryPolicy, rng: random.Random
) -> Completion:
    last: Exception | None = None
    for attempt in range(policy.max_attempts):
        try:
            return await asyncio.wait_for(call(), policy.timeout_s)
        except asyncio.TimeoutError:
            last = TransientError(f"timed out after {policy.timeout_s:g} s")
        except TransientError as e:
            last = e
        if attempt + 1 < policy.max_attempts:
            await asyncio.sleep(backoff_delay(attempt, policy, getattr(last, "retry_after_s", None), rng))
    raise TransientError(f"gave up after {policy.max_attempts} attempts; last error: {last}")


async def send_concurrently(
    requests: Sequence[Request],
    send: Callable[[Request], Awaitable[Completion]],
    *,
    max_concurrency: int,
    policy: RetryPolicy,
    on_done: OnDone | None = None,
    seed: int = 0,
) -> list[Completion]:
    """Sends every request with at most `max_concurrency` in flight; returns completions in request order. When
    `on_done` raises StopSending, no request is sent after it: those in flight finish (and are handed over). An
    `on_done` with a `reserve(request) -> bool | None` attribute is asked before each request is sent; False: that
    request and those after it are not sent (a budget that what is spent and in flight has reached); None: it is
    asked again once another answer has arrived."""
    rng = random.Random(seed)
    gate = asyncio.Semaphore(max_concurrency)
    stopped = False
    reserve = getattr(on_done, "reserve", None)  # a budget: the request's cost reserved before it is sent
    answered = asyncio.Condition()
    num_answered = 0

    async def may_send(request: Request) -> bool:
        while reserve is not None:
            verdict = reserve(request)
            if verdict is not None:
                return verdict
            seen = num_answered  # the budget waits for an answer in flight
            async with answered:
                await answered.wait_for(lambda: num_answered > seen or stopped)
            if stopped:
                return False
        return True

    async def one(request: Request) -> Completion:
        nonlocal stopped, num_answered
        async with gate:
            if stopped or not await may_send(request):
                stopped = True
                return not_sent(request)
            try:
                completion = await with_retries(lambda: send(request), policy, rng)
            except (TransientError, PermanentError) as e:
                completion = failed_completion(request, e)
        if on_done:
            try:
                on_done([completion])
            except StopSending:
                stopped = True
        async with answered:
            num_answered += 1
            answered.notify_all()
        return completion

    return list(await asyncio.gather(*(one(r) for r in requests)))


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The openai SDK's default certificate verification (its HTTP library's: certifi's bundle, or SSL_CERT_FILE /
    SSL_CERT_DIR when set), built once per process: building it reads the bundle (60-120 ms here), and every batch
    of requests opens a session."""
    import httpx2

    return httpx2.create_ssl_context()


def _error_message(raw: bytes) -> str:
    """The server's own words from an error body: OpenAI's {"error": {"message": ...}}, TGI's {"error": "..."},
    else the body's start."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return raw[:300].decode("utf-8", "replace").strip()


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: our own backoff instead


class JsonSession:
    """One connection pool for a batch of requests: POSTs a JSON body, returns the response's JSON as it came.
    429 and 5xx become a TransientError (with the server's Retry-After), other 4xx a PermanentError, transport
    failures a TransientError, a body that is not JSON a PermanentError. aiohttp directly rather than a vendor SDK:
    the openai SDK's and huggingface_hub's request building and response models cost 3-5x the CPU of the request
    itself (bench/http_concurrency.py, 64 in flight), which capped us below what one GPU server answers."""

    def __init__(self, base_url: str, headers: Mapping[str, str], *, timeout_s: float, max_connections: int):
        self.base_url = base_url.rstrip("/")
        # the proxy HTTP(S)_PROXY / NO_PROXY name for this server, as the SDKs honour them: looked up once here
        # (aiohttp's trust_env looks it up in a thread per request, a quarter of the client's CPU at 64 in flight)
        try:
            self._proxy, self._proxy_auth = get_env_proxy_for_url(URL(self.base_url))
        except LookupError:
            self._proxy = self._proxy_auth = None
        self._session = aiohttp.ClientSession(
            headers=dict(headers),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            connector=aiohttp.TCPConnector(limit=max_connections, ssl=tls_context()),
        )

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        try:
            async with self._session.post(
                self.base_url + path, json=body, proxy=self._proxy, proxy_auth=self._proxy_auth
            ) as response:
                status, raw = response.status, await response.read()
                retry_after = _retry_after(response.headers.get("retry-after"))
        except aiohttp.ClientError as e:
            raise TransientError(f"{type(e).__name__}: {e}") from None
        if status == 429 or status >= 500:
            raise TransientError(f"HTTP {status}: {_error_message(raw)}", retry_after)
        if status >= 400:
            raise PermanentError(f"HTTP {status}: {_error_message(raw)}")
        try:
            return json.loads(raw)
        except ValueError as e:
            raise PermanentError(f"malformed response: not JSON ({e})") from None

    async def close(self) -> None:
        await self._session.close()


class HttpClientBase:
    """Token counting for HTTP backends (a configured local tokenizer, else the server's own where it has one:
    TGI's and vLLM's /tokenize (llama.cpp's client counts with its server's in batches of its own), else ~4
    characters a token) and the concurrent, retried sending of requests; subclasses map one request to one HTTP
    call."""

    backend = "http"

    def __init__(self, spec: ModelSpec, default_context: int):
        self.spec = spec
        self.max_context = spec.max_context or default_context
        self.policy = RetryPolicy(max_attempts=spec.max_attempts, timeout_s=spec.timeout_s)
        self.tokenizer = None
        self._server_counts: dict[str, int] = {}
        self._server_counts_ok: bool | None = None  # None: not asked yet
        if spec.tokenizer:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(spec.tokenizer)

    def count_tokens(self, text: str) -> int:
        """Exact with a local tokenizer or the server's; else an estimate (~4 characters a token), which a
        provider's tokenizer can exceed: what a budget's estimate and the prompts' token counts rest on."""
        if self.tokenizer is not None:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if (counted := self._server_count(text)) is not None:
            return counted
        return -(-len(text) // CHARS_PER_TOKEN)

    # set by a backend whose server counts tokens: (URL or path, JSON body for a text, the count in the answer)
    def tokenize_call(self, text: str) -> tuple[str, dict[str, Any], Callable[[Any], int]] | None:
        return None

    def _server_count(self, text: str) -> int | None:
        if self._server_counts_ok is False:
            return None
        if text in self._server_counts:
            return self._server_counts[text]
        call = self.tokenize_call(text)
        if call is None:
            self._server_counts_ok = False
            return None
        path, body, count = call
        try:
            url = path if path.startswith(("http://", "https://")) else self._base_url.rstrip("/") + path
            answer = requests.post(url, json=body, headers=self._headers, timeout=self.spec.timeout_s)
            answer.raise_for_status()
            counted = int(count(answer.json()))
        except (requests.RequestException, ValueError, TypeError, KeyError, AttributeError) as e:
            if self._server_counts_ok is None:  # the server has no tokenizer to ask: estimate from now on
                logging.getLogger(__name__).info("%s: no token counts from the server (%s): ~4 characters a token",
                                                 self.spec.name, redact(type(e).__name__))  # fmt: skip
                self._server_counts_ok = False
                return None
            raise PermanentError(f"the server's /tokenize failed: {redact(str(e))}") from None
        self._server_counts_ok = True
        self._server_counts[text] = counted
        return counted

    def truncate_left(self, text: str, max_tokens: int) -> str:
        if self.tokenizer is not None:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            return self.tokenizer.decode(ids[-max_tokens:]) if len(ids) > max_tokens else text
        return text[-max_tokens * CHARS_PER_TOKEN :]

    # set by each backend: where its requests go and the headers they carry (the API key among them: private)
    _base_url: str
    _headers: dict[str, str]

    def _send_all(self, requests, send, on_done) -> list[Completion]:
        """Sends the requests over one JsonSession (`send(session, request)`), closing it afterwards; a response
        body of another shape than the backend reads is a permanent error."""
        if not requests:
            return []

        async def send_checked(session: JsonSession, request: Request) -> Completion:
            try:
                return await send(session, request)
            except MALFORMED as e:
                raise PermanentError(f"malformed response: {type(e).__name__}: {e}") from None

        async def main() -> list[Completion]:
            session = JsonSession(
                self._base_url, self._headers, timeout_s=self.spec.timeout_s, max_connections=self.spec.max_concurrency
            )
            try:
                return await send_concurrently(
                    requests,
                    lambda r: send_checked(session, r),
                    max_concurrency=self.spec.max_concurrency,
                    policy=self.policy,
                    on_done=on_done,
                )
            finally:
                await session.close()

        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            return runner.run(main())


def event_loop_factory():
    """uvloop's event loop where installed (uvicorn's standard extra brings it): less CPU per request than
    asyncio's own at high concurrency (bench/http_concurrency.py, 64 in flight: TGI 3.2-3.4x ideal instead of
    3.9-4.2x on 2 cores)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def server_json(spec: ModelSpec, path: str, server: str, timeout_s: float) -> dict[str, Any]:
    """GET a model server's JSON endpoint (TGI's /info, llama.cpp's /props); a HolisticError naming the model,
    the URL and the kind of server when it cannot be read (secrets in the URL or the error redacted)."""
    try:
        response = requests.get(spec.base_url.rstrip("/") + path, timeout=timeout_s)
        response.raise_for_status()
        return response.json()
    except (requests.RequestException, ValueError) as e:
        raise HolisticError(
            redact(f"model {spec.name!r}: cannot read {spec.base_url}{path} from the {server} server: {e}")
        ) from None
