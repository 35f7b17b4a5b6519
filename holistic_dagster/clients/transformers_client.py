"""Local models on transformers + torch: batched greedy generation and continuation log-probabilities.

CPU by default, the GPU when one is present. Any local checkpoint directory works (or a hub id where a
network exists); `demo:<name>` builds one of the offline demo models first.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

from holistic_dagster import settings
from holistic_dagster.catalog import ModelSpec
from holistic_dagster.clients import Progress
from holistic_dagster.hashing import sha256_file
from holistic_dagster.records import Completion, Request

# token counts of over-long prompts are expected (adaptation trims them); weight-loading bars are noise
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()


def _revision(path: Path) -> str:
    """A content hash of the checkpoint, so a changed model is never mistaken for the old one."""
    files = sorted(p for p in path.glob("*") if p.suffix in (".safetensors", ".json", ".bin", ".model"))
    return "sha256:" + "".join(sha256_file(p)[:8] for p in files)[:32] if files else "unknown"


class TransformersClient:
    backend = "transformers"

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        path = spec.path
        if path.startswith("demo:"):
            from holistic_dagster.clients.demo_models import ensure_demo_model

            path = str(ensure_demo_model(path.removeprefix("demo:"), settings.home_dir() / "demo_models"))
        self.path = path
        local = Path(path).is_dir()
        self.device = torch.device(
            "cuda"
            if spec.device == "auto" and torch.cuda.is_available()
            else ("cpu" if spec.device == "auto" else spec.device)
        )
        self.tokenizer = AutoTokenizer.from_pretrained(path, revision=spec.revision)
        self.model = AutoModelForCausalLM.from_pretrained(path, revision=spec.revision).to(self.device).eval()
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        window = getattr(self.model.config, "max_position_embeddings", None) or getattr(
            self.model.config, "n_positions", 2048
        )
        self.max_context = spec.max_context or int(window)
        self.revision = spec.revision or (_revision(Path(path)) if local else "unpinned")

    # --- tokens ---------------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def truncate_left(self, text: str, max_tokens: int) -> str:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return self.tokenizer.decode(ids[-max_tokens:]) if len(ids) > max_tokens else text

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model_path": self.path,
            "model_revision": self.revision,
            "batch_size": self.spec.batch_size,
            "max_context": self.max_context,
            "hardware": torch.cuda.get_device_name(0)
            if self.device.type == "cuda"
            else f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)",
            "library_versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        }

    # --- generation -----------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Completion]:
        results: dict[str, Completion] = {}
        # longest first, so padding is minimal and a too-large batch fails at once
        order = sorted(requests, key=lambda r: -r.num_prompt_tokens)
        self.tokenizer.padding_side = "left"
        for start in range(0, len(order), self.spec.batch_size):
            batch = order[start : start + self.spec.batch_size]
            groups: dict[tuple, list[Request]] = {}
            for r in batch:
                groups.setdefault((r.max_tokens, r.temperature, r.stop), []).append(r)
            for (max_tokens, temperature, stop), group in groups.items():
                results.update(self._generate_group(group, max_tokens, temperature, stop))
            if progress:
                progress(len(batch))
        return [results[r.request_id] for r in requests]

    def _generate_group(
        self, group: list[Request], max_tokens: int, temperature: float, stop: tuple[str, ...]
    ) -> dict[str, Completion]:
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
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
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
        done: dict[str, Completion] = {}
        for row, request in enumerate(group):
            ids, lps, text = [], [], ""
            finish = "length"
            for pos, token_id in enumerate(new_ids[row].tolist()):
                if token_id == self.tokenizer.eos_token_id:  # after it there is only padding
                    finish = "eos"
                    break
                piece = self.tokenizer.decode(ids + [token_id])
                cut = _first_stop(piece, stop)
                if cut is not None:
                    text, finish = piece[:cut], "stop"
                    break
                ids.append(token_id)
                lps.append(float(scores[row, pos]))
                text = piece
            done[request.request_id] = Completion(
                request_id=request.request_id,
                text=text,
                tokens=tuple(self.tokenizer.convert_ids_to_tokens(ids)),
                logprobs=tuple(lps),
                logprob=sum(lps),
                num_prompt_tokens=int(enc["attention_mask"][row].sum()),
                num_completion_tokens=len(ids),
                latency_s=elapsed / len(group),
                finish_reason=finish,
            )
        return done

    # --- scoring --------------------------------------------------------------------------------------
    @torch.inference_mode()
    def score(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Completion]:
        encoded = [self._encode_pair(r) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: -len(encoded[i][0]))
        results: dict[int, Completion] = {}
        pad = self.tokenizer.pad_token_id
        for start in range(0, len(order), self.spec.batch_size):
            idx = order[start : start + self.spec.batch_size]
            width = max(len(encoded[i][0]) for i in idx)
            input_ids = torch.full((len(idx), width), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                ids = encoded[i][0]
                input_ids[row, : len(ids)] = torch.tensor(ids)
                mask[row, : len(ids)] = 1
            started = time.perf_counter()
            base = getattr(self.model, self.model.base_model_prefix)
            hidden = base(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device)).last_hidden_state
            # only the continuation's positions need the vocabulary projection and log-softmax
            rows, cols, targets = [], [], []
            for row, i in enumerate(idx):
                ids, n_cont = encoded[i]
                for pos in range(len(ids) - n_cont, len(ids)):
                    rows.append(row)
                    cols.append(pos - 1)
                    targets.append(ids[pos])
            logits = self.model.get_output_embeddings()(hidden[rows, cols]).float()
            token_lps = torch.log_softmax(logits, dim=-1)[torch.arange(len(targets)), torch.tensor(targets)].tolist()
            elapsed = time.perf_counter() - started
            offset = 0
            for row, i in enumerate(idx):
                ids, n_cont = encoded[i]
                lps = token_lps[offset : offset + n_cont]
                offset += n_cont
                cont_ids = ids[len(ids) - n_cont :]
                results[i] = Completion(
                    request_id=requests[i].request_id,
                    text=requests[i].continuation,
                    tokens=tuple(self.tokenizer.convert_ids_to_tokens(cont_ids)),
                    logprobs=tuple(lps),
                    logprob=float(sum(lps)),
                    num_prompt_tokens=len(ids) - n_cont,
                    num_completion_tokens=0,
                    latency_s=elapsed / len(idx),
                    finish_reason="scored",
                )
            if progress:
                progress(len(idx))
        return [results[i] for i in range(len(requests))]

    def _encode_pair(self, request: Request) -> tuple[list[int], int]:
        """Token ids of prompt + continuation (cut from the left to fit), and how many belong to the
        continuation. Whitespace at the end of the prompt moves to the continuation (as lm-eval does)."""
        context, continuation = request.prompt, request.continuation
        stripped = context.rstrip()
        continuation = context[len(stripped) :] + continuation
        ctx = self.tokenizer(stripped, add_special_tokens=False)["input_ids"]
        cont = self.tokenizer(continuation, add_special_tokens=False)["input_ids"]
        if not ctx:
            ctx = [
                self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.tokenizer.eos_token_id
            ]
        ids = (ctx + cont)[-self.max_context :]
        return ids, min(len(cont), len(ids) - 1)


def _first_stop(text: str, stop: tuple[str, ...]) -> int | None:
    hits = [text.find(s) for s in stop if s and s in text]
    return min(hits) if hits else None
