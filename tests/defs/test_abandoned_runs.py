"""A run whose process is killed outside the daemon (SIGKILL of `holistic demo`) showed STARTED forever and
held back declarative automation. The next CLI run, or the daemon's `abandoned_runs` sensor, marks it failed;
a run whose process is alive is left alone."""

from __future__ import annotations

import os
import subprocess
import sys

from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter, SkipReason, build_sensor_context
from dagster._core.instance.ref import InstanceRef

from holistic_dagster.defs.evaluation import abandoned_runs
from holistic_dagster.settings import REPO_ROOT
from tests.helpers import kill_group, kill_when, wait_until

# an in-process run that never ends, tagged and marked (defs/ledger.py) as evaluate_suite runs its steps
STUCK_RUN = """
import time
from dagster import DagsterInstance, job, op
from holistic_dagster.defs import ledger
from holistic_dagster.defs.runner import process_tags

@op
def wait_forever():
    while True:
        time.sleep(0.1)

@job
def stuck():
    wait_forever()

instance = DagsterInstance.get()
with ledger.running(instance.root_directory):
    stuck.execute_in_process(instance=instance, tags=process_tags())
"""


def test_a_killed_in_process_run_is_marked_failed_and_a_live_one_is_not(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").symlink_to(REPO_ROOT / "dagster.yaml")
    instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    killed = subprocess.Popen([sys.executable, "-c", STUCK_RUN], env=env, start_new_session=True)
    alive = subprocess.Popen([sys.executable, "-c", STUCK_RUN], env=env, start_new_session=True)

    def started(pid: int) -> list:
        return [r for r in instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED])) if
                r.tags.get("holistic/pid") == str(pid)]  # fmt: skip

    try:
        wait_until(lambda: started(alive.pid), timeout_s=120, what="the live run to start")
        kill_when(killed, lambda: started(killed.pid), timeout_s=120, interval_s=0.2, what="the run to start")
        (zombie,) = started(killed.pid)
        assert instance.get_run_by_id(zombie.run_id).status == DagsterRunStatus.STARTED  # as before: forever

        result = abandoned_runs(build_sensor_context(instance=instance))
        assert isinstance(result, SkipReason) and result.skip_message == f"marked failed: {zombie.run_id}"
        assert instance.get_run_by_id(zombie.run_id).status == DagsterRunStatus.FAILURE
        failure = instance.all_logs(zombie.run_id, of_type=DagsterEventType.RUN_FAILURE)
        assert f"pid {killed.pid}" in failure[-1].dagster_event.message
        assert len(started(alive.pid)) == 1  # its process is still running it

        again = abandoned_runs(build_sensor_context(instance=instance))
        assert again.skip_message == "no abandoned runs"
    finally:
        for proc in (killed, alive):
            kill_group(proc)


def test_the_marks_of_in_process_runs_tell_killed_processes_from_live_ones(tmp_path):
    from holistic_dagster.defs import ledger

    with ledger.running(tmp_path):
        (mine,) = (tmp_path / ledger.FOLDER).glob("*.json")
        assert ledger.killed(tmp_path) == []  # this process is alive
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        dead = tmp_path / ledger.FOLDER / "dead.json"
        dead.write_text(f'{{"pid": {gone.stdout.strip()}, "started": 1.0}}')
        assert ledger.killed(tmp_path) == [dead]
    assert not mine.exists()  # removed when the run ended
    ledger.forget([dead])
    assert ledger.killed(tmp_path) == [] and ledger.killed(None) == []
