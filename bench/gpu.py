"""Benchmark: the transformers backend against a plain transformers/torch floor on the same model, prompts and answers,
on one GPU (or, with --device cpu, on this machine's CPU).

Three kinds of work, as ../shared/gpubench measured them on an H200:
  (a) joint multiple choice, 5-shot (one greedy token per question after each subject's shared few-shot block),
  (b) separate multiple-choice scoring (each choice's log-likelihood after the bare question, 0-shot),
  (c) greedy generation of up to --gen-tokens tokens (0-shot prompts; a row ends at the end-of-sequence token).
The floor is what a plain script does: length-sorted batches of --floor-batch rows, one forward each (every position
projected onto the vocabulary for (b)), `model.generate` for (c). Ours is TransformersClient at --batch-size rows
and at `auto`. Each side runs in a fresh process of its own (model loading not timed): the first pass of each kind
of work, then a warm pass. Reported per side and kind: wall seconds, requests per second, forward passes and rows
per pass (ours), peak device memory, and GPU utilization (nvidia-smi sampled every 100 ms) during the work; and
whether both sides did the same work (top tokens, log-likelihood differences, identical generations).

Models: --model qwen1.5b (random weights at Qwen2.5-1.5B's shape, bf16, SmolLM2's tokenizer: speed only; the GPU
default), --model smollm2 (SmolLM2-135M-Instruct, the registry's GGUF converted to float32; the CPU default), or a
checkpoint directory. Data: the five MMLU subjects of ../shared/data/mmlu (or --data DIR prepared by --prepare).

To run where the project's environment is not installed (a GPU machine with torch and transformers): first, here,
`bench/gpu.py --prepare bench/.gpu` writes the tokenizer and the MMLU files into bench/.gpu; carry that folder
(and the wheels bench/README.md lists) and run `python3 bench/gpu.py --data bench/.gpu --out $OUT` there.

usage: .venv/bin/python bench/gpu.py [--device cuda|cpu] [--model qwen1.5b|smollm2|DIR] [--questions N] ...
Writes gpu.json and gpu.md (bench/results/gpu-<device>.{json,md} by default, or under --out).
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package, where it is not installed
from peers import checkpoint_of  # noqa: E402

SUBJECTS = ("abstract_algebra", "anatomy", "college_physics", "global_facts", "high_school_geography")
KINDS = ("a_joint", "b_separate", "c_generate")


# --- data ------------------------------------------------------------------------------------------------------
def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return [row for row in csv.reader(f) if row]


def question(row: list[str], answer: bool) -> str:
    q, a, b, c, d, gold = row[:6]
    text = f"Question: {q}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\nAnswer:"
    return text + f" {gold}\n\n" if answer else text


def header(subject: str) -> str:
    return f"The following are multiple choice questions (with answers) about {subject.replace('_', ' ')}.\n\n"


def workload(mmlu: Path, questions: int, generations: int) -> dict[str, list]:
    """The three kinds of work: joint 5-shot prompts; (question, " choice") pairs; 0-shot generation prompts. The
    questions are taken from the five subjects in turn, each in file order (all 639 of them at most)."""
    shots = {s: read_csv(mmlu / "dev" / f"{s}_dev.csv")[:5] for s in SUBJECTS}
    tests = {s: read_csv(mmlu / "test" / f"{s}_test.csv") for s in SUBJECTS}
    in_turn = [(s, tests[s][k]) for k in range(max(map(len, tests.values()))) for s in SUBJECTS if k < len(tests[s])]
    rows = sorted(in_turn[:questions], key=lambda sr: SUBJECTS.index(sr[0]))  # a subject's questions together
    return {
        "a_joint": [header(s) + "".join(question(r, True) for r in shots[s]) + question(r, False) for s, r in rows],
        "b_separate": [(r[0], " " + r[1 + k]) for _, r in rows for k in range(4)],
        "c_generate": [header(s) + question(r, False) for s, r in rows[:generations]],
    }


def prepare(folder: Path, mmlu: Path) -> None:
    """The files a machine without this project's environment needs: SmolLM2's tokenizer and the MMLU subjects."""
    checkpoint = checkpoint_of("smollm2-135m-instruct")
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(checkpoint).save_pretrained(folder / "tok")
    for split in ("dev", "test"):
        (folder / "mmlu" / split).mkdir(parents=True, exist_ok=True)
        for s in SUBJECTS:
            shutil.copy(mmlu / split / f"{s}_{split}.csv", folder / "mmlu" / split)
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"prepared {folder}: tok/ and mmlu/ ({size} bytes)")


def model_dir(args, work: Path) -> Path:
    """The checkpoint both sides load: a random Qwen2 at Qwen2.5-1.5B's shape, SmolLM2 converted, or a folder."""
    if args.model == "smollm2":
        return checkpoint_of("smollm2-135m-instruct")
    if args.model not in ("qwen1.5b", "tiny"):
        return Path(args.model)
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir(args))
    shape = (
        dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
             intermediate_size=8960)
        if args.model == "qwen1.5b"
        else dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=256)
    )  # fmt: skip
    config = Qwen2Config(
        vocab_size=len(tok), max_position_embeddings=32768, tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id or tok.eos_token_id, **shape,
    )  # fmt: skip
    torch.manual_seed(0)
    with torch.device(args.device):
        model = Qwen2ForCausalLM(config)
    path = work / args.model
    model.to(torch.bfloat16 if args.device == "cuda" else torch.float32).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def tokenizer_dir(args) -> Path:
    if args.data and (Path(args.data) / "tok").is_dir():
        return Path(args.data) / "tok"
    return checkpoint_of("smollm2-135m-instruct")


