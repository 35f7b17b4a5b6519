"""The real `transformers serve` (an OpenAI-compatible server) on a free loopback port, for a local model."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def transformers_serve(model_dir: str, start_timeout_s: float = 180) -> Iterator[str]:
    """Starts `transformers serve`, waits for /health and yields its /v1 base URL; always stopped after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = str(Path(sys.executable).with_name("transformers"))
    proc = subprocess.Popen(
        [exe, "serve", model_dir, "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("transformers serve did not start") from None
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
