"""Downloading upstream data when no local copy is configured, from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import functools
import http.server
import io
import shutil
import tarfile
import threading
import zipfile

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


def go_online(tmp_path, monkeypatch) -> None:
    """No data dir, a home of the test's own, downloads allowed: where a scenario's data comes from its download."""
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOLISTIC_DATA_DIR", "")
    monkeypatch.delenv("HOLISTIC_OFFLINE")


def fetched_from(spec, url: str):
    """The scenario with its download's url replaced."""
    download = spec.source.download.model_copy(update={"url": url})
    return spec.model_copy(update={"source": spec.source.model_copy(update={"download": download})})


def test_downloads_once_into_the_cache_then_reads_it_offline(scratch_catalog, upstream, tmp_path, monkeypatch):
    _, hits = upstream
    go_online(tmp_path, monkeypatch)
    spec = scratch_catalog.scenario("mmlu").model_copy(update={"subsets": ("anatomy",)})
    instances = load_instances(spec)
    assert sum(i.split == "test" for i in instances) == 135 and sum(i.split == "train" for i in instances) == 5
    assert instances[0].source.uri.startswith(str(tmp_path / "home" / "downloads" / "mmlu" / "data"))
    monkeypatch.setenv("HOLISTIC_OFFLINE", "1")
    assert load_instances(spec) == instances
    assert hits == ["/data.tar"]


def test_readings_of_one_source_folder_share_its_download(scratch_catalog, upstream, tmp_path, monkeypatch):
    # the cache is the source folder's (NaturalQuestions' closed and open book read the same nq-dev files under
    # HELM's conventions): a second scenario naming the same folder and origin reads the first one's download
    _, hits = upstream
    go_online(tmp_path, monkeypatch)
    spec = scratch_catalog.scenario("mmlu").model_copy(update={"subsets": ("anatomy",)})
    twin = spec.model_copy(update={"name": "mmlu_twin"})
    assert load_instances(spec) and hits == ["/data.tar"]
    monkeypatch.setenv("HOLISTIC_OFFLINE", "1")
    assert len(load_instances(twin)) == 140 and hits == ["/data.tar"]
    assert not (tmp_path / "home" / "downloads" / "mmlu_twin").exists()


def test_a_download_kept_by_scenario_name_by_an_earlier_release_is_still_read(
    scratch_catalog, upstream, tmp_path, monkeypatch
):
    _, hits = upstream
    go_online(tmp_path, monkeypatch)
    spec = scratch_catalog.scenario("mmlu").model_copy(update={"subsets": ("anatomy",)})
    renamed = spec.model_copy(update={"source": spec.source.model_copy(update={"dir": "mmlu_elsewhere"})})
    assert len(load_instances(spec)) == 140  # into downloads/mmlu: the folder the scenario's name also gives
    monkeypatch.setenv("HOLISTIC_OFFLINE", "1")
    instances = load_instances(renamed)  # its own folder's cache is empty: the scenario name's is read
    assert len(instances) == 140 and hits == ["/data.tar"]
    assert instances[0].source.uri.startswith(str(tmp_path / "home" / "downloads" / "mmlu" / "data"))


def test_a_finished_download_is_read_only_by_the_source_it_came_from(scratch_catalog, upstream, tmp_path, monkeypatch):
    # a finished download is read only by a source that names the same origin (NarrativeQA's derived copy, without
    # a download, shares its scenario name with its HELM layout, the name an earlier release kept downloads by)
    _, hits = upstream
    go_online(tmp_path, monkeypatch)
    spec = scratch_catalog.scenario("mmlu").model_copy(update={"subsets": ("anatomy",)})
    assert len(load_instances(spec)) == 140 and hits == ["/data.tar"]
    monkeypatch.setenv("HOLISTIC_OFFLINE", "1")
    without = spec.model_copy(update={"source": spec.source.model_copy(update={"download": None})})
    with pytest.raises(DataUnavailableError, match="no local copy of its data"):
        load_instances(without)  # a source without a download of its own does not read the cache
    moved = fetched_from(spec, upstream[0] + "/data.tar?v=2")
    with pytest.raises(DataUnavailableError, match="no local copy and downloads are off"):
        load_instances(moved)  # another origin: not the files it names, and offline nothing is fetched
    monkeypatch.delenv("HOLISTIC_OFFLINE")
    assert len(load_instances(moved)) == 140 and hits == ["/data.tar", "/data.tar?v=2"]  # fetched anew


def test_a_failed_download_says_what_failed_and_what_to_set(scratch_catalog, upstream, tmp_path, monkeypatch):
    go_online(tmp_path, monkeypatch)
    spec = scratch_catalog.scenario("mmlu")
    broken = fetched_from(spec, upstream[0] + "/missing.tar")
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