# --- one side, in a process of its own ---------------------------------------------------------------------------
class Utilization:
    """nvidia-smi's GPU utilization sampled every 100 ms in a thread, averaged over a span of time."""

    def __init__(self):
        self.samples: list[tuple[float, float]] = []
        self.proc = None
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.samples.append((time.perf_counter(), float(line.strip().split(",")[0])))
            except ValueError:
                pass

    def mean(self, start: float, end: float) -> float | None:
        inside = [u for t, u in self.samples if start <= t <= end]
        return round(statistics.mean(inside), 1) if inside else None

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()


def side(args) -> None:
    """Runs one side (--side ours|ours-auto|floor) in this process and writes its measurements as JSON."""
    import torch

    data = json.loads(Path(args.workload).read_text())
    device = torch.device(args.device)
    util = Utilization()
    if args.side == "floor":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.path)
        model = AutoModelForCausalLM.from_pretrained(args.path).to(device).eval()
        rows = args.floor_batch
        run = {
            "a_joint": lambda: floor_joint(model, tok, device, data["a_joint"], rows),
            "b_separate": lambda: floor_separate(model, tok, device, data["b_separate"], rows),
            "c_generate": lambda: floor_generate(model, tok, device, data["c_generate"], rows, args.gen_tokens),
        }
        passes = None
    else:
        from holistic_dagster.clients.transformers_client import TransformersClient
        from holistic_dagster.config.models import ModelSpec
        from holistic_dagster.records import Request

        batch = "auto" if args.side == "ours-auto" else args.batch_size
        client = TransformersClient(ModelSpec(name="bench", backend="transformers", path=args.path, batch_size=batch))
        passes = client.pass_rows  # the client's own count of its forward passes, by rows
        joint = [Request(f"j{i}", f"q{i}", "generate", p, max_tokens=1) for i, p in enumerate(data["a_joint"])]
        separate = [
            Request(f"s{i}", f"q{i // 4}", "score", p, continuation=c, choice_index=i % 4)
            for i, (p, c) in enumerate(data["b_separate"])
        ]
        gen = [
            Request(f"g{i}", f"q{i}", "generate", p, max_tokens=args.gen_tokens)
            for i, p in enumerate(data["c_generate"])
        ]
        run = {
            "a_joint": lambda: [(c.tokens[0] if c.tokens else "", _first(c.logprobs)) for c in client.generate(joint)],
            "b_separate": lambda: [c.logprob for c in client.score(separate)],
            "c_generate": lambda: [list(c.tokens) for c in client.generate(gen)],
        }
    result = {"side": args.side, "device": str(device), "passes": {}, "outputs": {}}
    for label in ("first", "warm"):
        for kind in KINDS:
            if passes is not None:
                passes.clear()
            gc.collect()
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            walls = []
            for _ in range(1 if label == "first" else args.repeats):  # a shared machine's noise: the best of n
                if passes is not None:
                    passes.clear()
                started = time.perf_counter()
                out = run[kind]()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                ended = time.perf_counter()
                walls.append(ended - started)
            entry = {"wall_s": round(min(walls), 3), "requests": len(data[kind])}
            if len(walls) > 1:
                entry["wall_s_median"] = round(statistics.median(walls), 3)
                entry["repeats"] = len(walls)
            entry["requests_per_s"] = round(entry["requests"] / entry["wall_s"], 1)
            if device.type == "cuda":
                entry["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
                entry["gpu_utilization_pct"] = util.mean(started, ended)
            if passes is not None:
                count = sum(passes.values())
                entry["forward_passes"] = count
                entry["rows_per_pass"] = round(sum(rows * n for rows, n in passes.items()) / max(count, 1), 1)
                entry["passes_per_request"] = round(count / entry["requests"], 3)
            result["passes"].setdefault(label, {})[kind] = entry
            result["outputs"][kind] = out
            print(f"[{args.side}] {label} {kind}: {entry}", file=sys.stderr, flush=True)
    if passes is not None:
        result["limits"] = vars(client.limits.current)
        result["describe"] = client.describe()
    util.stop()
    Path(args.result).write_text(json.dumps(result, default=str))


def _first(values):
    return values[0] if values else None


# --- the floor: plain transformers + torch -------------------------------------------------------------------------
def _chunks(order: list[int], n: int) -> list[list[int]]:
    return [order[i : i + n] for i in range(0, len(order), n)]


def floor_joint(model, tok, device, prompts, batch):
    """The most likely next token of each prompt: left-padded batches, the head on the last position only."""
    import torch

    enc = tok(prompts, add_special_tokens=False)["input_ids"]
    out = [None] * len(prompts)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.inference_mode():
        for chunk in _chunks(sorted(range(len(prompts)), key=lambda i: len(enc[i])), batch):
            width = max(len(enc[i]) for i in chunk)
            ids = torch.tensor([[pad] * (width - len(enc[i])) + enc[i] for i in chunk], device=device)
            mask = torch.tensor([[0] * (width - len(enc[i])) + [1] * len(enc[i]) for i in chunk], device=device)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(1) - 1).clamp(min=0),
                           logits_to_keep=1).logits[:, -1]  # fmt: skip
            best_lp, best = logits.float().log_softmax(-1).max(-1)
            for i, t, lp in zip(chunk, best.tolist(), best_lp.tolist()):
                out[i] = (tok.decode([t]), lp)
    return out


