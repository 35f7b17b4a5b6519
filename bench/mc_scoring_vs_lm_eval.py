"""Benchmark: local multiple-choice scoring, ours versus EleutherAI lm-evaluation-harness, side by side.

Same model directory, same MMLU subjects from ../shared/data, same prompts (our multiple_choice_separate
requests, 5-shot), same (context, continuation) pairs. Reports wall-time ratios and the largest per-choice
log-likelihood difference (they must agree to 1e-4). lm-eval runs in its own virtual environment, created
here on first use (bench/.venv-lm-eval; LM_EVAL_PYTHON points at another one).

--model smollm2 runs the real SmolLM2-135M-Instruct (the registry's GGUF, converted once) instead of the
default random 5M-parameter Llama; also reported: the accuracy each side's log-likelihoods give and the
questions where their decisions differ.

usage: .venv/bin/python bench/mc_scoring_vs_lm_eval.py [--model random|smollm2] [--per-subject 40] [--batch-size 16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peers import checkpoint_of

HERE = Path(__file__).resolve().parent
SUBJECTS = ("abstract_algebra", "college_chemistry", "computer_security", "econometrics", "us_foreign_policy")


def lm_eval_python() -> str:
    if os.environ.get("LM_EVAL_PYTHON"):
        return os.environ["LM_EVAL_PYTHON"]
    venv = HERE / ".venv-lm-eval"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating {venv} (lm-eval 0.4.13, first use only) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        if Path("/opt/wheels").is_dir():
            pip += ["--find-links", "/opt/wheels"]
        subprocess.run([*pip, "torch==2.13.0", "lm-eval[hf]==0.4.13", "transformers==5.24.0"], check=True)
    return str(python)


def build_model(directory: Path) -> Path:
    """A randomly initialised Llama-shaped model of about 5M parameters with the demo tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(checkpoint_of("demo-gpt2-untrained"))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=("random", "smollm2"), default="random")
    parser.add_argument("--per-subject", type=int, default=None, help="default: 40 (random), 6 (smollm2)")
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    shared_data = (HERE.parent.parent / "shared" / "data").resolve()
    os.environ.setdefault("HOLISTIC_DATA_DIR", str(shared_data))

    from holistic_dagster.adaptation.adapter import TokenBudget, build_requests
    from holistic_dagster.clients.transformers_client import TransformersClient
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.config.models import ModelSpec
    from holistic_dagster.scenarios import load_instances, sample_instances
    from holistic_dagster.scenarios.spec import SuiteScenario

    work = Path(tempfile.mkdtemp(prefix="bench-mc-"))
    if args.model == "smollm2":
        model_dir = checkpoint_of("smollm2-135m-instruct")
        label = "SmolLM2-135M-Instruct (Q4_1 GGUF dequantized), float32, CPU"
    else:
        model_dir = build_model(work / "model")
        label = "Llama-shaped, random weights, float32, CPU"
    per_subject = args.per_subject or (6 if args.model == "smollm2" else 40)
    n_params = sum(
        p.numel() for p in __import__("transformers").AutoModelForCausalLM.from_pretrained(model_dir).parameters()
    )

    started = time.perf_counter()
    client = TransformersClient(
        ModelSpec(name="bench", backend="transformers", path=str(model_dir), batch_size=args.batch_size)
    )
    ours_load = time.perf_counter() - started
    catalog = Catalog()
    spec = catalog.scenario("mmlu")
    spec = spec.model_copy(
        update={
            "subsets": SUBJECTS,
            "adapter": spec.adapter.model_copy(update={"method": "multiple_choice_separate_original"}),
        }
    )
    instances = sample_instances(spec, SuiteScenario(max_eval_instances=per_subject, seed=1), load_instances(spec))
    budget = TokenBudget(client.max_context, client.count_tokens, client.truncate_left)
    requests = build_requests(instances, spec.adapter, catalog.templates_dir, budget, seed=1)
    questions = len({r.instance_id for r in requests})

    timings = {}
    results = {}
    for mode, share in (("ours_shared_context", True), ("ours_independent", False)):
        t = time.perf_counter()
        results[mode] = client.score(requests, share_context=share)
        timings[mode] = time.perf_counter() - t

    pairs = [(r.prompt, r.continuation) for r in requests]
    (work / "requests.json").write_text(json.dumps(pairs))
    t = time.perf_counter()
    subprocess.run(
        [
            lm_eval_python(),
            str(HERE / "_lm_eval_worker.py"),
            str(model_dir),
            str(work / "requests.json"),
            str(work / "lm_eval.json"),
            str(args.batch_size),
        ],
        check=True,
    )
    lm_eval_process = time.perf_counter() - t
    theirs = json.loads((work / "lm_eval.json").read_text())

    ours = [c.logprob for c in results["ours_shared_context"]]
    diff = max(abs(a - b) for a, b in zip(ours, theirs["loglikelihoods"]))
    diff_independent = max(
        abs(a.logprob - b.logprob) for a, b in zip(results["ours_shared_context"], results["ours_independent"])
    )
    accuracy = {
        side: _accuracy(requests, instances, lls)
        for side, lls in (("ours", ours), ("lm_eval", theirs["loglikelihoods"]))
    }
    report = {
        "model": f"{label}, {n_params / 1e6:.1f}M parameters",
        "threads": __import__("torch").get_num_threads(),
        "questions": questions,
        "requests": len(requests),
        "batch_size": args.batch_size,
        "max_prompt_tokens": max(r.num_prompt_tokens for r in requests),
        "score_s": {
            "ours_shared_context": round(timings["ours_shared_context"], 2),
            "ours_independent": round(timings["ours_independent"], 2),
            "lm_eval": round(theirs["score_s"], 2),
        },
        "ratio_ours_shared_over_lm_eval": round(timings["ours_shared_context"] / theirs["score_s"], 3),
        "ratio_ours_independent_over_lm_eval": round(timings["ours_independent"] / theirs["score_s"], 3),
        "process_s": {
            "ours_load": round(ours_load, 2),
            "lm_eval_import_and_load": round(theirs["import_and_load_s"], 2),
            "lm_eval_whole_process": round(lm_eval_process, 2),
        },
        "max_abs_loglikelihood_diff_vs_lm_eval": diff,
        "max_abs_diff_shared_vs_independent": diff_independent,
        "accuracy": {side: acc for side, (acc, _) in accuracy.items()},
        "questions_decided_differently": sorted(
            q for q in accuracy["ours"][1] if accuracy["ours"][1][q] != accuracy["lm_eval"][1][q]
        ),
    }
    print(json.dumps(report, indent=2))
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"mc_scoring_vs_lm_eval_{args.model}.json").write_text(json.dumps(report, indent=2))


def _accuracy(requests, instances, loglikelihoods) -> tuple[float, dict[str, int]]:
    """Accuracy of argmax-log-likelihood choices, and the choice taken per question."""
    gold = {i.instance_id: next(k for k, r in enumerate(i.references) if r.correct) for i in instances}
    best: dict[str, tuple[float, int]] = {}
    for request, ll in zip(requests, loglikelihoods):
        if request.instance_id not in best or ll > best[request.instance_id][0]:
            best[request.instance_id] = (ll, request.choice_index)
    chosen = {q: choice for q, (_, choice) in best.items()}
    return round(sum(chosen[q] == gold[q] for q in chosen) / len(chosen), 4), chosen


if __name__ == "__main__":
    main()
