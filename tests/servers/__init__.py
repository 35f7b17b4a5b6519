"""Protocol servers the tests start on 127.0.0.1 (named for what they are: test doubles of real servers)."""

from __future__ import annotations

import threading

import uvicorn

from tests.helpers import free_port, wait_until


class LoopbackServer:
    """Runs an ASGI app with uvicorn in a thread on a free loopback port, as a context manager."""

    def __init__(self, app):
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        wait_until(
            lambda: self.server.started,
            timeout_s=30,
            interval_s=0.05,
            what=f"{type(self).__name__} to start on port {self.port}",
            alive=self.thread.is_alive,
        )
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)
