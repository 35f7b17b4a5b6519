"""Where ../shared/peerbench/setup_peers.sh puts the peers (lm-eval and HELM 0.5.16 in their virtual environments, the
shared 5.5M-parameter model), and the one check every benchmark that needs them makes before it starts."""

from __future__ import annotations

import os
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
