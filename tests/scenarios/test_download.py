"""Downloading upstream data when no local copy is configured, from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import functools
import http.server
import io
import shutil
import tarfile
import threading

import pytest

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.errors import DataUnavailableError
from holistic_dagster.scenarios import load_instances
from holistic_dagster.settings import REPO_ROOT
from tests.helpers import edit_file


@pytest.fixture
def upstream(tmp_path, shared_data):
    """Serves an MMLU-shaped archive (data/dev, data/test) built from the real files, and the IMDB contrast sets
    as single files (contrast/), counting requests."""
    served = tmp_path / "served"
    served.mkdir()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for split in ("dev", "test"):
            tar.add(shared_data / "mmlu" / split / f"anatomy_{split}.csv", arcname=f"data/{split}/anatomy_{split}.csv")
    (served / "data.tar").write_bytes(buffer.getvalue())
    shutil.copytree(shared_data / "imdb" / "contrast_sets", served / "contrast")
    hits = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()


@pytest.fixture
def scratch_catalog(tmp_path, upstream):
    url, _ = upstream
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    edit_file(
        tmp_path / "assets" / "scenarios" / "mmlu.yaml",
        "https://people.eecs.berkeley.edu/~hendrycks/data.tar",
        f"{url}/data.tar",
    )
    return Catalog(tmp_path / "assets")


def test_downloads_once_into_the_cache_then_reads_it_offline(scratch_catalog, upstream, tmp_path, monkeypatch):
    _, hits = upstream
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOLISTIC_DATA_DIR", "")
    monkeypatch.delenv("HOLISTIC_OFFLINE")
    spec = scratch_catalog.scenario("mmlu").model_copy(update={"subsets": ("anatomy",)})
    instances = load_instances(spec)
    assert sum(i.split == "test" for i in instances) == 135 and sum(i.split == "train" for i in instances) == 5
    assert instances[0].source.uri.startswith(str(tmp_path / "home" / "downloads" / "mmlu" / "data"))
    monkeypatch.setenv("HOLISTIC_OFFLINE", "1")
    assert load_instances(spec) == instances
    assert hits == ["/data.tar"]


def test_a_failed_download_says_what_failed_and_what_to_set(scratch_catalog, upstream, tmp_path, monkeypatch):
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOLISTIC_DATA_DIR", "")
    monkeypatch.delenv("HOLISTIC_OFFLINE")
    spec = scratch_catalog.scenario("mmlu")
    broken = spec.model_copy(
        update={
            "source": spec.source.model_copy(
                update={"download": spec.source.download.model_copy(update={"url": upstream[0] + "/missing.tar"})}
            )
        }
    )
    with pytest.raises(
        DataUnavailableError,
        match=r"download of http://127.0.0.1:\d+/missing.tar failed "
        r"\(HTTP Error 404.*set HOLISTIC_DATA_DIR",
    ):
        load_instances(broken)
    assert not (tmp_path / "home" / "downloads" / "mmlu").exists()


def test_one_file_per_split_and_the_contrast_set_aligned_with_it_are_downloaded(tmp_path, upstream, monkeypatch):
    url, hits = upstream
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    edit_file(
        tmp_path / "assets" / "scenarios" / "imdb_contrast_sets.yaml",
        "https://raw.githubusercontent.com/allenai/contrast-sets/main/IMDb/data/{file}",
        url + "/contrast/{file}",
    )
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOLISTIC_DATA_DIR", "")
    monkeypatch.delenv("HOLISTIC_OFFLINE")
    instances = load_instances(Catalog(tmp_path / "assets").scenario("imdb_contrast_sets"))
    assert sorted(hits) == ["/contrast/dev_original.tsv", "/contrast/test_contrast.tsv", "/contrast/test_original.tsv"]
    assert sum(i.perturbation == "contrast_set" for i in instances) == 488
