"""llama.cpp: GGUF models on llama.cpp's own HTTP server, started in this process for the entry's GGUF file (the
`xllamacpp` wheel: llama.cpp's server in a Python extension, prebuilt for CPUs) or reached at the entry's base_url.

- Generation: /v1/completions, with each generated token's log-probability and its top 5 alternatives (llama.cpp
  returns them in the chat shape, `logprobs.content[]`, on /v1/completions too).
- A continuation's log-probability (separate multiple choice, language modeling): llama.cpp has no `echo`, so the
  continuation is forced. Its tokens, as the server's tokenizer splits it, become a grammar (`<[id]>` per token)
  that the greedy decoder must follow, and each step reports the token's log-probability under the raw,
  unconstrained distribution. A token that is part of a UTF-8 character (a byte token, e.g. for `ɣ`) breaks this
  build's grammars: such a continuation is forced one token per request instead (logit_bias), which reports the same
  raw log-probabilities. Trailing whitespace of the prompt moves to the continuation, as the transformers backend
  does.
- Prompt caching is off (`cache_prompt: false`): in a trial, reused KV entries shifted log-probabilities by
  0.01-0.03 and flipped a near-tied answer, so every request is computed from its own prompt.
- Tokens are counted by the server's /tokenize (the model's own tokenizer), many texts at once.
- The server's threads wait passively (`poll` 0): spinning threads on a busy 2-core machine collapsed decoding.
"""

from __future__ import annotations

import asyncio
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import requests

from holistic_dagster import settings
from holistic_dagster.clients import ladder
from holistic_dagster.clients.checkpoints import gguf_file
from holistic_dagster.clients.http import HttpClientBase, JsonSession, PermanentError, server_json
from holistic_dagster.clients.protocol import OnDone, generated_completion
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import CatalogError
from holistic_dagster.records import Completion, Request, sha256_file

TOP_N = 5  # alternatives asked for per generated token


class LlamaCppServer:
    """llama.cpp's HTTP server for one GGUF file, in this process, on a free loopback port; it stops when the
    object is collected (xllamacpp's Server) or closed."""

    def __init__(self, gguf: Path, *, n_ctx: int, slots: int, threads: int):
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(gguf)
        params.n_parallel = slots
        params.n_ctx = n_ctx * slots  # each slot holds n_ctx tokens
        for cpu in (params.cpuparams, params.cpuparams_batch):
            cpu.n_threads = threads
            cpu.poll = 0
        params.port = 0
        params.hostnames = ["127.0.0.1"]
        params.cache_prompt = False
        params.flash_attn_type = 0  # off: its half-precision accumulation moved log-probabilities further from float32
        params.verbosity = -1  # llama.cpp logs every request otherwise
        self.build = xllamacpp.BUILD_INFO
        self.version = getattr(xllamacpp, "__version__", "")
        self._server = xllamacpp.Server(params)
        self.base_url = self._server.listening_address

    def close(self) -> None:
        self._server = None


def _threads(spec: ModelSpec) -> int:
    return spec.threads or os.cpu_count() or 1


def gguf_facts(gguf: Path) -> tuple[int | None, bool]:
    """(the context length the GGUF file's model was trained with (`<architecture>.context_length`), whether the
    file holds a chat template (without one llama.cpp falls back to ChatML, which is not the model's))."""
    import gguf as gguf_lib

    fields = gguf_lib.GGUFReader(str(gguf)).fields
    chat = "tokenizer.chat_template" in fields
    arch = fields.get("general.architecture")
    if arch is None:
        return None, chat
    name = bytes(arch.parts[arch.data[0]]).decode()
    found = fields.get(f"{name}.context_length")
    return (int(found.parts[found.data[0]][0]) if found is not None else None), chat


