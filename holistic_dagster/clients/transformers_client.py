"""Local models on transformers + torch: batched greedy generation and continuation log-probabilities.

CPU by default, the GPU when one is present. Any local checkpoint directory works (or a hub id where a
network exists); `demo:<name>` builds one of the offline demo models first; `gguf:<package>/<file>.gguf` (or
`gguf:<path>`) converts a GGUF file once (clients/gguf_models.py).
With `chat: true` every prompt is laid out with the tokenizer's chat template (one user turn, then the
assistant's generation prompt), as lm-eval's `--apply_chat_template` does; off by default, as in HELM.
"""

from __future__ import annotations

import logging
import platform
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from holistic_dagster import settings
from holistic_dagster.clients import gguf_models
from holistic_dagster.clients import transformers_device as device_of
from holistic_dagster.clients.batching import (
    BatchLimits,
    expanded,
    generation_prefix_groups,
    padded_batches,
    prefix_groups,
)
from holistic_dagster.clients.checkpoints import local_checkpoint
from holistic_dagster.clients.protocol import OnDone, cut_at_stop
from holistic_dagster.clients.top_k import top_log_probabilities
from holistic_dagster.clients.transformers_sampling import TOP_K, SampledGeneration
from holistic_dagster.clients.transformers_scoring import ContinuationScoring
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import CatalogError
from holistic_dagster.records import Completion, Request, sha256_file

# token counts of over-long prompts are expected (adaptation trims them); weight-loading bars are noise
transformers.logging.set_verbosity_error()
MAX_CLUSTER_BATCH = 64  # rows: on a GPU, a prefix scored once is shared by at least half this many prompts
REPLAN_AFTER = 3  # answers a greedy generation sees before it plans what is left for their length
transformers.logging.disable_progress_bar()
log = logging.getLogger(__name__)


def _revision(path: Path) -> str:
    """A content hash of the checkpoint, so a changed model is never mistaken for the old one."""
    files = sorted(p for p in path.glob("*") if p.suffix in (".safetensors", ".json", ".bin", ".model"))
    return "sha256:" + "".join(sha256_file(p)[:8] for p in files)[:32] if files else "unknown"


