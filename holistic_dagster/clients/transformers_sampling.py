"""Sampled generation on a local transformers model (temperature > 0): transformers' own `generate`, with the
log-probability of each sampled token and the top alternatives at each step. Greedy requests do not come here: they
run in TransformersClient's own decoding loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from holistic_dagster.clients.top_k import top_log_probabilities
from holistic_dagster.records import Completion, Request

TOP_K = 5  # alternatives recorded per generated token


class SampledGeneration:
    """Mixed into TransformersClient, whose model, tokenizer, device, max_context and _completion it uses."""

    model: Any
    tokenizer: Any
    device: torch.device
    max_context: int
    _completion: Callable[..., Completion]

    def _generate_group(
        self, group: list[Request], max_tokens: int, temperature: float, stop: tuple[str, ...]
    ) -> dict[str, Completion]:
        if max_tokens == 0:
            return {r.request_id: self._completion(r, [], [], [], r.num_prompt_tokens, 0.0, stop) for r in group}
        # left padding and left truncation: a prompt too long loses its oldest text, never the question
        self.tokenizer.padding_side = self.tokenizer.truncation_side = "left"
        budget = self.max_context - max_tokens
        enc = self.tokenizer(
            [r.prompt for r in group],
            return_tensors="pt",
            padding=True,
            add_special_tokens=False,
            truncation=True,
            max_length=max(budget, 1),
        )
        enc = {k: v.to(self.device) for k, v in enc.items()}
        started = time.perf_counter()
        out = self.model.generate(
            **enc,
            max_new_tokens=max_tokens,
            do_sample=True,
            temperature=temperature,
            top_p=None,
            top_k=None,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=self.tokenizer.pad_token_id,
            stop_strings=list(stop) or None,
            tokenizer=self.tokenizer if stop else None,
        )
        elapsed = time.perf_counter() - started
        new_ids = out.sequences[:, enc["input_ids"].shape[1] :]
        scores = self.model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        logits = torch.stack(out.scores, dim=1).float()  # rows x steps x vocabulary
        top = top_log_probabilities(logits.flatten(0, 1), TOP_K)  # the whole tensor's values, a block at a time
        top_lps, top_ids = (t.view(*logits.shape[:2], TOP_K) for t in top)
        return {
            r.request_id: self._completion(
                r,
                new_ids[row].tolist(),
                scores[row].tolist(),
                list(zip(top_ids[row].tolist(), top_lps[row].tolist())),
                int(enc["attention_mask"][row].sum()),
                elapsed / len(group),
                stop,
            )
            for row, r in enumerate(group)
        }
