"""Where and how a local transformers model runs: its device and dtype, how much one forward pass may hold (`auto`:
sized from the device's memory, halved and remembered when the device runs out), and the transformers versions whose
forward signature the client relies on."""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from packaging.version import Version

from holistic_dagster.clients.batching import BatchLimits
from holistic_dagster.errors import LibraryVersionError

# Our forward-with-cache calls pass the key/value cache as `cache=`, the name transformers 5.24 gives it; older
# releases call it `past_key_values` and silently ignore an unknown keyword, so a cached prefix would be dropped and
# every score computed without it (measured under 5.17: 0 of 639 answers equal). pyproject.toml pins the same floor.
MIN_TRANSFORMERS = Version("5.24.0")

# CPU defaults (bench/results/gpu-cpu-tiny-h200-workload.md): for scoring, more rows per pass gain little on 2 cores,
# but greedy generation takes one pass per token for a whole batch, so 64 rows generated 256 answers in a quarter of
# the passes 16 rows took (16 rows: 2.1-2.3x the floor's time at 64; 64 rows: the floor's); the token budget bounds
# what a pass holds (a 5-shot block of 500 tokens continued by 16 rows fits; 16 articles of 2,000 tokens do not);
# and the attention bound keeps long prompts out of padded batches: on 2 cores the demo's RAFT
# prompts (7 of 409-2,112 tokens, one batch within the token budget) took 50 s together and 18 s one at a time; all of
# RAFT's 27 took 27 s instead of 55, and the demo's 95 generation requests 88 s instead of 119, with the same texts
# (bench/results/cpu-attention.md);
# the 0-shot prompts of bench/gpu.py's generation run 128 to a pass: since the vocabulary's log-probabilities are taken
# 16 rows at a time (top_k.top_log_probabilities), 128 rows generate them in 0.97-1.10x the floor's time at 128 rows,
# its fastest, where 64 rows took 1.09-1.39x (bench/results/gpu-cpu-tiny-rows128.md); a longer prompt is held to
# fewer rows by the token budget
CPU_LIMITS = BatchLimits(rows=128, tokens=16384, attention=2**22)
# what one greedy decoding step of a batch costs on a CPU, in prompt tokens computed (batching.
# generation_prefix_groups): measured on 2 cores, 20-30 for SmolLM2-135M at one row (a step 58-62 ms, a prompt token
# 2-3 ms, 1 or 2 threads), 45-59 at three, and 74-103 for the demo's tiny models (whose time is small either way);
# a plan counts every batch's `max_tokens` steps until answers are seen, then twice the longest seen (answers that stop
# early, a label or a number, take far fewer: TransformersClient._greedy_batches)
CPU_STEP_TOKENS = 32
# a GPU's `auto` starts here; the token budget is lowered to what its free memory holds
GPU_MAX_ROWS = 256
GPU_MAX_TOKENS = 65536
GPU_MEMORY_SHARE = 0.5  # of the free memory after loading the weights, for one forward pass's activations and cache

T = TypeVar("T")


def installed_transformers() -> str:
    """The version of the transformers distribution installed."""
    return importlib.metadata.version("transformers")


def check_transformers_version(version: str | None = None) -> None:
    """Refuse a transformers older than the one whose forward signature this client relies on (by default the
    installed one)."""
    version = version or installed_transformers()
    if Version(version) < MIN_TRANSFORMERS:
        raise LibraryVersionError(
            f"transformers {version} is installed; the transformers backend needs >= {MIN_TRANSFORMERS} (older "
            "releases name the key/value cache `past_key_values` and ignore `cache=` without an error, so cached "
            f"prefixes would be dropped and scores silently wrong): pip install 'transformers>={MIN_TRANSFORMERS}'"
        )


def check_forward_signature(base_model: Any) -> None:
    """Refuse a model whose forward does not take the key/value cache as `cache` (it would ignore ours)."""
    params = inspect.signature(base_model.forward).parameters
    if "cache" not in params:
        named = "past_key_values" if "past_key_values" in params else "no key/value cache argument"
        raise LibraryVersionError(
            f"{type(base_model).__name__}.forward takes {named!r}, not 'cache' (transformers "
            f"{installed_transformers()}): the transformers backend passes the key/value cache as `cache=` and "
            f"would run silently wrong; install transformers >= {MIN_TRANSFORMERS}"
        )


