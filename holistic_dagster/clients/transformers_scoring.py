"""Continuation log-probabilities on a local transformers model (the `score` half of TransformersClient), in real
batches: many requests per forward pass, length-sorted, within the client's row and token limits.

Requests that share a context (a multiple-choice question's choices) are one row of a context pass: the context runs
once, then its continuations run in a continuation pass over copies of its key/value cache. A request alone with its
context is a row that holds its continuation too (language modeling). Contexts that start with the same long prefix
(a few-shot block) continue from that prefix's cache, computed once. Only the scored positions get the vocabulary
projection, and a batch's log-probabilities reach the host in one transfer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from holistic_dagster.clients.batching import BatchLimits, gathered, padded_batches, prefix_groups
from holistic_dagster.clients.protocol import OnDone, scored_completion
from holistic_dagster.clients.top_k import picked_log_probabilities
from holistic_dagster.records import Completion, Request

VOCAB_ROWS = 2048  # scored positions projected onto the vocabulary at once (bounds the logits' memory)


@dataclass(frozen=True)
class _Row:
    """One row of a context pass: a context and the requests scored after it."""

    context: list[int]
    members: list[int]  # request indices
    tokens: list[int]  # what the row runs: the context, and a lone request's continuation but its last token
    alone: bool  # one request, whose continuation the row holds


class ContinuationScoring:
    """Mixed into TransformersClient, whose model, tokenizer, device, batching and forward helpers (_in_batches,
    min_shared_prefix_members, _base, _prefix_cache, _padded_forward, _vocab_logits) it uses."""

    @torch.inference_mode()
    def score(
        self, requests: Sequence[Request], on_done: OnDone | None = None, share_context: bool = True
    ) -> list[Completion]:
        """Continuation log-probabilities, in batches of many requests (share_context=False, or a model whose cache
        cannot be copied row by row: every request its own row, its context run with it; the numbers are the same
        to float32's rounding, 1e-5 or so)."""
        self.load_model()  # before any clock starts
        encoded = [self._encode_pair(r) for r in requests]
        rows = _rows(encoded, share_context and self.copyable_cache)
        results: dict[int, Completion] = {}
        for cluster, prefix_len in prefix_groups([row.context for row in rows], self.min_shared_prefix_members()):
            prefix, prefix_s = None, 0.0
            if prefix_len:  # e.g. the few-shot block every question of a subset starts with: run it once
                prefix, prefix_s = self._prefix_cache(rows[cluster[0]].context[:prefix_len], len(cluster))
            order = sorted(cluster, key=lambda k: -len(rows[k].tokens))  # similar lengths in a batch: little padding
            for finished in self._in_batches(
                order,
                lambda k: len(rows[k].tokens),  # held: the prefix and the row
                lambda chunk, limits: self._score_rows(
                    [rows[k] for k in chunk], encoded, requests, prefix, prefix_len, prefix_s, limits
                ),
            ):
                results.update(finished)
                if on_done:
                    on_done(list(finished.values()))
        return [results[i] for i in range(len(requests))]

    def _score_rows(
        self, batch: list[_Row], encoded, requests, prefix, prefix_len: int, prefix_s: float, limits: BatchLimits
    ) -> dict[int, Completion]:
        """One context pass over `batch` (after the shared prefix), then the continuation passes of its rows'
        requests; every scored position's log-probability in one transfer."""
        started = time.perf_counter()
        out, mask, positions = self._padded_forward([row.tokens[prefix_len:] for row in batch], prefix, prefix_len)
        end = out.last_hidden_state.shape[1] - 1  # every row ends in the last column (its padding is on its left)
        passes = [out.last_hidden_state]
        picks: list[tuple[int, int, int, int, int, int]] = []  # (pass, row, column, target, request, token)
        later: list[tuple[int, int]] = []  # (request, row): continuations with tokens left for a continuation pass
        for r, row in enumerate(batch):
            for i in row.members:
                ids, n_cont = encoded[i]
                cont = ids[len(ids) - n_cont :]
                if row.alone:  # the row holds the continuation: position end - (n_cont - 1) predicts its first token
                    picks.extend((0, r, end - (n_cont - 1) + k, t, i, k) for k, t in enumerate(cont))
                elif cont:
                    picks.append((0, r, end, cont[0], i, 0))
                    if len(cont) > 1:
                        later.append((i, r))
        later.sort(key=lambda o: -encoded[o[0]][1])
        held = mask.shape[1]  # each continuation continues a copy of its context's cache
        for chunk in padded_batches(later, lambda o: held + encoded[o[0]][1] - 1, limits):
            conts = [encoded[i][0][len(encoded[i][0]) - encoded[i][1] :] for i, _ in chunk]
            width = max(len(c) for c in conts) - 1
            # every continuation token but the last is an input; right padding never reaches real tokens
            inputs = torch.full((len(chunk), width), self.tokenizer.pad_token_id, dtype=torch.long)
            for j, cont in enumerate(conts):
                inputs[j, : len(cont) - 1] = torch.tensor(cont[:-1], dtype=torch.long)
            rows_of = torch.tensor([r for _, r in chunk], device=self.device)
            ones = torch.ones((len(chunk), width), dtype=mask.dtype, device=self.device)
            state = self._base(
                input_ids=inputs.to(self.device),
                attention_mask=torch.cat([mask[rows_of], ones], dim=1),
                position_ids=positions[rows_of, -1:] + 1 + torch.arange(width, device=self.device),
                cache=gathered(out.past_key_values, rows_of),
                use_cache=True,
            ).last_hidden_state
            passes.append(state)
            for j, ((i, _), cont) in enumerate(zip(chunk, conts)):
                picks.extend((len(passes) - 1, j, k, t, i, k + 1) for k, t in enumerate(cont[1:]))
        token_lps = self._picked_logprobs(passes, picks)
        per_request = {i: [0.0] * encoded[i][1] for row in batch for i in row.members}
        for (_, _, _, _, i, k), lp in zip(picks, token_lps):
            per_request[i][k] = lp
        latency = (time.perf_counter() - started) / len(per_request) + prefix_s * len(batch) / len(per_request)
        return {i: self._scored(requests[i], encoded[i], lps, latency) for i, lps in per_request.items()}

    def _picked_logprobs(self, passes: list[torch.Tensor], picks) -> list[float]:
        """The log-probability of each pick's target token at its position, read back in one transfer. The picks
        come pass by pass (the context pass's, then each continuation pass's), as the passes' states are joined."""
        selected = torch.cat(
            [
                state[torch.tensor([r for q, r, *_ in picks if q == p], device=self.device, dtype=torch.long),
                      torch.tensor([c for q, _, c, *_ in picks if q == p], device=self.device, dtype=torch.long)]
                for p, state in enumerate(passes)
            ]
        )  # fmt: skip
        target = torch.tensor([pick[3] for pick in picks], device=self.device)
        lps = torch.empty(len(picks), dtype=torch.float32, device=self.device)
        for start in range(0, len(picks), VOCAB_ROWS):
            stop = start + VOCAB_ROWS
            lps[start:stop] = picked_log_probabilities(self._vocab_logits(selected[start:stop]), target[start:stop])
        return lps.tolist()

    def _scored(self, request: Request, pair: tuple[list[int], int], lps: list[float], latency: float) -> Completion:
        ids, n_cont = pair
        tokens = [self.tokenizer.decode([t]) for t in ids[len(ids) - n_cont :]]
        return scored_completion(request, tokens, lps, len(ids) - n_cont, latency)

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


def _rows(encoded: list[tuple[list[int], int]], share_context: bool) -> list[_Row]:
    """The context pass's rows: the requests of one context together (share_context), each alone otherwise. A row
    with one request runs its continuation too (but the last token, which predicts nothing that is scored)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (ids, n_cont) in enumerate(encoded):
        key = tuple(ids[: len(ids) - n_cont]) if share_context else (i, *ids)
        groups.setdefault(key, []).append(i)
    rows = []
    for members in groups.values():
        ids, n_cont = encoded[members[0]]
        context = ids[: len(ids) - n_cont]
        alone = len(members) == 1 and n_cont > 0
        rows.append(_Row(context, members, ids[:-1] if alone else context, alone))
    return rows