def test_an_optional_scenario_is_downloaded_where_it_can_be_and_skipped_with_why_where_not(
    tmp_path, upstream, monkeypatch, shared_data
):
    """NaturalQuestions' five full files (a download of `files`) for a suite that lists the scenario as optional:
    skipped, saying where it would come from, until it is downloaded; then run, and read from the cache."""
    from holistic_dagster.config.deployment import Deployment
    from tests.scenarios.test_helm_loaders import write_nq_files

    url, hits = upstream
    served = tmp_path / "served"
    write_nq_files(served / "nq")
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    edit_file(
        tmp_path / "assets" / "scenarios" / "natural_qa_openbook_longans.yaml",
        "https://storage.googleapis.com/natural_questions/v1.0/dev",
        url + "/nq",
        count=5,
    )
    suite = "version: o1\nscenarios:\n  boolq: {max_eval_instances: 2}\n"
    suite += "  natural_qa_openbook_longans: {max_eval_instances: 2, optional: true}\n"
    (tmp_path / "assets" / "suites" / "o1.yaml").write_text(suite)
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    deployment = Deployment.of(catalog=tmp_path / "assets", data_dirs=[shared_data])
    runs, skipped = deployment.runnable("o1")
    assert runs == ["boolq"] and list(skipped) == ["natural_qa_openbook_longans"]
    assert (
        f"downloaded from {url}/nq/nq-dev-00.jsonl.gz and 4 more file(s) when a network exists"
        in skipped["natural_qa_openbook_longans"]
    )
    assert deployment.runnable("o1", download=True)[1]["natural_qa_openbook_longans"].startswith(
        "no local copy and downloads are off"
    )
    monkeypatch.delenv("HOLISTIC_OFFLINE")
    assert deployment.runnable("o1", download=True) == (["boolq", "natural_qa_openbook_longans"], {})
    assert sorted(hits) == [f"/nq/nq-dev-0{n}.jsonl.gz" for n in range(5)]
    monkeypatch.setenv("HOLISTIC_OFFLINE", "1")
    assert deployment.runnable("o1") == (["boolq", "natural_qa_openbook_longans"], {})  # from the cache
    spec = deployment.catalog().scenario("natural_qa_openbook_longans")
    assert len(load_instances(spec)) == 30  # HELM's 30 of the 45 records (tests/scenarios/fixtures)


def _mmlu_from(catalog: Catalog, url: str):
    spec = catalog.scenario("mmlu").model_copy(update={"subsets": ("anatomy",)})
    download = spec.source.download.model_copy(update={"url": url})
    return spec.model_copy(update={"source": spec.source.model_copy(update={"download": download})})


@pytest.fixture
def bad_upstream(tmp_path):
    """A server that answers with a login page, a body cut short of its Content-Length, a big file, a .gz that is
    none and a zip whose member leaves the folder it is unpacked into."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("../escaped.csv", "a,b\n")
    bodies = {
        "/login.tar": (b"<!DOCTYPE html><html><body>Please sign in</body></html>", "text/html", None),
        "/cut.tar": (b"x" * 100, "application/x-tar", 5000),
        "/big.csv": (b"q,a\n" * 400_000, "text/csv", None),
        "/fake.tar.gz": (b"PK this is no gzip", "application/gzip", None),
        "/escape.zip": (buffer.getvalue(), "application/zip", None),
    }

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body, kind, length = bodies[self.path]
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(length or len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/login.tar", "sent an HTML page, not the data"),
        ("/cut.tar", "was cut off: 100 of 5000 bytes arrived"),
        ("/big.csv", r"over the 1 MB limit \(HOLISTIC_MAX_DOWNLOAD_MB\)"),
        ("/fake.tar.gz", "is no gzip file"),
        ("/escape.zip", "would be written outside the download folder"),
    ],
)
def test_a_download_that_is_not_the_data_is_refused_and_never_marked_complete(
    bad_upstream, tmp_path, monkeypatch, path, error
):
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOLISTIC_DATA_DIR", "")
    monkeypatch.setenv("HOLISTIC_MAX_DOWNLOAD_MB", "1")
    monkeypatch.delenv("HOLISTIC_OFFLINE")
    with pytest.raises(DataUnavailableError, match=error):
        load_instances(_mmlu_from(Catalog(), bad_upstream + path))
    assert not (tmp_path / "home" / "downloads" / "mmlu").exists()
    assert not (tmp_path / "home" / "downloads" / "escaped.csv").exists()


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("archive_dir: data", "archive_dir: ../../etc", "archive_dir"),
        ("dir: mmlu", "dir: /etc", "dir"),
    ],
)
def test_a_scenario_file_whose_paths_leave_its_folder_is_refused_naming_the_file_and_key(tmp_path, old, new, key):
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    edit_file(tmp_path / "assets" / "scenarios" / "mmlu.yaml", old, new)
    with pytest.raises(Exception, match=rf"(?s)mmlu\.yaml.*{key}.*leaves the scenario's folder"):
        Catalog(tmp_path / "assets").scenario("mmlu")


def test_a_files_key_that_leaves_the_folder_is_refused():
    from pydantic import ValidationError

    from holistic_dagster.scenarios.spec import DownloadSpec

    with pytest.raises(ValidationError, match=r"files key '\.\./\.\./\.bashrc': .* leaves the scenario's folder"):
        DownloadSpec(files={"../../.bashrc": "http://127.0.0.1/x"})
