"""The shared test helpers fail loudly: a fixture edit whose text is not there, a wait that times out or whose
process died, each says what it was waiting for or editing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from contextlib import suppress
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import edit_file, free_port, replaced, wait_until


def test_edit_file_replaces_exactly_count_occurrences_or_names_the_file_and_the_text(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text("a: {n: 40}\nb: {n: 40}\n")
    edit_file(path, "a: {n: 40}", "a: {n: 100}")
    assert path.read_text() == "a: {n: 100}\nb: {n: 40}\n"
    with pytest.raises(AssertionError, match=r"suite.yaml: expected 1 occurrence\(s\) of 'c: \{n: 40\}'.*found 0"):
        edit_file(path, "c: {n: 40}", "c: {n: 1}")
    with pytest.raises(AssertionError, match=r"expected 1 occurrence\(s\) of 'n: ' to replace, found 2"):
        edit_file(path, "n: ", "m: ")
    edit_file(path, "n: ", "m: ", count=2)
    assert path.read_text() == "a: {m: 100}\nb: {m: 40}\n"
    assert replaced("x}", "}", ", y}") == "x, y}"
    with pytest.raises(AssertionError, match=r"text: expected 1 occurrence\(s\) of '\]'"):
        replaced("x}", "]", "")


def test_wait_until_returns_the_value_or_says_what_it_waited_for():
    calls = []
    assert wait_until(lambda: calls.append(1) or len(calls) >= 3 and "ready", timeout_s=5, interval_s=0, what="x") == (
        "ready"
    )
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"(?s)waited for the moon: not within 0.2 s\nlog tail"):
        wait_until(lambda: None, timeout_s=0.2, interval_s=0.01, what="the moon", diagnostics=lambda: "log tail")
    assert time.monotonic() - started >= 0.2
    with pytest.raises(AssertionError, match=r"waited for a server: the process ended after .*ConnectionError: no"):

        def refused():
            raise ConnectionError("no")

        wait_until(refused, timeout_s=60, what="a server", alive=lambda: False, ignoring=(OSError,))
    with pytest.raises(ZeroDivisionError):  # other exceptions are not swallowed
        wait_until(lambda: 1 / 0, timeout_s=60, what="y", ignoring=(OSError,))


def test_free_port_is_free_on_loopback():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # nothing holds it


def test_the_workers_get_a_module_or_the_world_of_the_session_fixture_it_uses(tmp_path):
    from tests.conftest import world_of

    (tmp_path / "test_uses.py").write_text("def test_a(suite_run, smollm2_client):\n    pass\n")
    (tmp_path / "test_plain.py").write_text("def test_b(suite_run_like):\n    pass\n")
    assert world_of(tmp_path, "test_uses.py") == "smollm2_client"  # the first in name order: one worker for both
    assert world_of(tmp_path, "test_plain.py") == "test_plain.py"


def test_the_workers_are_given_the_slow_worlds_first_then_the_slow_modules_then_the_rest(tmp_path):
    from tests.conftest import slow_worlds_first

    (tmp_path / "test_many.py").write_text("".join(f"def test_{i}():\n    pass\n" for i in range(3)))
    (tmp_path / "test_waits.py").write_text("import pytest\n\n@pytest.mark.slow\ndef test_w():\n    pass\n")
    (tmp_path / "test_other.py").write_text("def test_b():\n    pass\n")
    sizes = {"test_many.py": 3, "test_other.py": 1, "test_waits.py": 1, "suite_run": 1}
    assert slow_worlds_first(tmp_path, sizes) == ["suite_run", "test_waits.py", "test_many.py", "test_other.py"]


class _Worker:
    """Stands in for xdist's WorkerController: the scheduler sends it indexes into its own collection."""

    def __init__(self, name: str):
        self.gateway, self.sent, self.shutting_down = SimpleNamespace(id=name), [], False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_scheduler_gives_each_worker_whole_worlds_the_slow_ones_first(tmp_path):
    """Through xdist's own LoadFileScheduling: the first units sent are the session fixture's world (two modules)
    and the slow module, every test is sent once, and a module or a world is never split between workers."""
    from tests.conftest import by_world_scheduler, world_of

    modules = {
        "test_a_world.py": "def test_a(suite_run):\n    pass\n",
        "test_b_many.py": "".join(f"def test_{i}():\n    pass\n" for i in range(3)),
        "test_c_waits.py": "import pytest\n\n@pytest.mark.slow\ndef test_w():\n    pass\n",
        "test_d_world.py": "def test_d(suite_run):\n    pass\n",
    }
    collection = []
    for name, text in modules.items():
        (tmp_path / name).write_text(text)
        collection += [f"{name}::{line[4 : line.index('(')]}" for line in text.splitlines() if line.startswith("def ")]
    config = SimpleNamespace(rootpath=tmp_path, option=SimpleNamespace(loadscopereorder=True), getvalue=lambda name: {
        "tx": ["2*popen"]}[name])  # fmt: skip
    scheduler = by_world_scheduler(config)
    workers = [_Worker("gw0"), _Worker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    first = [[collection[i] for i in worker.sent] for worker in workers]
    assert first[0][:2] == ["test_a_world.py::test_a", "test_d_world.py::test_d"]
    assert first[1][0] == "test_c_waits.py::test_w"
    done = {id(worker): 0 for worker in workers}
    while any(done[id(w)] < len(w.sent) for w in workers):  # each worker runs what it was sent, in order
        for worker in workers:
            while done[id(worker)] < len(worker.sent):
                scheduler.mark_test_complete(worker, worker.sent[done[id(worker)]])
                done[id(worker)] += 1
    ran = [[collection[i] for i in worker.sent] for worker in workers]
    assert sorted(ran[0] + ran[1]) == sorted(collection)  # each test once
    worlds = [{world_of(tmp_path, nodeid.split("::")[0]) for nodeid in tests} for tests in ran]
    assert not worlds[0] & worlds[1]  # no module, no world, on both


def test_kill_group_takes_what_the_process_started_with_it():
    from tests.helpers import kill_group

    def running(pid: int) -> bool:  # a zombie waiting for its reaper has ended too
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (FileNotFoundError, ProcessLookupError):  # gone (between the open and the read: the latter)
            return False

    def started(new_session: bool) -> tuple[subprocess.Popen, int]:
        command = ["bash", "-c", "sleep 300 & echo $!; wait"]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=new_session)
        with proc.stdout:
            return proc, int(proc.stdout.readline())

    leader, child = started(new_session=True)
    try:
        assert running(child)
        kill_group(leader)
        assert leader.returncode == -signal.SIGKILL
        wait_until(lambda: not running(child), timeout_s=30, interval_s=0.1, what="the killed process's child to go")
    finally:
        with suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    member, child = started(new_session=False)  # in this process's group: only the process itself is killed
    try:
        kill_group(member)
        assert member.returncode == -signal.SIGKILL and running(child)
    finally:
        os.kill(child, signal.SIGKILL)