def floor_separate(model, tok, device, pairs, batch):
    """Each continuation's log-likelihood: prompt + continuation as one right-padded row, one forward per batch."""
    import torch

    encoded = []
    for prompt, cont in pairs:
        stripped = prompt.rstrip()
        ctx = tok(stripped, add_special_tokens=False)["input_ids"]
        encoded.append((ctx, tok(prompt[len(stripped) :] + cont, add_special_tokens=False)["input_ids"]))
    out = [0.0] * len(pairs)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.inference_mode():
        for chunk in _chunks(sorted(range(len(pairs)), key=lambda i: sum(map(len, encoded[i]))), batch):
            seqs = [encoded[i][0] + encoded[i][1] for i in chunk]
            width = max(map(len, seqs))
            ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs], device=device)
            mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=device)
            logits = model(input_ids=ids, attention_mask=mask).logits
            at = [(r, len(encoded[i][0]) + k - 1, t) for r, i in enumerate(chunk) for k, t in enumerate(encoded[i][1])]
            rows, cols, targets = (torch.tensor(x, device=device) for x in zip(*at))
            picked = logits[rows, cols].float().log_softmax(-1).gather(1, targets[:, None])[:, 0].tolist()
            at = 0
            for i in chunk:
                n = len(encoded[i][1])
                out[i] = sum(picked[at : at + n])
                at += n
    return out


