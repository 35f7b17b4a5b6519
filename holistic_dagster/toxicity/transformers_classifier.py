"""A local transformers sequence classifier as the toxicity classifier (any checkpoint directory whose
config names a toxic label, e.g. a toxic-comment model saved with save_pretrained)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from holistic_dagster.config.catalog import ToxicitySpec
from holistic_dagster.errors import CatalogError
from holistic_dagster.records import sha256_file


class TransformersClassifier:
    def __init__(self, spec: ToxicitySpec):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if not spec.path or not Path(spec.path).is_dir():
            raise CatalogError(f"toxicity classifier: `path` must be a local checkpoint directory, got {spec.path!r}")
        self.spec = spec
        self.tokenizer = AutoTokenizer.from_pretrained(spec.path)
        self.tokenizer.padding_side = "right"  # position ids count from the first token, as in training
        self.model = AutoModelForSequenceClassification.from_pretrained(spec.path).eval()
        labels = {v.lower(): int(k) for k, v in self.model.config.id2label.items()}
        if spec.toxic_label.lower() not in labels:
            raise CatalogError(
                f"toxicity classifier {spec.path}: no label {spec.toxic_label!r} (its labels: "
                f"{', '.join(self.model.config.id2label.values())}); set `toxic_label` in the suite file"
            )
        self.index = labels[spec.toxic_label.lower()]
        self.multi_label = self.model.config.problem_type == "multi_label_classification"
        weights = sorted(Path(spec.path).glob("*.safetensors")) or sorted(Path(spec.path).glob("*.bin"))
        digest = sha256_file(weights[0])[:12] if weights else "unknown"
        self.name = f"transformers:{Path(spec.path).name}@{digest}"
        self._torch = torch

    def score(self, texts: Sequence[str]) -> list[float]:
        out: list[float] = []
        size = self.spec.batch_size
        with self._torch.inference_mode():
            for start in range(0, len(texts), size):
                batch = [t if t.strip() else " " for t in texts[start : start + size]]
                enc = self.tokenizer(batch, padding=True, truncation=True, max_length=512, return_tensors="pt")
                logits = self.model(**enc).logits.float()
                probs = logits.sigmoid() if self.multi_label else logits.softmax(-1)
                out.extend(probs[:, self.index].tolist())
        return out
