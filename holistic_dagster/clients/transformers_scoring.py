"""Continuation log-probabilities on a local transformers model (the `score` half of TransformersClient): each
request's continuation scored after its prompt; requests that share a context (a multiple-choice question's choices,
a few-shot block) run it once and reuse its key/value cache; only the scored positions get the vocabulary
projection."""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Sequence

import torch

from holistic_dagster.clients.batching import clusters_by_prefix, padded_batches, repeated
from holistic_dagster.clients.protocol import OnDone
from holistic_dagster.records import Completion, Request


class ContinuationScoring:
    """Mixed into TransformersClient, whose model, tokenizer, device and forward helpers (_base, _prefix_cache,
    _vocab_logprobs) it uses."""

    def score(
        self, requests: Sequence[Request], on_done: OnDone | None = None, share_context: bool = True
    ) -> list[Completion]:
        """Continuation log-probabilities. Requests that share a context (the choices of one question) run the
        context once and reuse its key/value cache for every continuation; the rest run in length-sorted
        batches. Either way only the continuation's positions get the vocabulary projection."""
        self.load_model()  # before any clock starts
        encoded = [self._encode_pair(r) for r in requests]
        groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for i, (ids, n_cont) in enumerate(encoded):
            groups[tuple(ids[: len(ids) - n_cont])].append(i)
        shared = [g for g in groups.values() if share_context and len(g) > 1]
        alone = [i for g in groups.values() if not (share_context and len(g) > 1) for i in g]
        results: dict[int, Completion] = {}
        alone.sort(key=lambda i: -len(encoded[i][0]))
        for chunk in padded_batches(alone, lambda i: len(encoded[i][0]), self.spec.batch_size):
            finished = self._score_batch(chunk, encoded, requests)
            results.update(finished)
            if on_done:
                on_done(list(finished.values()))
        for cluster, prefix_len in clusters_by_prefix(shared, encoded):
            prefix_cache, prefix_s = None, 0.0
            if prefix_len:  # e.g. the few-shot block every question of a subset starts with: run it once
                prefix_cache, prefix_s = self._prefix_cache(encoded[cluster[0][0]][0][:prefix_len], len(cluster))
            for group in cluster:
                finished = self._score_shared_context(group, encoded, requests, prefix_cache, prefix_len, prefix_s)
                results.update(finished)
                if on_done:
                    on_done(list(finished.values()))
        return [results[i] for i in range(len(requests))]

    def _score_batch(self, idx: list[int], encoded: list[tuple[list[int], int]], requests) -> dict[int, Completion]:
        pad = self.tokenizer.pad_token_id
        width = max(len(encoded[i][0]) for i in idx)
        input_ids = torch.full((len(idx), width), pad, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for row, i in enumerate(idx):
            ids = encoded[i][0]
            input_ids[row, : len(ids)] = torch.tensor(ids)
            mask[row, : len(ids)] = 1
        started = time.perf_counter()
        hidden = self._base(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device)).last_hidden_state
        rows, cols, targets = [], [], []
        for row, i in enumerate(idx):
            ids, n_cont = encoded[i]
            for pos in range(len(ids) - n_cont, len(ids)):
                rows.append(row)
                cols.append(pos - 1)
                targets.append(ids[pos])
        token_lps = self._token_logprobs(hidden[rows, cols], targets)
        return self._scored(idx, encoded, requests, token_lps, time.perf_counter() - started)

    def _score_shared_context(
        self, idx: list[int], encoded, requests, prefix_cache=None, prefix_len: int = 0, prefix_s: float = 0.0
    ) -> dict[int, Completion]:
        ids0, n0 = encoded[idx[0]]
        context = ids0[: len(ids0) - n0]
        started = time.perf_counter()
        if prefix_cache is None:
            out = self._base(input_ids=torch.tensor([context], device=self.device), use_cache=True)
        else:  # continue from the shared prefix's key/value cache
            out = self._base(
                input_ids=torch.tensor([context[prefix_len:]], device=self.device),
                cache=copy.deepcopy(prefix_cache),
                attention_mask=torch.ones((1, len(context)), dtype=torch.long, device=self.device),
                use_cache=True,
            )
        context_cache, last_hidden = out.past_key_values, out.last_hidden_state[0, -1]
        token_lps: list[float] = []
        for start in range(0, len(idx), self.spec.batch_size):
            chunk = idx[start : start + self.spec.batch_size]
            continuations = [encoded[i][0][len(context) :] for i in chunk]
            width = max(len(c) for c in continuations)
            hidden_rows = []  # hidden state that predicts each continuation token, in order
            if width > 1:
                # every continuation token but the last is an input; right padding never reaches real tokens
                inputs = torch.full((len(chunk), width - 1), self.tokenizer.pad_token_id, dtype=torch.long)
                for row, cont in enumerate(continuations):
                    inputs[row, : len(cont) - 1] = torch.tensor(cont[:-1], dtype=torch.long)
                cache = repeated(context_cache, len(chunk))
                mask = torch.ones((len(chunk), len(context) + width - 1), dtype=torch.long, device=self.device)
                hidden = self._base(
                    input_ids=inputs.to(self.device), cache=cache, attention_mask=mask, use_cache=True
                ).last_hidden_state
            for row, cont in enumerate(continuations):
                hidden_rows.append(last_hidden)
                hidden_rows.extend(hidden[row, j] for j in range(len(cont) - 1))
            targets = [t for cont in continuations for t in cont]
            token_lps.extend(self._token_logprobs(torch.stack(hidden_rows), targets))
        return self._scored(idx, encoded, requests, token_lps, time.perf_counter() - started + prefix_s)

    def _token_logprobs(self, hidden: torch.Tensor, targets: list[int]) -> list[float]:
        return self._vocab_logprobs(hidden)[torch.arange(len(targets)), torch.tensor(targets)].tolist()

    def _scored(self, idx, encoded, requests, token_lps: list[float], elapsed: float) -> dict[int, Completion]:
        results, offset = {}, 0
        for i in idx:
            ids, n_cont = encoded[i]
            lps = token_lps[offset : offset + n_cont]
            offset += n_cont
            results[i] = Completion(
                request_id=requests[i].request_id,
                text=requests[i].continuation,
                tokens=tuple(self.tokenizer.decode([i]) for i in ids[len(ids) - n_cont :]),
                logprobs=tuple(lps),
                logprob=float(sum(lps)),
                num_prompt_tokens=len(ids) - n_cont,
                num_completion_tokens=0,
                latency_s=elapsed / len(idx),
                finish_reason="scored",
            )
        return results

    def _encode_pair(self, request: Request) -> tuple[list[int], int]:
        """Token ids of prompt + continuation (cut from the left to fit), and how many belong to the
        continuation. Whitespace at the end of the prompt moves to the continuation (as lm-eval does)."""
        context, continuation = request.prompt, request.continuation
        stripped = context.rstrip()
        continuation = context[len(stripped) :] + continuation
        ctx = self.tokenizer(stripped, add_special_tokens=False)["input_ids"]
        cont = self.tokenizer(continuation, add_special_tokens=False)["input_ids"]
        if not ctx:
            ctx = [self._fallback_token()]
        ids = (ctx + cont)[-self.max_context :]
        return ids, min(len(cont), len(ids) - 1)
