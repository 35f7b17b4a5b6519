"""Helper processes that a command starts to load slow libraries on the machine's other core (Great
Expectations: validation.py; a local model: clients/model_process.py). Each talks over one pipe and ends when
its pipe closes or its parent kills it."""

from __future__ import annotations

import multiprocessing
import threading


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
