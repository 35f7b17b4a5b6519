"""Helper processes that a command starts to load slow libraries on the machine's other core (Great
Expectations: quality/gx.py; a local model: clients/model_process.py; the report's plots: report/plots.py).
Each talks over one pipe and ends when its pipe closes or its parent kills it."""

from __future__ import annotations

import atexit
import importlib
import logging
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable
from typing import Any


def spawn(target, name: str, *args):
    """Starts `target(connection, *args)` in a fresh interpreter (spawn: no fork of Dagster's threads) and
    returns (process, this end of the pipe). The script that started this process must guard its entry point
    (`if __name__ == "__main__"`), as `holistic` does: a spawned process imports it."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_run, args=(target, theirs, *args), daemon=True, name=name)
    process.start()
    theirs.close()
    return process, ours


def _run(target, connection, *args) -> None:
    # tqdm (progress bars inside GX and transformers) otherwise takes a multiprocessing lock: a named
    # semaphore that a killed helper leaves behind, and the parent's resource tracker warns about at exit
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    target(connection, *args)


def stop(process, connection) -> None:
    """Ends the helper at once: it holds nothing to save, and an interpreter with torch or GX loaded takes
    seconds to shut down."""
    connection.close()
    process.kill()
    process.join(timeout=10)


def sendable(error: BaseException) -> BaseException:
    """The error itself when it survives pickling (a HolisticError naming file and record does), else its text."""
    from holistic_dagster.errors import HolisticError

    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return HolisticError(f"{type(error).__name__}: {error}")


def _serve_module(connection, module_name: str, warm_up: str) -> None:
    module = importlib.import_module(module_name)
    getattr(module, warm_up)()
    connection.send(("ready", None))
    while True:
        try:
            function, args = connection.recv()
        except (EOFError, OSError):  # the parent closed the pipe or died
            return
        try:
            reply = ("ok", getattr(module, function)(*args))
        except Exception as e:  # the parent raises it, as running the function there would have
            reply = ("error", sendable(e))
        connection.send(reply)


class Helper:
    """A spawned process that runs one module's functions by name, one call at a time, after running the
    module's `warm_up` function (its slow imports) as it starts. nice: its CPU priority, raised (lowered) so
    that it takes only what the machine leaves idle."""

    def __init__(self, name: str, module: str, warm_up: str, nice: int = 0):
        self._process, self._connection = spawn(_serve_module, name, module, warm_up)
        if nice and hasattr(os, "setpriority"):  # from its first instruction: its interpreter starts at a cost too
            os.setpriority(os.PRIO_PROCESS, self._process.pid, nice)
        self._lock = threading.Lock()
        self._warm = False

    def warm(self) -> bool:
        """Whether its warm-up has finished (never waits)."""
        with self._lock:
            if not self._warm and self._connection.poll():
                self._connection.recv()
                self._warm = True
            return self._warm

    def call(self, function: str, *args: Any) -> Any:
        """module.function(*args) in the helper (waiting for its warm-up first). EOFError or OSError: the
        helper died, and is closed."""
        with self._lock:
            try:
                if not self._warm:
                    self._connection.recv()
                    self._warm = True
                self._connection.send((function, args))
                status, value = self._connection.recv()
            except BaseException:
                # interrupted mid-answer (Ctrl-C) or the helper died: its pipe can no longer be trusted
                self.close()
                raise
        if status == "error":
            raise value
        return value

    def close(self) -> None:
        stop(self._process, self._connection)


class Offload:
    """A module's optional helper process: `start()` it once (it is stopped when this process ends); `run(f, *args)`
    is f(*args) computed in the helper while it lives, and here when none was started or it has died (killed, out
    of memory). when_warm: only once the helper's warm-up is done, else here, rather than waiting for it."""

    def __init__(self, name: str, module: str, warm_up: str, log: logging.Logger, doing: str, nice: int = 0):
        self.name, self.module, self.warm_up, self.log, self.doing, self.nice = name, module, warm_up, log, doing, nice
        self.helper: Helper | None = None

    def start(self) -> None:
        if self.helper is None:
            self.helper = Helper(self.name, self.module, self.warm_up, self.nice)
            atexit.register(self.stop)

    def stop(self) -> None:
        if self.helper is not None:
            self.helper.close()
            self.helper = None

    def run(self, function: Callable, *args: Any, when_warm: bool = False) -> Any:
        helper = self.helper
        if helper is not None and (not when_warm or helper.warm()):
            try:
                return helper.call(function.__name__, *args)
            except (EOFError, OSError) as e:
                self.log.warning("the background process %s ended (%s): %s in this process", self.name, e, self.doing)
                self.helper = None
        return function(*args)
