"""The real `transformers serve` (an OpenAI-compatible server) on a free loopback port, for a local model."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import free_port, wait_until


@contextlib.contextmanager
def transformers_serve(model_dir: str, start_timeout_s: float = 180) -> Iterator[str]:
    """Starts `transformers serve`, waits for /health and yields its /v1 base URL; always stopped after."""
    port = free_port()
    exe = str(Path(sys.executable).with_name("transformers"))
    proc = subprocess.Popen(
        [exe, "serve", model_dir, "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def healthy() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
            return True

    try:
        wait_until(
            healthy,
            timeout_s=start_timeout_s,
            interval_s=0.5,
            what=f"transformers serve to answer /health on port {port}",
            alive=lambda: proc.poll() is None,
            ignoring=(OSError,),
        )
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        with contextlib.suppress(ProcessLookupError):  # (already gone: keep the error that says why)
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
