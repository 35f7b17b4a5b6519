"""Where ../shared/peerbench/setup_peers.sh puts the peers (lm-eval and HELM 0.5.16 in their virtual environments, the
shared 5.5M-parameter model), the one check every benchmark that needs them makes before it starts, and the
checkpoints of our registered models that the benchmarks load beside them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
PEERBENCH = SHARED / "peerbench"
BENCH = Path(os.environ.get("BENCH", "/tmp/bench"))  # setup_peers.sh's folder (its BENCH variable)
HELM_RUN = BENCH / "venv-helm" / "bin" / "helm-run"
PEER_MODEL = BENCH / "model"


def require(path: Path, what: str) -> None:
    """Stops the benchmark, saying how to set the peers up, when `path` (what it needs of them) is missing."""
    if not path.exists():
        raise SystemExit(f"no {what} at {path}: run `bash {PEERBENCH / 'setup_peers.sh'}` first (BENCH={BENCH})")


def checkpoint_of(model: str) -> Path:
    """The local checkpoint of a model of the registry (resources/models.yaml) that the benches load beside the peers:
    built or converted once into the model cache, as `holistic evaluate` would (clients.checkpoints)."""
    from holistic_dagster import settings
    from holistic_dagster.clients.checkpoints import local_checkpoint
    from holistic_dagster.config.deployment import Deployment

    return Path(local_checkpoint(Deployment().model(model), settings.model_cache_dir()))


@contextmanager
def checkouts(before: str | None, name: str) -> Iterator[dict[str, Path]]:
    """The code a side-by-side benchmark times, by label: a git worktree of `before` at $BENCH/name (removed after;
    none when `before` is None), then this checkout. Each side runs with its folder first on PYTHONPATH."""
    worktree = BENCH / name
    remove = ["git", "worktree", "remove", "--force", str(worktree)]
    sides = {"this checkout": REPO}
    if before:
        subprocess.run(remove, cwd=REPO, capture_output=True)  # a run interrupted before left it
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), before], cwd=REPO, check=True,
                       capture_output=True)  # fmt: skip
        sides = {f"before ({before})": worktree, **sides}
    try:
        yield sides
    finally:
        if before:
            subprocess.run(remove, cwd=REPO, capture_output=True)
