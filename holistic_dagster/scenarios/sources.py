"""Finding a scenario's upstream files: a configured local directory first, then a download cache."""

from __future__ import annotations

import http.client
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

from holistic_dagster import settings
from holistic_dagster.errors import DataUnavailableError
from holistic_dagster.records import sha256_file
from holistic_dagster.scenarios.spec import ScenarioSpec, read_splits, split_file

HUB = "hf://datasets/"


def source_dir(spec: ScenarioSpec, data_dirs: Sequence[Path] | None = None) -> Path:
    """The directory holding the scenario's upstream files (the layout its `splits` patterns name): in one of
    `data_dirs` (None: the environment's), else the download cache (downloaded first when downloads are on)."""
    assert spec.source is not None
    found, hint = _local_dir(spec, data_dirs)
    if found is not None:
        return found
    if spec.source.download is None:
        raise DataUnavailableError(f"scenario {spec.name!r}: no local copy of its data; {hint}")
    if not settings.allow_download():
        raise DataUnavailableError(f"scenario {spec.name!r}: no local copy and downloads are off; {hint}")
    cache = _cache(spec)
    try:
        _download(spec, cache)
    except OSError as e:
        raise DataUnavailableError(
            f"scenario {spec.name!r}: download of {spec.source.download.origin} failed ({e}); {hint}"
        ) from None
    return cache / spec.source.download.archive_dir


def missing_data(spec: ScenarioSpec, data_dirs: Sequence[Path] | None, download: bool) -> str | None:
    """Why the scenario's data cannot be read here, in one line without the scenario's name (None: it can, or it is
    generated). download: fetch it when there is no copy (as source_dir does); otherwise a copy must be here or in
    the download cache."""
    if spec.source is None:
        return None
    if download:
        try:
            source_dir(spec, data_dirs)
        except DataUnavailableError as e:
            return str(e).removeprefix(f"scenario {spec.name!r}: ")
        return None
    found, hint = _local_dir(spec, data_dirs)
    if found is not None:
        return None
    fetch = f"; downloaded from {spec.source.download.origin} when a network exists" if spec.source.download else ""
    return f"no local copy of its data{fetch}; {hint}"


def _local_dir(spec: ScenarioSpec, data_dirs: Sequence[Path] | None) -> tuple[Path | None, str]:
    """(the folder of a local copy or of a finished download, else None; where to put a copy, for the error)."""
    looked = []
    for root in settings.data_dirs() if data_dirs is None else data_dirs:
        candidate = root / spec.source.dir
        looked.append(str(candidate))
        if candidate.is_dir():
            return candidate, ""
    # a finished download of this source's own (a reading without a download of its own never reads one), in the
    # source folder's cache or where a release before 2026-12 kept it (by scenario name)
    for cache in (_cache(spec), settings.download_dir() / spec.name):
        if spec.source.download is not None and _finished(cache, spec.source.download.origin):
            return cache / spec.source.download.archive_dir, ""
    hint = f"set HOLISTIC_DATA_DIR to a folder that contains `{spec.source.dir}/` (or pass it as --data-dir)" + (
        f" (looked in {', '.join(looked)})" if looked else ""
    )
    if spec.data_note:
        hint += f". {spec.data_note}"
    return None, hint


def _cache(spec: ScenarioSpec) -> Path:
    """Where a source's download is kept: by its folder, so that two readings of the same upstream files
    (NaturalQuestions' closed and open book under HELM's conventions, both nq-dev) download them once."""
    return settings.download_dir() / spec.source.dir


def _finished(cache: Path, origin: str) -> bool:
    """A download into `cache` finished, from this origin (a scenario file's changed URL downloads anew)."""
    marker = cache / ".complete"
    return marker.exists() and marker.read_text() == origin


def _download(spec: ScenarioSpec, cache: Path) -> None:
    download = spec.source.download
    cache.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache) + ".lock"):
        if _finished(cache, download.origin):
            return
        with tempfile.TemporaryDirectory(dir=cache.parent) as tmp:
            tmp_path = Path(tmp)
            target = tmp_path / "content"
            target.mkdir()
            _fetch_main(spec, target, tmp_path)
            for relative, url in download.files.items():
                dest = _within(target, target / download.archive_dir / relative)
                dest.parent.mkdir(parents=True, exist_ok=True)
                _fetch(url, dest)
            (target / ".complete").write_text(download.origin)
            if cache.exists():
                shutil.rmtree(cache)
            shutil.move(str(target), cache)