def cache_layout(config: Any) -> tuple[bool, bool]:
    """(whether the model's key/value cache can be copied row by row: every layer a plain or a sliding-window
    attention layer, none a linear-attention or state-space one; whether any layer attends within a sliding
    window). Sharing a prefix pads between it and each row, which a window counts as tokens, so sliding-window
    models never share one; models whose cache holds other states never copy it."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    try:
        layers = DynamicCache(config=config).layers
    except (ValueError, TypeError, KeyError, AttributeError):
        return False, False
    copyable = bool(layers) and all(type(layer) in (DynamicLayer, DynamicSlidingWindowLayer) for layer in layers)
    return copyable, any(isinstance(layer, DynamicSlidingWindowLayer) for layer in layers)


def logit_transform(config: Any) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """What a model's own forward does to its head's output before the softmax, where its config says so: Gemma 2
    and 3 cap logits softly (final_logit_softcapping), Cohere scales them (logit_scale), Granite divides them
    (logits_scaling). The client runs the head itself, so it applies the same."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    cap = getattr(text, "final_logit_softcapping", None)
    scale = getattr(text, "logit_scale", None)
    divide = getattr(text, "logits_scaling", None)
    steps = []
    if scale:
        steps.append(lambda x: x * scale)
    if divide:
        steps.append(lambda x: x / divide)
    if cap:
        steps.append(lambda x: torch.tanh(x / cap) * cap)
    if not steps:
        return None

    def transform(logits: torch.Tensor) -> torch.Tensor:
        for step in steps:
            logits = step(logits)
        return logits

    return transform


def resolve_device(setting: str) -> torch.device:
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(setting)


def resolve_dtype(setting: str, checkpoint_dtype: Any, device: torch.device) -> torch.dtype:
    """The dtype the model runs in. auto: the checkpoint's own (float32 when it names none), except that a float32
    checkpoint runs in bfloat16 on a GPU that supports it (half the memory, several times the speed)."""
    if setting != "auto":
        return getattr(torch, setting)
    own = checkpoint_dtype if isinstance(checkpoint_dtype, torch.dtype) else None
    if isinstance(checkpoint_dtype, str) and isinstance(getattr(torch, checkpoint_dtype, None), torch.dtype):
        own = getattr(torch, checkpoint_dtype)
    own = own or torch.float32
    if device.type == "cuda" and own == torch.float32 and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return own


def bytes_per_token(config: Any, dtype: torch.dtype) -> int:
    """What one token costs in a forward pass, roughly: its keys and values in every layer, and the widest
    activations of one layer (the MLP's intermediate, attention's projections)."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    hidden = int(getattr(text, "hidden_size", 0) or getattr(text, "n_embd", 0) or 1024)
    layers = int(getattr(text, "num_hidden_layers", 0) or getattr(text, "n_layer", 0) or 24)
    heads = int(getattr(text, "num_attention_heads", 0) or getattr(text, "n_head", 0) or 16)
    kv_heads = int(getattr(text, "num_key_value_heads", 0) or heads)
    head_dim = int(getattr(text, "head_dim", 0) or hidden // heads)
    intermediate = int(getattr(text, "intermediate_size", 0) or getattr(text, "n_inner", 0) or 4 * hidden)
    size = torch.finfo(dtype).bits // 8
    return (2 * layers * kv_heads * head_dim + 4 * hidden + 3 * intermediate) * size


def initial_limits(rows: int | str, tokens: int | str, device: torch.device, per_token: int) -> BatchLimits:
    """The batch limits a client starts with: the settings where they are numbers; `auto` on a CPU is CPU_LIMITS,
    on a GPU the most rows and the token budget that GPU_MEMORY_SHARE of its free memory holds."""
    if device.type != "cuda":
        auto = CPU_LIMITS
    else:
        free, _total = torch.cuda.mem_get_info(device)
        fits = int(free * GPU_MEMORY_SHARE) // max(per_token, 1)
        auto = BatchLimits(GPU_MAX_ROWS, max(1024, min(GPU_MAX_TOKENS, fits)))
    return BatchLimits(
        rows=auto.rows if rows == "auto" else int(rows),
        tokens=auto.tokens if tokens == "auto" else int(tokens),
        attention=auto.attention,
    )


class AdaptiveLimits:
    """A client's batch limits, halved when the device runs out of memory and remembered from then on (what
    lm-evaluation-harness's `batch_size: auto` finds by trial, found here by the work itself)."""

    def __init__(self, limits: BatchLimits, on_change: Callable[[BatchLimits, BatchLimits], None] | None = None):
        self.current = limits
        self.on_change = on_change

    def run(self, attempt: Callable[[BatchLimits], T]) -> T:
        """attempt(limits), again with halved limits each time it runs out of device memory. When one row alone does
        not fit, the error stands and the limits go back to what they were: the row was too long, not the batches
        too large."""
        before = self.current
        while True:
            try:
                return attempt(self.current)
            except torch.OutOfMemoryError:
                smaller = self.current.halved()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                if smaller is None:
                    self.current = before
                    raise
                if self.on_change:
                    self.on_change(self.current, smaller)
                self.current = smaller
