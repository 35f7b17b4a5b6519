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
