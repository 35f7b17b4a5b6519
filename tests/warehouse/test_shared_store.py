"""The shared results store: many writer processes at once, never a half-visible partition, the same results
and SQL as the DuckDB file."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pandas as pd
import pytest

from holistic_dagster.errors import HolisticError
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.warehouse import TABLES, ReadOnlyError, Warehouse, WarehouseWriteError, open_warehouse, shared
from holistic_dagster.warehouse.shared import SharedStore
from tests.helpers import filesystem_of_its_own, fill_up, kill_when, remount_read_only

if TYPE_CHECKING:
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.stages import StageContext

# the writer processes import this module: the stages and Dagster (a second of start-up each) only where used

MODEL = "demo-gpt2-untrained"


def _files(version: str, n: int, revision: str = "r") -> pd.DataFrame:
    rows = [{"version": version, "scenario": "s", "uri": f"f{i}", "sha256": "x", "revision": revision, "num_bytes": i}
            for i in range(n)]  # fmt: skip
    return pd.DataFrame(rows)


def _completions(model: str, scenario: str, generation: int, n: int) -> pd.DataFrame:
    """n completion rows of one slot, every one saying which generation wrote it."""
    return pd.DataFrame(
        {
            "model": model, "version": "v1", "scenario": scenario, "request_id": [f"r{i}" for i in range(n)],
            "text": f"gen{generation}", "tokens": "[]", "logprobs": "[]", "logprob": 0.0, "num_prompt_tokens": 1,
            "num_completion_tokens": 1, "latency_s": 0.0, "finish_reason": "stop", "error": "", "provenance_id": "p",
        }
    )  # fmt: skip


def _cache_rows(model_key: str, request_ids: list[str], text: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model_key": model_key, "request_id": request_ids, "sample_index": 0, "text": text, "tokens": "[]",
            "logprobs": "[]", "logprob": 0.0, "num_prompt_tokens": 1, "num_completion_tokens": 1, "latency_s": 0.0,
            "finish_reason": "stop", "provenance_id": "p", "created_at": pd.Timestamp("2026-01-01"),
        }
    )  # fmt: skip


def _visible_files(store: SharedStore) -> list[str]:
    return sorted(str(p.relative_to(store.path)) for p in store.path.rglob("*.parquet"))


# -- the same results as the DuckDB file


@pytest.fixture
def small_catalog(tmp_path) -> Catalog:
    from holistic_dagster.config.catalog import Catalog
    from tests.conftest import SMALL_SUITE, write

    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    write(tmp_path / "assets" / "suites" / "s1.yaml", SMALL_SUITE)
    return Catalog(tmp_path / "assets")


def _evaluate(warehouse, catalog: Catalog, client) -> StageContext:
    from holistic_dagster.stages import StageContext
    from holistic_dagster.stages.completions import run_completions
    from holistic_dagster.stages.dataset import build_dataset
    from holistic_dagster.stages.prompts import build_prompts
    from holistic_dagster.stages.scores import compute_scores

    stage = StageContext(warehouse, catalog, clients=lambda spec: client)
    build_dataset(stage, "s1", "boolq")
    build_prompts(stage, "s1", "boolq", MODEL)
    run_completions(stage, "s1", "boolq", MODEL)
    compute_scores(stage, "s1", "boolq", MODEL)
    return stage


# measured, not computed: they differ between any two runs
TIMED_COLUMNS = {"latency_s", "created_at"}


def _contents(warehouse, table: str) -> pd.DataFrame:
    columns = [c for c in warehouse.df(f"SELECT * FROM {table} LIMIT 0").columns if c not in TIMED_COLUMNS]
    where = "WHERE family <> 'efficiency'" if table in ("instance_scores", "scenario_metrics") else ""
    listed = ", ".join(f'"{c}"' for c in columns)
    return warehouse.df(f"SELECT {listed} FROM {table} {where} ORDER BY ALL")


@pytest.mark.slow  # the real stages on a demo model: the full suite's, not the fast tier's
def test_the_stages_write_the_same_results_as_into_the_duckdb_file(tmp_path, small_catalog, untrained_client):
    from holistic_dagster.stages.completions import run_completions

    duck = _evaluate(Warehouse(tmp_path / "w.duckdb"), small_catalog, untrained_client).warehouse
    stage = _evaluate(SharedStore(tmp_path / "store"), small_catalog, untrained_client)
    store = stage.warehouse
    for table in TABLES:
        ours, theirs = _contents(store, table), _contents(duck, table)
        assert list(ours.columns) == list(theirs.columns), table
        assert ours.dtypes.to_dict() == theirs.dtypes.to_dict(), table
        pd.testing.assert_frame_equal(ours, theirs, obj=table)
    assert store.df("SELECT count(*) AS n FROM instance_scores")["n"].iat[0] > 0
    for view in ("scores", "leaderboard", "lineage"):
        pd.testing.assert_frame_equal(
            store.df(f"SELECT count(*) AS n FROM {view}"), duck.df(f"SELECT count(*) AS n FROM {view}"), obj=view
        )
    assert store.df("SELECT count(*) AS n FROM lineage")["n"].iat[0] > 0
    # the completion cache the background writer filled is read back: a second run sends nothing
    again = run_completions(stage, "s1", "boolq", MODEL)
    assert again["num_sent"] == 0 and again["num_from_cache"] > 0


# -- replace and upsert


def test_replace_swaps_one_slot_and_leaves_the_others(tmp_path):
    store = SharedStore(tmp_path / "store")
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
    store.replace({"version": "v2", "scenario": "s"}, {"source_files": _files("v2", 2)})
    store.replace({"version": "v1", "scenario": "s", "model": "ignored"}, {"source_files": _files("v1", 1, "new")})
    counts = store.df("SELECT version, revision, count(*) AS n FROM source_files GROUP BY ALL ORDER BY version")
    assert counts.to_dict("records") == [
        {"version": "v1", "revision": "new", "n": 1},
        {"version": "v2", "revision": "r", "n": 2},
    ]
    store.replace({"version": "v2", "scenario": "s"}, {"source_files": _files("v2", 0)})  # an empty partition
    assert store.df("SELECT DISTINCT version FROM source_files")["version"].tolist() == ["v1"]


@pytest.mark.parametrize(
    "bad, error",
    [
        (pd.concat([_files("v1", 2), _files("v1", 1)]), "(?i)duplicate key"),
        (_files("v1", 2).assign(sha256=None), "NOT NULL"),
        (_files("v2", 2), "do not carry the keys"),  # rows of another slot
    ],
)
def test_an_invalid_frame_changes_nothing(tmp_path, bad, error):
    store = SharedStore(tmp_path / "store")
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
    before = _visible_files(store)
    with pytest.raises(Exception, match=error):
        # the valid frame of the other table is not written either
        store.replace({"version": "v1", "scenario": "s"}, {"applicability": _applies(), "source_files": bad})
    assert store.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 3
    assert store.df("SELECT count(*) AS n FROM applicability")["n"].iat[0] == 0
    assert _visible_files(store) == before
    assert not list(store.path.rglob("*.tmp"))  # the temporary files are removed


def _applies() -> pd.DataFrame:
    return pd.DataFrame([{"version": "v1", "scenario": "s", "family": "accuracy", "applies": True, "detail": ""}])


def test_upsert_keeps_the_latest_row_per_key(tmp_path):
    store = SharedStore(tmp_path / "store")
    store.upsert("completion_cache", _cache_rows("m", ["a", "b"], "first"))
    store.upsert("completion_cache", _cache_rows("m", ["b", "c"], "second"))
    store.upsert("completion_cache", _cache_rows("m", [], "nothing"))  # no rows: no file
    rows = store.df("SELECT request_id, text FROM completion_cache ORDER BY request_id")
    assert rows.values.tolist() == [["a", "first"], ["b", "second"], ["c", "second"]]
    assert len(list((store.path / "completion_cache").glob("u-*.parquet"))) == 2
    with pytest.raises(duckdb.ConstraintException, match="NOT NULL"):
        store.upsert("completion_cache", _cache_rows("m", ["d"], "x").assign(text=None))
    assert store.df("SELECT count(*) AS n FROM completion_cache")["n"].iat[0] == 3


def test_open_warehouse_tells_a_file_from_a_store(tmp_path):
    assert isinstance(open_warehouse(tmp_path / "w.duckdb"), Warehouse)
    assert isinstance(open_warehouse(f"{tmp_path}/new-store/"), SharedStore)
    (tmp_path / "existing").mkdir()
    assert isinstance(open_warehouse(tmp_path / "existing"), SharedStore)
    (tmp_path / "results.db").write_bytes(b"")
    assert isinstance(open_warehouse(tmp_path / "results.db"), Warehouse)
    with pytest.raises(HolisticError, match=r"\*\.duckdb, or create the folder first"):
        open_warehouse(tmp_path / "ambiguous")


def test_a_folder_of_other_files_is_not_taken_over(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine")
    with pytest.raises(HolisticError, match="not a results store"):
        SharedStore(tmp_path / "home").replace({"version": "v1"}, {"source_files": _files("v1", 1)})
    assert [p.name for p in (tmp_path / "home").iterdir()] == ["notes.txt"]


def test_a_full_disk_is_reported_as_such_and_costs_no_rows(tmp_path):
    with filesystem_of_its_own(tmp_path / "disk", size="8m") as disk:
        store = SharedStore(disk / "store")
        store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
        fill_up(disk, leave_bytes=64 * 1024)
        big = _files("v1", 20_000).assign(sha256=lambda f: [f"{i:064x}" for i in range(len(f))])
        with pytest.raises(WarehouseWriteError, match=f"{store.path}.*No space left on device"):
            store.replace({"version": "v1", "scenario": "s"}, {"source_files": big})
        assert store.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 3
        assert not list(store.path.rglob("*.tmp"))
        (disk / "filler").unlink()
        store.replace({"version": "v1", "scenario": "s"}, {"source_files": big})  # space again: the write goes in
        assert store.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 20_000


def test_a_read_only_store_is_read_and_refuses_writes_saying_so(tmp_path, monkeypatch):
    with filesystem_of_its_own(tmp_path / "ro", size="16m") as folder:
        store = SharedStore(folder / "store")
        store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 3)})
        remount_read_only(folder)
        monkeypatch.setattr(shared, "_READY", set())  # as a process that has not written it
        assert SharedStore(folder / "store").query("SELECT count(*) FROM source_files")[1] == [(3,)]
        with pytest.raises(WarehouseWriteError, match=f"{folder / 'store'}.*Read-only file system"):
            store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 1)})
        assert store.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 3


# -- many writers at once


GENERATIONS, SCENARIOS, ROWS = 8, 3, 50


def _writer(root: str, reads: str, worker: int) -> int:
    """One Celery worker's share: replaces its own slots generation after generation, and upserts cache rows:
    a key of its own per generation, and one key that every generation rewrites. Generation g starts once the
    reader has read g times, so that reads and writes interleave however the processes are scheduled."""
    store = SharedStore(root)
    for generation in range(GENERATIONS):
        while generation and not (Path(reads) / str(generation)).exists():
            time.sleep(0.005)
        for scenario in range(SCENARIOS):
            keys = {"model": f"w{worker}", "version": "v1", "scenario": f"s{scenario}"}
            store.replace(keys, {"completions": _completions(keys["model"], keys["scenario"], generation, ROWS)})
        store.upsert("completion_cache", _cache_rows(f"w{worker}", [f"g{generation}", "latest"], f"gen{generation}"))
    return GENERATIONS


def _check_consistent(store: SharedStore) -> None:
    """Every slot is absent or whole: ROWS rows of one generation; no primary key twice."""
    slots = store.df(
        "SELECT model, scenario, count(*) AS n, count(DISTINCT text) AS generations FROM completions GROUP BY ALL"
    )
    assert (slots["n"] == ROWS).all() and (slots["generations"] == 1).all(), slots
    duplicated = store.df(
        "SELECT (SELECT count(*) - count(DISTINCT (model, version, scenario, request_id)) FROM completions) AS a, "
        "(SELECT count(*) - count(DISTINCT (model_key, request_id, sample_index)) FROM completion_cache) AS b"
    )
    assert duplicated.values.tolist() == [[0, 0]]


@pytest.mark.slow  # four writer processes: the full suite's, not the fast tier's
def test_four_writer_processes_and_a_reader_never_see_a_partial_partition(tmp_path):
    store, reads = SharedStore(tmp_path / "store"), tmp_path / "reads"
    reads.mkdir()
    done_reads = 0
    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
        # nobody creates the store beforehand: the writers (and the reader) race to
        writers = [pool.submit(_writer, str(store.path), str(reads), worker) for worker in range(4)]
        while not all(w.done() for w in writers):
            if store.path.is_dir():
                _check_consistent(store)
                done_reads += 1
                (reads / str(done_reads)).touch()
        assert [w.result() for w in writers] == [GENERATIONS] * 4  # no writer failed
    _check_consistent(store)
    last = store.df("SELECT DISTINCT text FROM completions")["text"].tolist()
    assert last == [f"gen{GENERATIONS - 1}"]
    assert store.df("SELECT count(*) AS n FROM completions")["n"].iat[0] == 4 * SCENARIOS * ROWS
    cache = store.df("SELECT model_key, request_id, text FROM completion_cache")
    assert len(cache) == 4 * (GENERATIONS + 1)
    latest = cache[cache["request_id"] == "latest"]
    assert sorted(latest["model_key"]) == [f"w{w}" for w in range(4)]
    assert set(latest["text"]) == {f"gen{GENERATIONS - 1}"}
    assert done_reads >= GENERATIONS - 1


# -- a writer killed mid-write


KILLED_WRITER = """
import sys
import pandas as pd
from holistic_dagster.warehouse import shared
from holistic_dagster.warehouse.shared import SharedStore

