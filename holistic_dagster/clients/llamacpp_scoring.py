"""Continuation log-probabilities on llama.cpp's server (the `score` half of LlamaCppClient). llama.cpp has no
`echo`, so a continuation is forced: its tokens, as the server's tokenizer splits it, become a grammar (`<[id]>` per
token) that the greedy decoder must follow, and each step reports the token's log-probability under the raw,
unconstrained distribution. A token that is part of a UTF-8 character (a byte token, e.g. for `ɣ`) breaks this build's
grammars: such a continuation is forced one token per request instead (logit_bias), which reports the same raw
log-probabilities. Trailing whitespace of the prompt moves to the continuation, as the transformers backend does.

The requests of one context (a question's choices) run in turn on one slot (`id_slot`). With `reuse_context` (the
default) the slot is primed with the context but its last token, evaluated afresh, and every choice finds it in the
slot's cache and evaluates the last token and its continuation token by token, all alike: the context is evaluated
once instead of once per choice (3-4x less work on 0-shot MMLU). The last context token is then evaluated alone, not
with the rest of the prompt, which moves log-probabilities (llama.cpp's one-token and many-token matrix products
differ on quantized weights): bench/results/llamacpp_agreement.md measures by how much and states the bound."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Sequence
from typing import Any

from holistic_dagster.clients.http import (
    MALFORMED,
    JsonSession,
    PermanentError,
    TransientError,
    event_loop_factory,
    failed_completion,
    with_retries,
)
from holistic_dagster.clients.protocol import OnDone, StopSending, not_sent, scored_completion
from holistic_dagster.records import Completion, Request


class ForcedContinuationScoring:
    """Mixed into LlamaCppClient, whose spec, retry policy, server address and /props it uses."""

    def score(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        """Continuation log-probabilities, a context's requests (a question's choices) one after another on one
        slot of the server; with `reuse_context` the context is evaluated once for all of them (see
        _score_context)."""
        if not requests:
            return []
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.prompt.rstrip(), []).append(i)
        queue = list(groups.items())
        results: dict[int, Completion] = {}
        stopped: list[bool] = []

        async def main() -> None:
            workers = max(1, min(self.spec.max_concurrency, int(self.props.get("total_slots") or 1)))
            session = JsonSession(self._base_url, self._headers, timeout_s=self.spec.timeout_s, max_connections=workers)
            rng = random.Random(0)

            async def worker(slot: int) -> None:
                while queue and not stopped:
                    context, members = queue.pop(0)
                    finished = await self._score_context(session, slot, context, [requests[i] for i in members], rng)
                    results.update(zip(members, finished))
                    if on_done:
                        try:
                            on_done(finished)
                        except StopSending:  # no more contexts; the other slots finish the one they hold
                            stopped.append(True)

            try:
                await asyncio.gather(*(worker(slot) for slot in range(workers)))
            finally:
                await session.close()

        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(main())
        return [results[i] if i in results else not_sent(requests[i]) for i in range(len(requests))]

    async def _score_context(
        self, session: JsonSession, slot: int, context: str, members: list[Request], rng: random.Random
    ) -> list[Completion]:
        """The requests that share one context, in turn on one slot (`id_slot`: no other request of ours uses it
        meanwhile). With `reuse_context` and several requests, the context but its last token is evaluated first
        (a priming request that generates nothing) and every request then finds it in the slot's cache: each
        evaluates the context's last token and its continuation, all alike, so the choices of a question are
        compared on equal terms. The last token is then evaluated alone, as every continuation token is, where an
        uncached prompt evaluates it with the rest: log-probabilities move by a few hundredths of a nat (measured
        in bench/results/llamacpp_agreement.md, which states the bound this is kept within)."""
        reuse = self.spec.reuse_context and len(members) > 1
        failed = None
        prime_s, ids = 0.0, []
        if reuse:
            started = time.perf_counter()
            try:
                ids = await with_retries(lambda: self._context_ids(session, context), self.policy, rng)
                if len(ids) > 1:
                    await with_retries(lambda: self._prime(session, slot, ids[:-1]), self.policy, rng)
            except (TransientError, PermanentError, *MALFORMED) as e:
                failed = e
            prime_s = (time.perf_counter() - started) / len(members)
        finished = []
        for request in members:
            if failed is not None:
                finished.append(_failed(request, failed))
                continue
            attempts = 0

            async def attempt(request=request) -> Completion:
                nonlocal attempts
                attempts += 1
                if reuse and attempts > 1 and len(ids) > 1:  # the slot may have lost the context: prime it again
                    await self._prime(session, slot, ids[:-1])
                return await self._score_one(session, request, slot, reuse)

            try:
                completion = await with_retries(attempt, self.policy, rng)
                completion = dataclasses.replace(completion, latency_s=completion.latency_s + prime_s)
            except (TransientError, PermanentError, *MALFORMED) as e:
                completion = _failed(request, e)
            finished.append(completion)
        return finished

    async def _context_ids(self, session: JsonSession, context: str) -> list[int]:
        """The context's token ids as the server reads a prompt (its special tokens, e.g. BOS, included)."""
        return (await session.post("/tokenize", {"content": context, "add_special": True}))["tokens"]

    async def _prime(self, session: JsonSession, slot: int, ids: list[int]) -> None:
        """The slot's cache filled with these tokens, evaluated afresh (a request that evaluates its prompt and
        generates nothing). Afresh: a slot that already held them would evaluate the last one again alone, and the
        scores would depend on what the slot held before."""
        await session.post("/completion", {"prompt": ids, "n_predict": 0, "cache_prompt": False, "id_slot": slot})

    async def _score_one(self, session: JsonSession, request: Request, slot: int, reuse: bool) -> Completion:
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
            steps, prompt_tokens = await self._forced_one_by_one(session, context, ids, bytes_at, slot, reuse)
        elif bytes_at:
            raise PermanentError("the continuation is only byte tokens (no whole token to force beside them)")
        else:
            body = {
                "prompt": context,
                "max_tokens": len(ids),
                "temperature": 0.0,
                "logprobs": 1,
                "grammar": "root ::= " + " ".join(f"<[{i}]>" for i in ids),
                "cache_prompt": reuse,
                "id_slot": slot,
            }
            response = await session.post("/v1/completions", body)
            steps = ((response["choices"][0].get("logprobs") or {}).get("content") or [])[: len(ids)]
            prompt_tokens = int((response.get("usage") or {}).get("prompt_tokens") or 0)
            if reuse:
                _check_cached(response, slot)
        followed = [t.get("id") for t in steps]
        if followed != ids:
            raise PermanentError(f"the server did not follow the forced tokens {ids} (it gave {followed})")
        return scored_completion(
            request,
            [t["token"] for t in steps],
            [t["logprob"] for t in steps],
            prompt_tokens,
            time.perf_counter() - started,
        )

    async def _forced_one_by_one(
        self, session: JsonSession, context: str | list[int], ids: list[int], bytes_at: set[int], slot: int,
        reuse: bool,
    ) -> tuple[list[dict[str, Any]], int]:  # fmt: skip
        """Each token forced by its own request (a logit bias on it; the context and the tokens before it as ids):
        slower than a grammar, used where a grammar cannot follow byte tokens. The server gives no log-probability
        for a token that ends inside a UTF-8 character, so at a byte token's step a whole token is generated and the
        byte token's log-probability is read from the full distribution the step returns (`logprobs` as large as
        the vocabulary). From the second token on, the slot's cache holds the previous request's prompt, so each
        request evaluates one token, as a grammar's decoding step does (the first one too with `reuse`)."""
        if isinstance(context, str):
            context = (await session.post("/tokenize", {"content": context, "add_special": True}))["tokens"]
        whole = next(i for k, i in enumerate(ids) if k not in bytes_at)  # a token with text of its own
        steps = []
        for k, token in enumerate(ids):
            cached = reuse or k > 0
            body = {
                "prompt": [*context, *ids[:k]], "max_tokens": 1, "temperature": 0.0, "cache_prompt": cached,
                "id_slot": slot,
            }  # fmt: skip
            if k in bytes_at:
                body |= {"logprobs": 10**6, "logit_bias": [[whole, 100.0]]}
            else:
                body |= {"logprobs": 1, "logit_bias": [[token, 100.0]]}
            response = await session.post("/v1/completions", body)
            if cached:
                _check_cached(response, slot)
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


def _check_cached(response: dict[str, Any], slot: int) -> None:
    """A request meant to find its prompt in the slot's cache evaluated one token; more means the slot lost it
    (another client of an external server took the slot) and evaluated the prompt afresh, its last token with the
    rest, which would score this request unlike the others: a retry primes the slot again."""
    evaluated = (response.get("timings") or {}).get("prompt_n")
    if evaluated is not None and int(evaluated) != 1:
        raise TransientError(f"slot {slot} did not hold the context ({evaluated} prompt tokens evaluated)")


def _failed(request: Request, error: Exception) -> Completion:
    if isinstance(error, MALFORMED):
        error = PermanentError(f"malformed response: {type(error).__name__}: {error}")
    return failed_completion(request, error)