def floor_generate(model, tok, device, prompts, batch, new_tokens):
    """Greedy generation with `model.generate`, up to new_tokens tokens per prompt (its tokens before the first
    end-of-sequence token)."""
    import torch

    tok.padding_side = "left"
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos]) | {tok.eos_token_id}
    lengths = [len(x) for x in tok(prompts, add_special_tokens=False)["input_ids"]]
    out = [None] * len(prompts)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.inference_mode():
        for chunk in _chunks(sorted(range(len(prompts)), key=lambda i: lengths[i]), batch):
            texts = [prompts[i] for i in chunk]
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            seq = model.generate(**enc, max_new_tokens=new_tokens, do_sample=False, pad_token_id=pad,
                                 temperature=None, top_p=None, top_k=None)  # fmt: skip
            for i, row in zip(chunk, seq[:, enc["input_ids"].shape[1] :].tolist()):
                ends = [k for k, t in enumerate(row) if t in eos]
                out[i] = [tok.decode([t]) for t in row[: ends[0] if ends else len(row)]]
    return out


# --- the comparison ------------------------------------------------------------------------------------------------
def agreement(ours: dict, floor: dict) -> dict:
    a = [x[0] == y[0] for x, y in zip(ours["a_joint"], floor["a_joint"])]
    diffs = sorted(abs(x - y) for x, y in zip(ours["b_separate"], floor["b_separate"]))
    best = lambda v: [max(range(4), key=lambda k: v[q * 4 + k]) for q in range(len(v) // 4)]  # noqa: E731
    same_best = sum(x == y for x, y in zip(best(ours["b_separate"]), best(floor["b_separate"])))
    same_gen = sum(x == y for x, y in zip(ours["c_generate"], floor["c_generate"]))
    return {
        "a_joint_same_top_token": f"{sum(a)}/{len(a)}",
        "b_separate_loglik_abs_diff": {"median": statistics.median(diffs), "max": diffs[-1]},
        "b_separate_same_best_choice": f"{same_best}/{len(ours['b_separate']) // 4}",
        "c_generate_identical": f"{same_gen}/{len(ours['c_generate'])}",
    }


def markdown(report: dict) -> str:
    sides = report["sides"]
    lines = [
        f"# Ours against the plain floor: {report['model']} on {report['device']}",
        "",
        f"{report['questions']} MMLU questions ({report['requests']['b_separate']} continuations), "
        f"{report['requests']['c_generate']} generations of {report['gen_tokens']} tokens; the floor at batch "
        f"{report['floor_batch']}, ours at {report['batch_size']} and auto. Each side in a fresh process; "
        f"a warm pass is the fastest of {report.get('repeats', 1)}.",
        "",
        "| work | pass | floor s | ours s | ours / floor | ours auto s | auto / floor | ours passes (rows/pass) |"
        + (" GPU util floor / ours % | peak GiB floor / ours |" if report["device"] == "cuda" else ""),
        "|---|---|---:|---:|---:|---:|---:|---|" + ("---|---|" if report["device"] == "cuda" else ""),
    ]
    for label in ("first", "warm"):
        for kind in KINDS:
            f, o, a = (sides[s]["passes"][label][kind] for s in ("floor", "ours", "ours-auto"))
            row = (
                f"| {kind} | {label} | {f['wall_s']:.2f} | {o['wall_s']:.2f} | **{o['wall_s'] / f['wall_s']:.2f}** | "
                f"{a['wall_s']:.2f} | {a['wall_s'] / f['wall_s']:.2f} | {o['forward_passes']} ({o['rows_per_pass']}) |"
            )
            if report["device"] == "cuda":
                row += (
                    f" {f.get('gpu_utilization_pct')} / {o.get('gpu_utilization_pct')} |"
                    f" {f.get('peak_memory_gib')} / {o.get('peak_memory_gib')} |"
                )
            lines.append(row)
    lines += ["", "Same work: " + json.dumps(report["agreement"]), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="cuda when present, else cpu")
    parser.add_argument("--model", default=None, help="qwen1.5b (GPU default), smollm2 (CPU default), tiny, or a DIR")
    parser.add_argument("--questions", type=int, default=None, help="MMLU questions (GPU default 639, CPU 100)")
    parser.add_argument("--generations", type=int, default=None, help="generation prompts (GPU 256, CPU 16)")
    parser.add_argument("--gen-tokens", type=int, default=None, help="tokens per generation (GPU 64, CPU 32)")
    parser.add_argument("--batch-size", type=int, default=None, help="ours (GPU 64, CPU 16)")
    parser.add_argument("--floor-batch", type=int, default=None, help="the floor's rows per batch (as --batch-size)")
    parser.add_argument("--data", default=None, help="a folder written by --prepare (default: ../shared/data)")
    parser.add_argument("--out", default=None, help="where gpu.json and gpu.md go (default: bench/results)")
    parser.add_argument("--name", default=None, help="the results' file name (default: gpu, or gpu-<device>)")
    parser.add_argument("--prepare", default=None, help="write the tokenizer and MMLU files into this folder; stop")
    parser.add_argument("--repeats", type=int, default=1, help="warm passes per kind of work; the fastest is reported")
    parser.add_argument("--side", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--path", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workload", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    shared_mmlu = HERE.parent.parent / "shared" / "data" / "mmlu"
    if args.prepare:
        return prepare(Path(args.prepare), shared_mmlu)
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = args.device == "cuda"
    args.model = args.model or ("qwen1.5b" if gpu else "smollm2")
    args.questions = args.questions or (639 if gpu else 100)
    args.generations = args.generations or (256 if gpu else 16)
    args.gen_tokens = args.gen_tokens or (64 if gpu else 32)
    args.batch_size = args.batch_size or (64 if gpu else 16)
    args.floor_batch = args.floor_batch or args.batch_size
    if args.side:
        return side(args)

    work = Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    mmlu = Path(args.data) / "mmlu" if args.data else shared_mmlu
    data = workload(mmlu, args.questions, args.generations)
    (work / "workload.json").write_text(json.dumps(data))
    path = model_dir(args, work)
    common = [
        "--device", args.device, "--path", str(path), "--workload", str(work / "workload.json"),
        "--batch-size", str(args.batch_size), "--floor-batch", str(args.floor_batch), "--gen-tokens",
        str(args.gen_tokens), "--questions", str(args.questions), "--generations", str(args.generations),
        "--repeats", str(args.repeats),
    ]  # fmt: skip
    sides = {}
    for name in ("floor", "ours", "ours-auto"):
        result = work / f"{name}.json"
        subprocess.run([sys.executable, __file__, "--side", name, "--result", str(result), *common], check=True)
        sides[name] = json.loads(result.read_text())
    report = {
        "model": args.model,
        "device": args.device,
        "questions": args.questions,
        "requests": {k: len(v) for k, v in data.items()},
        "gen_tokens": args.gen_tokens,
        "batch_size": args.batch_size,
        "floor_batch": args.floor_batch,
        "repeats": args.repeats,
        "agreement": agreement(sides["ours"]["outputs"], sides["floor"]["outputs"]),
        "sides": {k: {kk: vv for kk, vv in v.items() if kk != "outputs"} for k, v in sides.items()},
        "environment": environment(args.device),
    }
    out = Path(args.out) if args.out else HERE / "results"
    out.mkdir(parents=True, exist_ok=True)
    stem = args.name or ("gpu" if args.out else f"gpu-{args.device}")
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
    (out / f"{stem}.md").write_text(markdown(report))
    print(markdown(report))


def environment(device: str) -> dict:
    import platform

    import torch
    import transformers

    env = {
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "transformers": transformers.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


if __name__ == "__main__":
    main()