def _fetch_main(spec: ScenarioSpec, target: Path, tmp_path: Path) -> None:
    """The download's url into target: a Hugging Face repository's files, a file per subset and split, an archive
    unpacked, or a single file."""
    download = spec.source.download
    if not download.url:
        return  # the files alone
    if download.url.startswith(HUB):  # a Hugging Face dataset repository's files
        _fetch_hub(download.url, [p.format(subset=s) for p in download.patterns for s in spec.subsets], target)
    elif any(f"{{{key}}}" in download.url for key in ("subset", "split", "file")):
        # one upstream file per subset and split (BBQ, BOLD, HellaSwag, NQ-open): each goes where its
        # pattern says ({file}: the file name the pattern gives)
        for subset in spec.subsets:
            # the splits' files, and the contrast sets aligned with them
            for split, pattern in [*read_splits(spec).items(), *spec.contrast.items()]:
                url = download.url.format(
                    subset=subset,
                    split={"test": "val"}.get(split, split),
                    file=split_file(pattern, subset).rsplit("/", 1)[-1],
                )
                dest = _within(target, target / download.archive_dir / split_file(pattern, subset))
                dest.parent.mkdir(parents=True, exist_ok=True)
                _fetch(url, dest)
    else:
        name = download.url.rsplit("/", 1)[-1] or "download"
        archive = tmp_path / name
        _fetch(download.url, archive)
        if download.sha256 and sha256_file(archive) != download.sha256:
            raise OSError(f"checksum mismatch for {download.url}")
        if tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tar:
                tar.extractall(target, filter="data")  # refuses members and links that leave target
        elif zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    _within(target, target / member)
                z.extractall(target)
        elif name.endswith(_ARCHIVES):
            raise OSError(f"{download.url} is no {name.rsplit('.', 1)[-1]} archive: not the data")
        else:  # a single data file: place it where the split pattern expects it
            dest = _within(target, target / download.archive_dir / name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(archive), dest)


def _fetch_hub(url: str, patterns: list[str], dest: Path) -> None:
    """hf://datasets/<repository>@<revision>: the repository's files that match the patterns, as the Hub lays them
    out (huggingface_hub's snapshot_download)."""
    from huggingface_hub import snapshot_download

    repository, _, revision = url.removeprefix(HUB).partition("@")
    try:
        snapshot_download(
            repository, repo_type="dataset", revision=revision or None, allow_patterns=patterns or None, local_dir=dest
        )
    except Exception as e:  # the Hub client's own errors (no network, unknown repository) are not OSErrors
        raise OSError(" ".join(f"{type(e).__name__}: {e}".split())) from e  # one line


_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
_HTML = (b"<!doctype html", b"<html", b"<head", b"<?xml version")


def _within(folder: Path, path: Path) -> Path:
    """path, refused (OSError) unless it resolves inside folder (a scenario file's key, an archive's member)."""
    if not path.resolve().is_relative_to(folder.resolve()):
        raise OSError(f"{path.relative_to(folder) if path.is_relative_to(folder) else path} would be written outside "
                      "the download folder: refused")  # fmt: skip
    return path


def _read(response, url: str, received: int, announced: str | None) -> bytes:
    try:
        return response.read(1 << 20)
    except http.client.IncompleteRead as e:  # the connection closed before the announced length
        raise OSError(f"{url} was cut off: {received + len(e.partial)} of {announced} bytes arrived") from None


def _fetch(url: str, dest: Path) -> None:
    """url into dest, refused (OSError, nothing kept) when the server sent an HTML page for a data file, fewer bytes
    than it announced, a gzip file that is none, or more than the size limit (HOLISTIC_MAX_DOWNLOAD_MB)."""
    limit = settings.max_download_bytes()
    with urllib.request.urlopen(url, timeout=60) as response, dest.open("wb") as out:
        announced = response.headers.get("Content-Length")
        if announced and announced.isdigit() and int(announced) > limit:
            raise OSError(
                f"{url} is {int(announced) / 2**20:.0f} MB, over the {limit / 2**20:.0f} MB limit "
                "(HOLISTIC_MAX_DOWNLOAD_MB)"
            )
        kind = response.headers.get("Content-Type", "")
        received = 0
        while chunk := _read(response, url, received, announced):
            if received == 0 and not url.lower().endswith((".html", ".htm")):
                if "text/html" in kind or chunk.lstrip()[:14].lower().startswith(_HTML):
                    raise OSError(f"{url} sent an HTML page, not the data (a login or error page?)")
                if url.lower().endswith(".gz") and not chunk.startswith(b"\x1f\x8b"):
                    raise OSError(f"{url} is no gzip file: not the data")
            received += len(chunk)
            if received > limit:
                raise OSError(f"{url} is over the {limit / 2**20:.0f} MB limit (HOLISTIC_MAX_DOWNLOAD_MB)")
            out.write(chunk)
    if announced and announced.isdigit() and received != int(announced):
        raise OSError(f"{url} was cut off: {received} of {announced} bytes arrived")
