"""Small demo models built offline, in seconds, with fixed seeds: no download, real transformers code path.

They are untrained or barely trained; their scores show that the pipeline works, not what a real model
can do. Two of them differ in quality so the leaderboard shows real differences:
- gpt2-untrained: a randomly initialised GPT-2-shaped model.
- llama-tuned: a Llama-shaped model trained for a few hundred steps on the train split of the generated
  synthetic_reasoning scenario (never on its test split), laid out as the generation template lays out
  few-shot examples, and on short templated biographies ("<name> is an American <profession>. She ...")
  so that its continuations of people-centred prompts (BOLD) contain words the bias metrics count.
Both share a byte-level BPE tokenizer trained on the same text, so any input can be tokenized.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from filelock import FileLock

from holistic_dagster.errors import CatalogError
from holistic_dagster.scenarios.synthetic import synthetic_reasoning

DEMO_MODELS = ("gpt2-untrained", "llama-tuned")
BUILD_VERSION = 3  # bump when the recipe changes, so cached builds are rebuilt
SEED = 1234
CONTEXT = 1024


def _training_text(seed: int) -> list[str]:
    """Few-shot-shaped blocks from the generator's train split (a different seed from the suite's test data)."""
    examples = [i for i in synthetic_reasoning(seed=seed, num_train=600, num_test=0) if i.split == "train"]
    return [f"{i.input}\nAnswer: {i.references[0].output}\n\n" for i in examples]


# a few words from the bias metrics' lists (bias_words.yaml), few enough for a tiny model to learn them
BIO_ADJECTIVES = ("kind", "honest", "brilliant", "ambitious", "patient", "creative", "modest", "generous", "curious",
                  "calm", "friendly", "loyal")  # fmt: skip
BIO_PROFESSIONS = ("teacher", "nurse", "doctor", "lawyer", "writer", "farmer", "scientist", "singer", "painter",
                   "architect", "banker", "chef")  # fmt: skip


def _biographies(seed: int, n: int = 240) -> list[str]:
    """Templated one-paragraph biographies: a first name with its gender, a surname, professions and
    adjectives, drawn uniformly (so the model learns no association between them on purpose)."""
    from holistic_dagster.wordlists import load

    rng = random.Random(seed)
    names, words = load("person_names"), load("bias_words")
    surnames = [s.capitalize() for group in words["groups"]["race"].values() for s in group]
    out = []
    for _ in range(n):
        gender = rng.choice(["female", "male"])
        first = rng.choice(names[rng.choice(list(names))][gender])
        he, his = ("She", "Her") if gender == "female" else ("He", "His")
        job, job2 = rng.sample(BIO_PROFESSIONS, 2)
        a, b = rng.sample(BIO_ADJECTIVES, 2)
        out.append(
            f"{first} {rng.choice(surnames)} is an American {job}. {his} family is {rng.choice(surnames)}. "
            f"{he} is {a} and {b}. {he} also works as a {job2}.\n\n"
        )
    return out


def _tokenizer(directory: Path, corpus: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    english = (
        "The following are multiple choice questions with answers about science, history, law, medicine "
        "and mathematics. Question: Answer: Passage: Is the Which of these is true? yes no A B C D Q: A: "
        "the number of people who in on for of and to with is was are were how many what where when"
    )
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus + [english] * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        # chat servers (e.g. `transformers serve`) need a template: the user's message, as is
        chat_template="{% for message in messages %}{{ message['content'] }}{% endfor %}",
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=CONTEXT,
    )
    fast.save_pretrained(directory)
    return fast


def _build(name: str, directory: Path) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    corpus = _training_text(SEED) + _biographies(SEED)
    tok = _tokenizer(directory, corpus)
    if name == "gpt2-untrained":
        config = GPT2Config(
            vocab_size=len(tok),
            n_positions=CONTEXT,
            n_embd=64,
            n_layer=2,
            n_head=2,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
        )
        model = GPT2LMHeadModel(config)
        recipe = {"trained": False}
    else:
        config = LlamaConfig(
            vocab_size=len(tok),
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=CONTEXT,
            tie_word_embeddings=True,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        model = LlamaForCausalLM(config)
        recipe = _train(model, tok, corpus)
    model.save_pretrained(directory)
    (directory / "demo_model.json").write_text(
        json.dumps(
            {
                "name": name,
                "build_version": BUILD_VERSION,
                "seed": SEED,
                "note": "demo model: untrained or barely trained, not a real language model",
                **recipe,
            },
            indent=2,
        )
    )


def _train(model, tok, corpus: list[str], steps: int = 300, batch: int = 16, blocks_per_seq: int = 4) -> dict:
    import torch

    rng = random.Random(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    model.train()
    started = time.perf_counter()
    loss_value = float("nan")
    for _ in range(steps):
        texts = ["Apply the rules.\n\n" + "".join(rng.sample(corpus, blocks_per_seq)) for _ in range(batch)]
        enc = tok(texts, return_tensors="pt", padding=True)
        labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
        loss = model(**enc, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        loss_value = float(loss.detach())
    model.eval()
    return {
        "trained": True,
        "steps": steps,
        "batch": batch,
        "final_loss": round(loss_value, 4),
        "train_seconds": round(time.perf_counter() - started, 1),
        "training_data": "synthetic_reasoning train split (generator seed 1234) and 240 templated biographies",
    }


def demo_model_dir(name: str, root: Path) -> Path:
    """Where the demo model `name` of this recipe is built under root (built or not)."""
    return root / f"{name}-v{BUILD_VERSION}"


def ensure_demo_model(name: str, root: Path) -> Path:
    """The built model's directory, building it once (safe across concurrent processes)."""
    if name not in DEMO_MODELS:
        raise CatalogError(f"unknown demo model {name!r} (known: {', '.join(DEMO_MODELS)})")
    directory = demo_model_dir(name, root)
    if (directory / "demo_model.json").exists():
        return directory
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory) + ".lock"):
        if not (directory / "demo_model.json").exists():
            print(f"building demo model {name} (first use only; about 30 s) ...", file=sys.stderr, flush=True)
            tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}-"))
            try:
                _build(name, tmp)
                tmp.rename(directory)  # atomic: a half-built model is never visible
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return directory
