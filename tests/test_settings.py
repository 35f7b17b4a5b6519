"""Where the data folders come from in a new shell: HOLISTIC_DATA_DIR where it is set (empty: none); else the
folders remembered in <home>/settings.toml, then ../shared/data beside the checkout; a settings file we cannot
read is an error naming it."""

from __future__ import annotations

import pytest

from holistic_dagster import settings
from holistic_dagster.errors import CatalogError


@pytest.fixture
def new_shell(tmp_path, monkeypatch):
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HOLISTIC_DATA_DIR", raising=False)
    sibling = tmp_path / "shared" / "data"
    sibling.mkdir(parents=True)
    monkeypatch.setattr(settings, "SIBLING_DATA", sibling)
    return tmp_path


def test_remembered_folders_come_first_then_the_sibling_and_the_variable_wins(new_shell, monkeypatch):
    sibling = new_shell / "shared" / "data"
    assert settings.data_dirs() == [sibling]  # nothing remembered yet
    mine, gone = new_shell / "my data", new_shell / "gone"
    mine.mkdir()
    assert settings.remember_data_dirs([mine, gone]) is True
    assert settings.remember_data_dirs([mine, gone]) is False  # unchanged: not written again
    assert settings.data_dirs() == [mine, sibling]  # a remembered folder that no longer exists is left out
    assert settings.remembered_data_dirs() == [mine, gone]

    monkeypatch.setenv("HOLISTIC_DATA_DIR", str(gone))
    assert settings.data_dirs() == [gone]
    monkeypatch.setenv("HOLISTIC_DATA_DIR", "")  # set but empty: no data folder at all
    assert settings.data_dirs() == []


def test_a_settings_file_we_cannot_read_names_itself(new_shell):
    path = settings.settings_file()
    path.parent.mkdir(parents=True)
    path.write_text("data_dirs = [unquoted]\n")
    with pytest.raises(CatalogError, match=r"settings.toml: not a settings file we can read"):
        settings.data_dirs()
    path.write_text('data_dirs = "one/folder"\n')
    with pytest.raises(CatalogError, match=r"settings.toml: data_dirs must be a list of folder paths"):
        settings.data_dirs()


def test_the_model_cache_is_the_home_unless_set_and_a_demo_model_is_built_there(new_shell, monkeypatch):
    """HOLISTIC_MODEL_CACHE moves the weights made here (demo models, converted GGUF files, the ladder) out of the
    home; unset, they stay in it, where earlier releases put them."""
    from holistic_dagster.clients.checkpoints import checkpoint_files, ladder_file, local_checkpoint
    from holistic_dagster.config.deployment import Deployment
    from holistic_dagster.config.models import ModelSpec

    monkeypatch.delenv("HOLISTIC_MODEL_CACHE", raising=False)
    assert settings.model_cache_dir() == settings.home_dir() == Deployment().model_cache
    cache = new_shell / "shared cache"
    monkeypatch.setenv("HOLISTIC_MODEL_CACHE", str(cache))
    assert settings.model_cache_dir() == Deployment().model_cache == cache
    spec = ModelSpec(name="floor", backend="transformers", path="demo:gpt2-untrained")
    built = local_checkpoint(spec, settings.model_cache_dir())
    assert built.startswith(str(cache / "demo_models")) and not (settings.home_dir() / "demo_models").exists()
    assert checkpoint_files(spec, settings.model_cache_dir()) and all(
        f.startswith(built) for f in checkpoint_files(spec, settings.model_cache_dir())
    )
    assert ladder_file("gemma-3-270m", settings.model_cache_dir()) == cache / "ladder" / "gemma-3-270m.gguf"
