"""The shape of a run, per instance, as HELM records it beside its efficiency metrics ("general information"):
in-context examples, truncation, trials, finish reasons, completion tokens. Our own stages record these facts in
the prompts and completions tables; these declarations let the per-instance values of runs imported from HELM
(holistic_dagster.helm) be stored, shown and exported back as HELM wrote them."""

from __future__ import annotations

import math

from holistic_dagster.metrics.registry import declare

COUNT = (0.0, math.inf)
_SHAPE = {
    "num_train_instances": ("in-context examples in the prompt", COUNT),
    "num_train_trials": ("train trials (HELM: draws of in-context examples)", COUNT),
    "num_references": ("references of the instance", COUNT),
    "num_completion_tokens": ("tokens of the completions (all samples)", COUNT),
    "batch_size": ("requests per batch", COUNT),
    "prompt_truncated": ("whether the prompt was cut to fit the context window", (0.0, 1.0)),
    "finish_reason_length": ("generation stopped at max_tokens", (0.0, 1.0)),
    "finish_reason_stop": ("generation stopped at a stop sequence", (0.0, 1.0)),
    "finish_reason_endoftext": ("generation stopped at end of text", (0.0, 1.0)),
    "finish_reason_unknown": ("the backend did not say why generation stopped", (0.0, 1.0)),
}
for _name, (_what, _bounds) in _SHAPE.items():
    declare(_name, "efficiency", _what, lower_is_better=True, bounds=_bounds, per_instance=True,
            mean_of_instances=True)  # fmt: skip
