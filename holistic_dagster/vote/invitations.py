"""Who may vote: an invitation link per person, carrying a token that names the voter and is signed (HMAC-SHA256)
with a key only the operator's machine holds. The page takes the voter from a valid token alone, so nobody can
vote, or see another's revealed models, under a name they were not given; 200 invented ids are 200 refusals.

The key comes from the environment variable HOLISTIC_VOTE_KEY when set (a deployment's secret store), else from
a file created once beside the results (`<HOLISTIC_HOME>/vote.key`, readable by its owner only). Changing the key
withdraws every invitation.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

from holistic_dagster.config.redaction import read_secret

KEY_ENV = "HOLISTIC_VOTE_KEY"
VOTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


def vote_key(path: Path) -> bytes:
    """The signing key: $HOLISTIC_VOTE_KEY, or the key file (the deployment's home/vote.key; created on first use,
    mode 0600)."""
    if value := read_secret(KEY_ENV).strip():
        return value.encode()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as f:
            f.write(secrets.token_urlsafe(32))
    return path.read_text().strip().encode()


def _signature(key: bytes, version: str, voter: str) -> str:
    digest = hmac.new(key, f"holistic-vote\n{version}\n{voter}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def invitation(key: bytes, version: str, voter: str) -> str:
    """The token of `voter`'s invitation to vote on a suite version."""
    if not VOTER.match(voter):
        raise ValueError(f"voter id {voter!r}: letters, digits and . _ @ -, at most 64 characters")
    return f"{voter}.{_signature(key, version, voter)}"


def voter_of(key: bytes, version: str, token: str | None) -> str | None:
    """The voter a token names, if the token is valid for this version (None otherwise)."""
    voter, _, signature = (token or "").rpartition(".")
    if not VOTER.match(voter) or not signature:
        return None
    # as bytes: compare_digest refuses a str holding a non-ASCII character (a 500 on a forged link)
    return voter if hmac.compare_digest(signature.encode(), _signature(key, version, voter).encode()) else None