store, rows = SharedStore(sys.argv[1]), int(sys.argv[2])
frame = pd.DataFrame({"version": "v1", "scenario": "s", "uri": [f"f{i}" for i in range(rows)], "sha256": "x" * 64,
                      "revision": "", "num_bytes": 0})
generation = 0
while True:  # until killed
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": frame.assign(revision=f"gen{generation}")})
    generation += 1
"""


@pytest.mark.slow  # a writer process, killed: the full suite's, not the fast tier's
def test_a_writer_killed_mid_write_leaves_nothing_half_visible(tmp_path):
    store, rows = SharedStore(tmp_path / "store"), 200_000
    store.ensure_schema()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(store.path), str(rows)], env=os.environ)

    def writing_after_a_first_partition() -> bool:
        names = [p.name for p in (store.path / "source_files").iterdir()]
        return any(n[0] not in "._" for n in names) and any(n.endswith(".tmp") for n in names)

    kill_when(proc, writing_after_a_first_partition, timeout_s=120, interval_s=0.01, what="a second partition file")
    # whether or not the kill came before the rename, a half-written file is there to be ignored
    (store.path / "source_files" / f".{'0' * 24}.parquet.dead.tmp").write_bytes(b"PAR1" + b"\0" * 100)
    partition = store.df("SELECT revision, count(*) AS n FROM source_files GROUP BY revision")
    assert len(partition) == 1 and partition["n"].iat[0] == rows
    assert store.query("SELECT count(*) FROM source_files")[1] == [(rows,)]


# -- SQL over the store


def test_query_reads_the_store_and_nothing_else(tmp_path):
    store = SharedStore(tmp_path / "store")
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    (tmp_path / "other.csv").write_text("secret\n42\n")
    assert store.query("SELECT uri FROM source_files ORDER BY uri") == (["uri"], [("f0",), ("f1",)])
    inside = f"holistic-store://{store.path}"  # the sandbox's own way to the store's files
    refused = {
        "SELECT * FROM read_csv('/etc/passwd')": "other files and databases",
        f"SELECT * FROM read_csv('{tmp_path}/other.csv')": "other files and databases",
        f"COPY (SELECT * FROM source_files) TO '{tmp_path}/copied.csv'": "other files and databases",
        f"COPY (SELECT 1 AS a) TO '{store.path}/source_files/injected.parquet'": "other files and databases",
        f"COPY (SELECT 1 AS a) TO '{inside}/source_files/injected.parquet'": "other files and databases",
        f"EXPORT DATABASE '{inside}/exported'": "other files and databases",
        f"ATTACH '{inside}/other.duckdb' AS other (READ_WRITE)": "other files and databases",
        f"ATTACH '{tmp_path}/other.duckdb' AS other (READ_WRITE)": "other files and databases",
        f"SELECT * FROM read_text('{inside}/../other.csv')": "other files and databases",
        "INSTALL httpfs": "other files and databases",
        "SET enable_external_access = true": "settings cannot be changed",
        "INSERT INTO source_files BY NAME SELECT 'v9' AS version": "statements that write",
        "DELETE FROM source_files": "statements that write",
        "CREATE TABLE t AS SELECT 1": "statements that write",
        "DROP VIEW source_files": "statements that write",
    }
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for statement, message in refused.items():
        with pytest.raises(ReadOnlyError, match=message):
            store.query(statement)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written
    assert store.query("SELECT count(*) FROM source_files")[1] == [(2,)]


def test_a_views_file_serves_any_duckdb_client(tmp_path):
    store = SharedStore(tmp_path / "store")
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    views = store.write_views_file(tmp_path / "views.duckdb")
    store.replace({"version": "v2", "scenario": "s"}, {"source_files": _files("v2", 3)})  # seen without a refresh
    with duckdb.connect(str(views), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM source_files").fetchone() == (5,)
        assert con.execute("SELECT count(*) FROM lineage").fetchone() == (0,)
    assert json.loads((store.path / "holistic-store.json").read_text())["format"] == 1
    assert sorted(p.name for p in Path(store.path).iterdir() if p.is_dir()) == sorted(TABLES)


def test_holistic_views_writes_the_views_file_and_says_so_for_a_duckdb_file(tmp_path):
    from typer.testing import CliRunner

    from holistic_dagster.cli import app

    store = SharedStore(tmp_path / "store")
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    result = CliRunner().invoke(app, ["views", str(tmp_path / "views.duckdb"), "--db", str(store.path)])
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(tmp_path / "views.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM source_files").fetchone() == (2,)
    Warehouse(tmp_path / "w.duckdb").replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 1)})
    result = CliRunner().invoke(app, ["views", str(tmp_path / "v2.duckdb"), "--db", str(tmp_path / "w.duckdb")])
    assert result.exit_code != 0 and "is a DuckDB file already" in result.output


def test_a_symbolic_link_in_the_store_leads_no_reader_out_of_it(tmp_path):
    """Whoever can write into the store's folder can plant a link to a file or folder outside it. One rule for every
    reader (the leaderboard's, the report's and the gate's df, and holistic query): a store holding a link is
    not read, and says where the link is; the sandbox's filesystem follows no path that leaves the store even so
    (a link planted after the check), nor lists one through glob."""
    from holistic_dagster.warehouse.store_files import StoreFiles

    store = SharedStore(tmp_path / "store")
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.csv").write_text("secret\n42\n")
    stolen = SharedStore(tmp_path / "other")  # another store's partition passed off as this one's
    stolen.replace({"version": "v2", "scenario": "s"}, {"source_files": _files("v2", 3)})
    (planted,) = (stolen.path / "source_files").glob("[0-9a-f]*.parquet")
    links = [
        (store.path / "linked", tmp_path / "outside"),
        (store.path / "source_files" / "zz-link.csv", tmp_path / "outside" / "secret.csv"),
        (store.path / "source_files" / ("f" * 64 + ".parquet"), planted),  # matched by the table's glob
    ]
    for link, target in links:
        link.symlink_to(target, target_is_directory=target.is_dir())
        for read in (lambda: store.df("SELECT count(*) AS n FROM source_files"),
                     lambda: store.query("SELECT count(*) FROM source_files")):  # fmt: skip
            with pytest.raises(HolisticError, match=f"holds a symbolic link, {link} -> {target}"):
                read()
        link.unlink()
    assert store.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 2  # read again once removed

    files = StoreFiles(str(store.path))  # a link planted after the check: the filesystem refuses it
    (store.path / "linked").symlink_to("/usr/bin", target_is_directory=True)
    (store.path / "source_files" / "zz-link.csv").symlink_to(tmp_path / "outside" / "secret.csv")
    for touch in (lambda: files.glob(f"{store.path}/linked/*"), lambda: files.ls(f"{store.path}/linked"),
                  lambda: files.open(f"{store.path}/source_files/zz-link.csv").read()):  # fmt: skip
        with pytest.raises(PermissionError, match="out of holistic query's reach"):
            touch()
    assert files.glob(f"{store.path}/source_files/*.parquet") == []  # a folder holding a link lists nothing
    (store.path / "source_files" / "zz-link.csv").unlink()
    assert len(files.glob(f"{store.path}/source_files/[0-9a-f]*.parquet")) == 1  # the store's own files list


def test_a_killed_writer_s_temporary_file_is_removed_once_no_live_writer_can_own_it(tmp_path):
    from holistic_dagster.warehouse.shared import ABANDONED_AFTER_S

    store = SharedStore(tmp_path / "store")
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    old = store.path / "source_files" / ".0123.parquet.dead.tmp"  # what a writer killed mid-write leaves
    fresh = store.path / "instances" / ".4567.parquet.live.tmp"  # a write going on now
    for path in (old, fresh):
        path.write_bytes(b"PAR1 half a file")
    long_ago = time.time() - ABANDONED_AFTER_S - 60
    os.utime(old, (long_ago, long_ago))
    SharedStore(store.path).ensure_schema()  # the next process to open the store
    assert not old.exists() and fresh.exists()
    assert store.query("SELECT count(*) FROM source_files")[1] == [(2,)]


def test_a_fifo_or_a_device_in_the_store_is_refused_never_waited_on(tmp_path):
    """A FIFO would block a reader forever (the leaderboard's, `holistic query`'s); a device would feed it anything.
    The store is not read while one is there, and a FIFO named as the DuckDB file is refused before DuckDB opens it."""
    import os

    from holistic_dagster.warehouse import open_warehouse
    from holistic_dagster.warehouse.store_files import StoreFiles

    store = SharedStore(tmp_path / "store")
    store.replace({"version": "v1", "scenario": "s"}, {"source_files": _files("v1", 2)})
    fifo = store.path / "source_files" / ("e" * 64 + ".parquet")  # matched by the table's glob
    os.mkfifo(fifo)
    for read in (lambda: store.df("SELECT count(*) AS n FROM source_files"),
                 lambda: store.query("SELECT count(*) FROM source_files")):  # fmt: skip
        with pytest.raises(HolisticError, match=f"{fifo} is a FIFO, not a file: it is not read"):
            read()
    with pytest.raises(PermissionError, match="out of holistic query's reach"):  # planted after the check
        StoreFiles(str(store.path)).open(str(fifo)).read()
    fifo.unlink()
    assert store.df("SELECT count(*) AS n FROM source_files")["n"].iat[0] == 2

    named = tmp_path / "warehouse.duckdb"
    os.mkfifo(named)
    with pytest.raises(HolisticError, match="warehouse.duckdb is a FIFO, not a file"):
        open_warehouse(named)