class TransformersClient(ContinuationScoring, SampledGeneration):
    backend = "transformers"
    supports_prompt_logprobs = True

    def __init__(self, spec: ModelSpec, load_model: bool = True):
        """load_model=False: the tokenizer, the context window and the description only; the weights load at
        the first call that needs them, or when `load_model()` is called (the model's process does that in the
        background while the evaluation builds its prompts: importing the model's classes costs seconds)."""
        device_of.check_transformers_version()
        self.spec = spec
        path = local_checkpoint(spec, settings.model_cache_dir())
        self.path = path
        local = Path(path).is_dir()
        self.device = device_of.resolve_device(spec.device)
        self.tokenizer = AutoTokenizer.from_pretrained(path, revision=spec.revision)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        config = AutoConfig.from_pretrained(path, revision=spec.revision)  # the model's own config, as it loads it
        window = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 2048)
        self.max_context = spec.max_context or int(window)
        self.config = config
        self.dtype = device_of.resolve_dtype(spec.dtype, getattr(config, "dtype", None), self.device)
        # the synchronisation points of greedy decoding: every step on a CPU (it computes in step with the host);
        # on a GPU the host queues steps ahead and reads them back now and then (finished rows decode on unseen)
        self.sync_every = 1 if self.device.type == "cpu" else 16
        self.limits: device_of.AdaptiveLimits | None = None  # set when the weights are loaded
        # forward passes run, by rows: what batching achieved (passes per request, rows per pass)
        self.pass_rows: Counter[int] = Counter()
        self.revision = spec.revision or (
            (gguf_models.gguf_revision(Path(path)) or _revision(Path(path))) if local else "unpinned"
        )
        if spec.chat and not self.tokenizer.chat_template:
            raise CatalogError(f"model {spec.name!r}: `chat: true` but {path} has no chat template")
        self.chat_prompt = self._chat_prompt if spec.chat else None
        self._model = None
        self._loading = threading.Lock()
        self._token_texts: dict[int, str] = {}  # token id -> its text (_token_text)
        if load_model:
            self.load_model()

    def load_model(self) -> Any:
        """The model, its weights loaded once (concurrent callers wait for the one load)."""
        with self._loading:
            if self._model is None:
                model = AutoModelForCausalLM.from_pretrained(self.path, revision=self.spec.revision, dtype=self.dtype)
                model = model.to(self.device).eval()
                device_of.check_forward_signature(getattr(model, model.base_model_prefix))
                self.copyable_cache, self.sliding_window = device_of.cache_layout(model.config)
                self.logit_transform = device_of.logit_transform(model.config)
                per_token = device_of.bytes_per_token(self.config, self.dtype)
                limits = device_of.initial_limits(self.spec.batch_size, self.spec.batch_tokens, self.device, per_token)
                self.limits = device_of.AdaptiveLimits(limits, self._on_smaller_batches)
                # every id that ends a turn (generation_config may list several, e.g. Llama 3's <|eot_id|>)
                eos = getattr(model.generation_config, "eos_token_id", None)
                self.eos_ids = {self.tokenizer.eos_token_id, *(eos if isinstance(eos, list) else [eos])} - {None}
                self._model = model
        return self._model

    def _on_smaller_batches(self, before: BatchLimits, after: BatchLimits) -> None:
        log.warning(
            "model %s ran out of device memory at %d rows / %d tokens per batch: %d rows / %d tokens from now on "
            "(attention bound %s)",
            self.spec.name, before.rows, before.tokens, after.rows, after.tokens, after.attention,
        )  # fmt: skip

    @property
    def model(self) -> Any:
        return self._model if self._model is not None else self.load_model()

    def _chat_prompt(self, prompt: str) -> str:
        """The prompt as the model's chat: one user turn, then the assistant's turn left open."""
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )

    # --- tokens ---------------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens_many(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []

    def truncate_left(self, text: str, max_tokens: int) -> str:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return self.tokenizer.decode(ids[-max_tokens:]) if len(ids) > max_tokens else text

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model_path": self.path,
            "model_revision": self.revision,
            "batch_size": self.starting_rows() if self.limits is None else self.limits.current.rows,
            "dtype": str(self.dtype).removeprefix("torch."),
            "max_context": self.max_context,
            "prompt_format": "chat_template" if self.spec.chat else "plain",
            "hardware": torch.cuda.get_device_name(0)
            if self.device.type == "cuda"
            else f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)",
            # plain str: torch's version is a TorchVersion, and unpickling one (the model process sends this
            # description) imports all of torch in the receiving process
            "library_versions": {"torch": str(torch.__version__), "transformers": transformers.__version__},
            # the device ran out of memory at more rows: what the run started with (batch_size: what it uses now)
            **({"backed_off_from": self.starting_rows()} if self._backed_off() else {}),
        }

    def _backed_off(self) -> bool:
        return self.limits is not None and self.limits.current.rows < self.starting_rows()

    def starting_rows(self) -> int:
        """The most rows a forward pass starts with (the setting, or what `auto` gives on this device)."""
        if self.spec.batch_size != "auto":
            return int(self.spec.batch_size)
        return device_of.CPU_LIMITS.rows if self.device.type != "cuda" else device_of.GPU_MAX_ROWS

    # --- generation -----------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, requests: Sequence[Request], on_done: OnDone | None = None) -> list[Completion]:
        """Greedy requests run in our own decoding loop: prompts that share a prefix (a few-shot block) run it
        once and continue from its key/value cache, and only the last position gets the vocabulary projection.
        Sampled requests (temperature > 0) go through `generate`."""
        self.load_model()  # before any clock starts: a request's latency is the model's, not its loading's
        results: dict[str, Completion] = {}
        groups: dict[tuple, list[Request]] = {}
        for r in requests:
            groups.setdefault((r.max_tokens, r.temperature, r.stop), []).append(r)
        for (max_tokens, temperature, stop), group in groups.items():
            if temperature == 0:
                batches = self._greedy_batches(group, max_tokens, stop)
            else:  # longest first, so padding is minimal and a too-large batch fails at once
                order = sorted(group, key=lambda r: -r.num_prompt_tokens)
                batches = self._in_batches(
                    order,
                    lambda r: r.num_prompt_tokens + max_tokens,
                    lambda chunk, _limits: self._generate_group(chunk, max_tokens, temperature, stop),
                    lambda r: r.num_prompt_tokens,
                )
            for finished in batches:
                results.update(finished)
                if on_done:
                    on_done(list(finished.values()))
        return [results[r.request_id] for r in requests]

    def _completion(
        self, request: Request, new_ids: list[int], lps: list[float], tops: list, prompt_tokens: int, latency: float,
        stop: tuple[str, ...],
    ) -> Completion:  # fmt: skip
        """The completion as the text up to EOS or the first stop sequence, with the kept tokens' log-probabilities
        and top alternatives (tops: per position, (ids, log-probabilities) of the top TOP_K)."""
        ids, kept_lps, top, text, finish = [], [], [], "", "length"
        for pos, token_id in enumerate(new_ids):
            if token_id in self.eos_ids:  # after it there is only padding
                finish = "eos"
                break
            if stop:  # the text so far, decoded whole (a token's text can depend on its neighbours)
                piece = self.tokenizer.decode(ids + [token_id])
                cut, stopped = cut_at_stop(piece, stop)
                if stopped:
                    text, finish = cut, "stop"
                    break
            ids.append(token_id)
            kept_lps.append(float(lps[pos]))
            top.append(self._alternatives(*tops[pos]))
        if finish != "stop":  # without a stop sequence only the whole text is needed: decoded once
            text = self.tokenizer.decode(ids) if ids else ""
        return Completion(
            request_id=request.request_id,
            text=text,
            tokens=tuple(self._token_text(i) for i in ids),
            logprobs=tuple(kept_lps),
            logprob=sum(kept_lps),
            num_prompt_tokens=prompt_tokens,
            num_completion_tokens=len(ids),
            latency_s=latency,
            finish_reason=finish,
            top_logprobs=tuple(top),
        )

    def _greedy_batches(self, group: list[Request], max_tokens: int, stop: tuple[str, ...]):
        """Greedy completions batch by batch: prompts clustered by a shared token prefix (e.g. a subset's
        few-shot block), the prefix run once per cluster; the rest in length-sorted batches. The plan counts every
        batch as decoding `max_tokens` steps until answers show how long they are: on a CPU, where answers often end
        far sooner (a label, a line), what is left after REPLAN_AFTER answers is planned again for twice the longest."""
        limit = max(self.max_context - max_tokens, 1)
        encoded = [self.tokenizer(r.prompt, add_special_tokens=False)["input_ids"][-limit:] for r in group]
        encoded = [ids or [self._fallback_token()] for ids in encoded]
        plan, seen, longest = self._generation_groups(encoded, max_tokens), 0, 0  # answers seen, the longest's steps
        replan = self.device.type == "cpu"
        while plan:
            (members, prefix_len), *plan = plan
            for finished in self._greedy_group(group, encoded, members, prefix_len, max_tokens, stop):
                seen += len(finished)
                longest = max([longest] + [c.num_completion_tokens + 1 for c in finished.values()])
                yield finished
            if replan and plan and seen >= REPLAN_AFTER:  # once: what is left, planned for the answers seen
                replan = False
                if 2 * longest < max_tokens:
                    left = [i for members, _ in plan for i in members]
                    again = self._generation_groups([encoded[i] for i in left], max_tokens, decode_steps=2 * longest)
                    plan = [([left[j] for j in members], prefix_len) for members, prefix_len in again]

    def _greedy_group(
        self, group: list[Request], encoded: list[list[int]], members: list[int], prefix_len: int, max_tokens: int,
        stop: tuple[str, ...],
    ):  # fmt: skip
        """One group of the plan: its shared prefix run once (a subset's few-shot block; every prompt continues from
        its cache), then its prompts in length-sorted batches."""
        members = sorted(members, key=lambda i: -len(encoded[i]))  # similar lengths in a batch: little padding
        cache, prefix_s = None, 0.0
        if prefix_len:
            cache, prefix_s = self._prefix_cache(encoded[members[0]][:prefix_len], len(members))
        yield from self._in_batches(
            members,
            lambda i: len(encoded[i]) + max_tokens,  # held at the end: the prefix, the prompt, the answer
            lambda chunk, _limits: self._greedy_batch(
                chunk, group, encoded, max_tokens, stop, cache, prefix_len, prefix_s
            ),  # fmt: skip
            lambda i: len(encoded[i]) - prefix_len,  # the prefix is in the cache: not computed again
        )

    def _generation_groups(
        self, encoded: list[list[int]], steps: int, decode_steps: int | None = None
    ) -> list[tuple[list[int], int]]:
        """The prompts of a greedy generation grouped by a prefix run once (batching.prefix_groups). On a CPU, where a
        pass of a small batch costs what a few dozen prompt tokens do, a cluster shares its prefix where that saves
        more than its prefix pass and extra batches cost (batching.generation_prefix_groups), one-token answers
        included: 0-shot questions that share only an opening line stay in full batches; elsewhere as
        min_shared_prefix_members says. decode_steps: the steps a batch is expected to decode (default: `steps`, the
        most it may)."""
        if self.device.type == "cpu" and self.min_shared_prefix_members(steps) < sys.maxsize:
            limits, step = self.limits.current, device_of.CPU_STEP_TOKENS
            return generation_prefix_groups(encoded, steps, limits, step, decode_steps)
        return prefix_groups(encoded, self.min_shared_prefix_members(steps))

    def min_shared_prefix_members(self, steps: int = 1) -> int:
        """Prompts that must share a prefix for it to run once, for work of `steps` forward passes per batch (1:
        scoring, or a one-token answer). On a CPU, which computes in step with the work, any two: what is not computed
        is saved (in scoring; generation, of one token or more, weighs it: _generation_groups). On a GPU a cluster too
        small to fill half a batch costs a prefix pass and a short batch, so its prompts run with the rest, in full
        length-sorted batches (0-shot prompts share only an instruction line and a few words; an original and its edited
        copy share a long text). Longer generation pays every extra batch once per generated token: on a GPU the cluster
        must fill a whole batch (a CPU weighs it: _generation_groups)."""
        rows = self.limits.current.rows
        if self.sliding_window or not self.copyable_cache:
            return sys.maxsize  # see transformers_device.cache_layout
        if steps > 1:
            return max(2, rows)
        if self.device.type == "cpu":
            return 2
        return max(2, min(rows, MAX_CLUSTER_BATCH) // 2)

    def _in_batches(
        self, order: list, width: Callable[[Any], int], run: Callable[[list, BatchLimits], Any],
        queries: Callable[[Any], int] | None = None,
    ):  # fmt: skip
        """run(chunk, limits) on consecutive chunks of `order` (longest first) within the batch limits (padded_batches;
        queries: the tokens of a row its first pass computes); a chunk that runs out of device memory runs again as a
        smaller one, and the smaller limits stay."""
        pending = list(order)
        while pending:

            def attempt(limits: BatchLimits) -> tuple[list, Any]:
                chunk = next(padded_batches(pending, width, limits, queries))
                return chunk, run(chunk, limits)

            chunk, result = self.limits.run(attempt)
            pending = pending[len(chunk) :]
            yield result

    def _greedy_batch(
        self, idx: list[int], group, encoded, max_tokens: int, stop, prefix_cache=None, prefix_len: int = 0,
        prefix_s: float = 0.0,
    ) -> dict[str, Completion]:  # fmt: skip
        """Greedy decoding of a batch after an optional shared prefix (see _padded_forward). The host reads the
        chosen tokens back every `sync_every` steps (and at steps 1, 2, 4, 8 ...), in one transfer, and decides
        then which rows are done; a row keeps decoding after its end until the batch is seen to be done, and
        what it decodes past its end is never kept."""
        started = time.perf_counter()
        out, mask, positions = self._padded_forward([encoded[i][prefix_len:] for i in idx], prefix_cache, prefix_len)
        position = positions[:, -1:]
        new_ids, lps, tops = [[] for _ in idx], [[] for _ in idx], [[] for _ in idx]
        finished = [False] * len(idx)
        pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # steps not yet read back
        for step in range(max_tokens):
            top_lps, top_ids = top_log_probabilities(self._vocab_logits(out.last_hidden_state[:, -1]), TOP_K)
            pending.append((top_ids, top_lps))
            last = step == max_tokens - 1
            if last or _read_back(step + 1, self.sync_every):
                step_ids = torch.stack([ids for ids, _ in pending], dim=1).tolist()  # rows x steps x TOP_K
                step_lps = torch.stack([lp for _, lp in pending], dim=1).tolist()
                pending = []
                for row in range(len(idx)):
                    for ids, row_lps in zip(step_ids[row], step_lps[row]):
                        if finished[row]:
                            break
                        new_ids[row].append(ids[0])
                        lps[row].append(row_lps[0])
                        tops[row].append((ids, row_lps))
                        finished[row] = self._done(new_ids[row], stop)
                if all(finished) or last:
                    break
            mask = torch.cat([mask, torch.ones((len(idx), 1), dtype=mask.dtype, device=self.device)], dim=1)
            position = position + 1
            out = self._base(input_ids=top_ids[:, :1], attention_mask=mask, position_ids=position,
                             cache=out.past_key_values, use_cache=True)  # fmt: skip
        elapsed = (time.perf_counter() - started) / len(idx) + prefix_s
        return {
            group[i].request_id: self._completion(
                group[i], new_ids[row], lps[row], tops[row], len(encoded[i]), elapsed, stop
            )
            for row, i in enumerate(idx)
        }

    def _alternatives(self, ids: list[int], lps: list[float]) -> dict[str, float]:
        """A position's top alternatives by text, best first. Two ids can decode to the same text (a byte-level
        vocabulary's pieces): the text keeps the better one's log-probability."""
        out: dict[str, float] = {}
        for token_id, lp in zip(ids, lps):
            out.setdefault(self._token_text(token_id), lp)
        return out

    def _token_text(self, token_id: int) -> str:
        """One token's text, decoded once per token id (each answer's tokens and top alternatives ask again)."""
        text = self._token_texts.get(token_id)
        if text is None:
            text = self._token_texts[token_id] = self.tokenizer.decode([token_id])
        return text

    def _done(self, ids: list[int], stop: tuple[str, ...]) -> bool:
        """Generation of this row can end: EOS, or a stop sequence in its text."""
        return ids[-1] in self.eos_ids or (bool(stop) and cut_at_stop(self.tokenizer.decode(ids), stop)[1])

    def _fallback_token(self) -> int:
        """What an empty prompt starts from: the BOS token, or EOS for tokenizers without one."""
        bos = self.tokenizer.bos_token_id
        return bos if bos is not None else self.tokenizer.eos_token_id

    # --- scoring --------------------------------------------------------------------------------------
    @torch.inference_mode()
    def _base(self, **kwargs):
        """The transformer without its language-model head (every forward pass of the client's goes through here)."""
        self.pass_rows[int(kwargs["input_ids"].shape[0])] += 1
        return getattr(self.model, self.model.base_model_prefix)(**kwargs)

    def _prefix_cache(self, prefix: list[int], shared_by: int):
        """The key/value cache of a prefix many prompts share, and its run time per prompt."""
        started = time.perf_counter()
        cache = self._base(input_ids=torch.tensor([prefix], device=self.device), use_cache=True).past_key_values
        return cache, (time.perf_counter() - started) / shared_by

    def _padded_forward(self, rows: list[list[int]], prefix_cache=None, prefix_len: int = 0):
        """One forward pass over token rows that continue a shared prefix (its key/value cache; none: they start
        fresh). Each row is padded on the left, between the prefix and it, so every row ends in the last column;
        the attention mask hides the padding and explicit positions keep each token where it is in its prompt.
        Returns the model's output, the attention mask (prefix included) and the rows' positions, on the device."""
        width = max(len(row) for row in rows)
        pad = self.tokenizer.pad_token_id
        inputs = torch.tensor([[pad] * (width - len(row)) + list(row) for row in rows], dtype=torch.long)
        mask = torch.tensor([[1] * prefix_len + [0] * (width - len(row)) + [1] * len(row) for row in rows])
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)[:, prefix_len:]
        mask, positions = mask.to(self.device), positions.to(self.device)
        cache = None if prefix_cache is None else expanded(prefix_cache, len(rows))
        out = self._base(
            input_ids=inputs.to(self.device), attention_mask=mask, position_ids=positions, cache=cache, use_cache=True
        )
        return out, mask, positions

    def _vocab_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits over the vocabulary at the given positions (the head runs only there, and does what the model's
        own forward does to its output: transformers_device.logit_transform)."""
        logits = self.model.get_output_embeddings()(hidden).float()
        return logits if self.logit_transform is None else self.logit_transform(logits)


def _read_back(steps: int, every: int) -> bool:
    """Whether greedy decoding reads its tokens back after `steps` steps: at 1, 2, 4, ... up to `every`, then every
    `every` steps (short answers end early without waiting for a whole stretch)."""
    return steps % every == 0 or (steps < every and steps & (steps - 1) == 0)