class LlamaCppClient(HttpClientBase):
    backend = "llamacpp"
    supports_prompt_logprobs = True  # by forcing the continuation (see the module's docstring)

    def __init__(self, spec: ModelSpec):
        self.server: LlamaCppServer | None = None
        if spec.base_url:  # a server someone else runs
            self.gguf, self.sha256 = None, ""
            base_url, n_ctx = spec.base_url.rstrip("/"), None
        else:
            self.gguf = gguf_file(spec, settings.home_dir())
            self.sha256 = sha256_file(self.gguf)
            trained, has_template = gguf_facts(self.gguf)
            if spec.chat and not has_template:
                raise CatalogError(f"model {spec.name!r}: `chat: true` but {self.gguf} holds no chat template")
            n_ctx = min(spec.max_context or spec.n_ctx, trained or spec.n_ctx)
            self.server = LlamaCppServer(self.gguf, n_ctx=n_ctx, slots=spec.slots, threads=_threads(spec))
            base_url = self.server.base_url
        self._base_url, self._headers = base_url, {}
        self.props = self.server_props(spec.model_copy(update={"base_url": base_url}), spec.timeout_s)
        per_slot = int(self.props.get("default_generation_settings", {}).get("n_ctx") or n_ctx or 4096)
        super().__init__(spec, default_context=per_slot)
        self.max_context = min(self.max_context, per_slot)
        self._counts: dict[str, list[int]] = {}
        if spec.chat and not self.props.get("chat_template"):
            raise CatalogError(f"model {spec.name!r}: `chat: true` but the GGUF llama.cpp serves has no chat template")
        self.chat_prompt = self._chat_prompt if spec.chat else None

    def _chat_prompt(self, prompt: str) -> str:
        """The prompt as the model's chat (the GGUF's own template, applied by llama.cpp): one user turn, then the
        assistant's turn left open."""
        response = requests.post(
            self._base_url + "/apply-template",
            json={"messages": [{"role": "user", "content": prompt}]},
            timeout=self.spec.timeout_s,
        )
        response.raise_for_status()
        return response.json()["prompt"]

    @staticmethod
    def server_props(spec: ModelSpec, timeout_s: float) -> dict[str, Any]:
        """The server's /props (the model file it serves, its build, its slots and context)."""
        return server_json(spec, "/props", "llama.cpp", timeout_s)

    @staticmethod
    def served_revision(spec: ModelSpec, timeout_s: float) -> str:
        props = LlamaCppClient.server_props(spec, timeout_s)
        return f"{props.get('model_path')}@{props.get('build_info')}"

    def describe(self) -> dict[str, Any]:
        own = self.server is not None
        return {
            "backend": self.backend,
            "model_path": str(self.gguf) if own else f"{self._base_url} {self.props.get('model_path')}",
            "model_revision": self.spec.revision or (f"sha256:{self.sha256}" if own else "served"),
            "batch_size": None,
            "max_context": self.max_context,
            "hardware": f"cpu ({platform.machine()}, {_threads(self.spec)} threads)" if own else "remote",
            "library_versions": {
                "llama.cpp": str(self.props.get("build_info", "")),
                **({"xllamacpp": self.server.version} if own else {}),
                "aiohttp": aiohttp.__version__,
            },
            "threads": _threads(self.spec) if own else None,
            "slots": int(self.props.get("total_slots") or 0),
            "gguf_sha256": self.sha256,
            "max_concurrency": self.spec.max_concurrency,
            "prompt_format": "chat_template" if self.spec.chat else "plain",
            **(ladder.provenance(self.gguf) if own else {}),  # a ladder file: its part wheels and pinned sha256
        }

    # --- tokens ---------------------------------------------------------------------------------------
    def _tokens(self, texts: list[str]) -> list[list[int]]:
        """The server's token ids of each text (no special tokens), asked once per text."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._counts]
        if todo:

            async def one(session: JsonSession, text: str) -> list[int]:
                return (await session.post("/tokenize", {"content": text, "add_special": False}))["tokens"]

            async def main() -> list[list[int]]:
                session = JsonSession(self._base_url, {}, timeout_s=self.spec.timeout_s, max_connections=8)
                try:
                    gate = asyncio.Semaphore(8)

                    async def bounded(text: str) -> list[int]:
                        async with gate:
                            return await one(session, text)

                    return list(await asyncio.gather(*(bounded(t) for t in todo)))
                finally:
                    await session.close()

            self._counts.update(zip(todo, asyncio.run(main())))
        return [self._counts[t] for t in texts]

    def count_tokens(self, text: str) -> int:
        return len(self._tokens([text])[0])

    def count_tokens_many(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self._tokens(texts)] if texts else []

    def truncate_left(self, text: str, max_tokens: int) -> str:
        ids = self._tokens([text])[0]
        if len(ids) <= max_tokens:
            return text
        response = requests.post(
            self._base_url + "/detokenize", json={"tokens": ids[-max_tokens:]}, timeout=self.spec.timeout_s
        )
        response.raise_for_status()
        return response.json()["content"]

    # --- requests -------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        return self._send_all(requests, self._generate_one, on_done)

    def score(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        return self._send_all(requests, self._score_one, on_done)

    async def _generate_one(self, session: JsonSession, request: Request) -> Completion:
        started = time.perf_counter()
        body = {
            "prompt": request.prompt,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "logprobs": TOP_N,
            "cache_prompt": False,
        }
        if request.temperature > 0:
            body["seed"] = 0
        if request.stop:
            body["stop"] = list(request.stop)
        response = await session.post("/v1/completions", body)
        choice = response["choices"][0]
        text = choice["text"]
        tokens, logprobs, top = _token_logprobs(choice.get("logprobs") or {})
        return generated_completion(
            request, text, tokens, logprobs, top, response.get("usage") or {}, choice.get("finish_reason") or "",
            started, self.count_tokens,
        )  # fmt: skip

    async def _score_one(self, session: JsonSession, request: Request) -> Completion:
        """The continuation's log-probability: its tokens forced, greedy, one decoding step each."""
        started = time.perf_counter()
        prompt = request.prompt.rstrip()
        continuation = request.prompt[len(prompt) :] + request.continuation
        pieces = await session.post("/tokenize", {"content": continuation, "add_special": False, "with_pieces": True})
        ids = [t["id"] for t in pieces["tokens"]]
        if not ids:
            raise PermanentError("the continuation has no tokens to score")
        context: str | list[int] = prompt or await self._start_tokens(session)
        bytes_at = {k for k, t in enumerate(pieces["tokens"]) if not isinstance(t["piece"], str)}
        if bytes_at and len(bytes_at) < len(ids):  # byte tokens: one request per token
            steps, prompt_tokens = await self._forced_one_by_one(session, context, ids, bytes_at)
        elif bytes_at:
            raise PermanentError("the continuation is only byte tokens (no whole token to force beside them)")
        else:
            body = {
                "prompt": context,
                "max_tokens": len(ids),
                "temperature": 0.0,
                "logprobs": 1,
                "grammar": "root ::= " + " ".join(f"<[{i}]>" for i in ids),
                "cache_prompt": False,
            }
            response = await session.post("/v1/completions", body)
            steps = ((response["choices"][0].get("logprobs") or {}).get("content") or [])[: len(ids)]
            prompt_tokens = int((response.get("usage") or {}).get("prompt_tokens") or 0)
        followed = [t.get("id") for t in steps]
        if followed != ids:
            raise PermanentError(f"the server did not follow the forced tokens {ids} (it gave {followed})")
        return Completion(
            request_id=request.request_id,
            text=request.continuation,
            tokens=tuple(t["token"] for t in steps),
            logprobs=tuple(float(t["logprob"]) for t in steps),
            logprob=sum(float(t["logprob"]) for t in steps),
            num_prompt_tokens=prompt_tokens,
            num_completion_tokens=0,
            latency_s=time.perf_counter() - started,
            finish_reason="scored",
        )

    async def _forced_one_by_one(
        self, session: JsonSession, context: str | list[int], ids: list[int], bytes_at: set[int]
    ) -> tuple[list[dict[str, Any]], int]:
        """Each token forced by its own request (a logit bias on it; the context and the tokens before it as ids):
        slower than a grammar, used where a grammar cannot follow byte tokens. The server gives no log-probability
        for a token that ends inside a UTF-8 character, so at a byte token's step a whole token is generated and the
        byte token's log-probability is read from the full distribution the step returns (`logprobs` as large as
        the vocabulary)."""
        if isinstance(context, str):
            context = (await session.post("/tokenize", {"content": context, "add_special": True}))["tokens"]
        whole = next(i for k, i in enumerate(ids) if k not in bytes_at)  # a token with text of its own
        steps = []
        for k, token in enumerate(ids):
            body = {"prompt": [*context, *ids[:k]], "max_tokens": 1, "temperature": 0.0, "cache_prompt": False}
            if k in bytes_at:
                body |= {"logprobs": 10**6, "logit_bias": [[whole, 100.0]]}
            else:
                body |= {"logprobs": 1, "logit_bias": [[token, 100.0]]}
            response = await session.post("/v1/completions", body)
            step = ((response["choices"][0].get("logprobs") or {}).get("content") or [{}])[0]
            if k in bytes_at:
                found = [a for a in step.get("top_logprobs") or [] if a.get("id") == token]
                step = (
                    {"id": token, "token": bytes(found[0]["bytes"]).decode("latin-1"), "logprob": found[0]["logprob"]}
                    if found
                    else {}
                )
            steps.append(step)
        return steps, len(context)

    async def _start_tokens(self, session: JsonSession) -> list[int]:
        """What an empty prompt starts from: the model's BOS token where it has one that it adds, else its EOS
        (as the transformers backend does)."""
        added = (await session.post("/tokenize", {"content": "", "add_special": True}))["tokens"]
        if added:
            return added
        eos = self.props.get("eos_token") or ""
        return (await session.post("/tokenize", {"content": eos, "add_special": False, "parse_special": True}))[
            "tokens"
        ][:1]


def _token_logprobs(logprobs: dict[str, Any]) -> tuple[list[str], list[float], list[dict[str, float]]]:
    """Tokens, their log-probabilities and top alternatives, from llama.cpp's chat shape (`content[]`) or the
    legacy completions shape (`tokens`, `token_logprobs`, `top_logprobs`)."""
    if "content" in logprobs:
        content = logprobs.get("content") or []
        return (
            [t["token"] for t in content],
            [float(t["logprob"]) for t in content],
            [{a["token"]: float(a["logprob"]) for a in (t.get("top_logprobs") or [])} for t in content],
        )
    tokens = list(logprobs.get("tokens") or [])
    return (
        tokens,
        [float(x) for x in logprobs.get("token_logprobs") or []],
        [dict(t) for t in logprobs.get("top_logprobs") or []],
    )
