"""llama.cpp: GGUF models on llama.cpp's own HTTP server, started in this process for the entry's GGUF file (the
`xllamacpp` wheel: llama.cpp's server in a Python extension, prebuilt for CPUs) or reached at the entry's base_url.

- Generation: /v1/completions, with each generated token's log-probability and its top 5 alternatives (llama.cpp
  returns them in the chat shape, `logprobs.content[]`, on /v1/completions too).
- A continuation's log-probability (separate multiple choice, language modeling): forced token by token, a
  question's choices on one slot from one evaluation of its context (clients/llamacpp_scoring.py).
- Generation never reuses a cache (`cache_prompt: false`): every generation is computed from its own prompt.
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
from holistic_dagster.clients.http import HttpClientBase, JsonSession, server_json
from holistic_dagster.clients.llamacpp_scoring import ForcedContinuationScoring
from holistic_dagster.clients.protocol import OnDone, generated_completion, token_logprobs
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
        try:
            self._server = xllamacpp.Server(params)
        except RuntimeError as e:  # "Failed to init server, please check the input params": which file, at least
            raise CatalogError(f"{gguf}: llama.cpp could not load it ({e})") from e
        self.base_url = self._server.listening_address

    def close(self) -> None:
        self._server = None


def _threads(spec: ModelSpec) -> int:
    # the cores this process may run on (a container's cpuset, taskset), not the machine's: llama.cpp's threads spin
    # while they wait, so one thread more than the cores it has slows every request
    return spec.threads or len(os.sched_getaffinity(0)) or 1


def gguf_facts(gguf: Path) -> tuple[int | None, bool]:
    """(the context length the GGUF file's model was trained with (`<architecture>.context_length`), whether the
    file holds a chat template (without one llama.cpp falls back to ChatML, which is not the model's))."""
    import gguf as gguf_lib

    try:
        fields = gguf_lib.GGUFReader(str(gguf)).fields
    except Exception as e:  # the reader's own error (a truncated file: a reshape, an index) names no file
        raise CatalogError(
            f"{gguf}: not a GGUF file llama.cpp can read ({type(e).__name__}: {e}); a truncated download or copy? "
            f"{gguf.stat().st_size:,} bytes"
        ) from e
    chat = "tokenizer.chat_template" in fields
    arch = fields.get("general.architecture")
    if arch is None:
        return None, chat
    name = bytes(arch.parts[arch.data[0]]).decode()
    found = fields.get(f"{name}.context_length")
    return (int(found.parts[found.data[0]][0]) if found is not None else None), chat


class LlamaCppClient(ForcedContinuationScoring, HttpClientBase):
    backend = "llamacpp"
    supports_prompt_logprobs = True  # by forcing the continuation (see the module's docstring)

    def __init__(self, spec: ModelSpec):
        self.server: LlamaCppServer | None = None
        if spec.base_url:  # a server someone else runs
            self.gguf, self.sha256 = None, ""
            base_url, n_ctx = spec.base_url.rstrip("/"), None
        else:
            self.gguf = gguf_file(spec, settings.model_cache_dir())
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
            "reuse_context": self.spec.reuse_context,
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
        tokens, logprobs, top = token_logprobs(choice.get("logprobs") or {})
        return generated_completion(
            request, text, tokens, logprobs, top, response.get("usage") or {}, choice.get("finish_reason") or "",
            started, self.count_tokens,
        )  # fmt: skip
