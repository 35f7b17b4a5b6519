"""The shared test helpers fail loudly: a fixture edit whose text is not there, a wait that times out or whose
process died, each says what it was waiting for or editing."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

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


def test_kill_group_takes_what_the_process_started_with_it():
    from tests.helpers import kill_group

    def running(pid: int) -> bool:  # a zombie waiting for its reaper has ended too
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    script = "sleep 300 & echo $!; wait"
    proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = int(proc.stdout.readline())
    assert running(child)
    kill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    wait_until(lambda: not running(child), timeout_s=30, interval_s=0.1, what="the child started by the killed process")
