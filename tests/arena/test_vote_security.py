"""The vote page as an attacker meets it: a voter is who their invitation says, and nothing else gets in (no
invented ids, no forged Host, no huge or mis-encoded bodies, no flood of votes, no peeking at another's reveal)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest
import requests

from holistic_dagster.config.deployment import Deployment
from holistic_dagster.stages.context import StageContext
from holistic_dagster.vote import MAX_BODY_BYTES, VOTES_PER_MINUTE, invitations, vote_app
from holistic_dagster.warehouse import Warehouse
from tests.servers import LoopbackServer

KEY = b"test-key-not-a-secret"


@pytest.fixture
def page(arena_world, tmp_path):
    wh = Warehouse(shutil.copy(arena_world["wh"].path, tmp_path / "warehouse.duckdb"))  # votes stay in the copy
    with duckdb.connect(str(wh.path)) as con:  # none cast yet (the browser test's, when it ran first, aside)
        con.execute("DELETE FROM votes")
    stage = StageContext(wh, arena_world["catalog"], Deployment.of(models=Path(arena_world["resource"].models_file)))
    # a clock that stands still: the rate limit counts these requests in one minute however slow the machine
    with LoopbackServer(vote_app(stage, "a1", KEY, clock=lambda: 1000.0)) as server:
        yield f"http://127.0.0.1:{server.port}", wh


def _battle(html: str) -> str:
    return re.search(r'name="battle_id" value="([^"]+)"', html).group(1)


def test_only_an_invitation_makes_a_voter(page):
    base, wh = page
    assert requests.get(f"{base}/").status_code == 403
    invented = [requests.post(f"{base}/vote", data={"t": f"voter{i}.forged", "battle_id": "x", "choice": "first"})
                for i in range(200)]  # fmt: skip
    assert {r.status_code for r in invented} == {403} and "invitation link" in invented[0].text
    other_version = invitations.invitation(KEY, "v9", "alice")  # an invitation to another suite version
    assert requests.get(f"{base}/", params={"t": other_version}).status_code == 403
    other_key = invitations.invitation(b"another key", "a1", "alice")
    assert requests.get(f"{base}/", params={"t": other_key}).status_code == 403
    non_ascii = invitations.invitation(KEY, "a1", "alice")[:-1] + "é"  # compare_digest on str raised: a 500
    assert requests.get(f"{base}/", params={"t": non_ascii}).status_code == 403
    assert requests.post(f"{base}/vote", data={"t": "alice.ü", "battle_id": "x", "choice": "first"}).status_code == 403
    alice = invitations.invitation(KEY, "a1", "alice")
    shown = requests.get(f"{base}/", params={"t": alice})
    assert shown.status_code == 200 and ">alice<" in shown.text
    voted = requests.post(f"{base}/vote", data={"t": alice, "battle_id": _battle(shown.text), "choice": "first"})
    assert voted.status_code == 200 and "Your last vote" in voted.text  # (after the redirect)
    assert wh.df("SELECT voter FROM votes")["voter"].tolist() == ["alice"]


def test_a_reveal_is_shown_only_to_the_voter_who_voted(page):
    base, _ = page
    alice, bob = (invitations.invitation(KEY, "a1", v) for v in ("alice", "bob"))
    battle = _battle(requests.get(f"{base}/", params={"t": alice}).text)
    requests.post(f"{base}/vote", data={"t": alice, "battle_id": battle, "choice": "tie"})
    assert "Your last vote" in requests.get(f"{base}/", params={"t": alice, "last": battle}).text
    assert "Your last vote" not in requests.get(f"{base}/", params={"t": bob, "last": battle}).text


def test_a_forged_host_a_huge_body_and_bad_encoding_are_refused(page):
    base, wh = page
    alice = invitations.invitation(KEY, "a1", "alice")
    port = base.rsplit(":", 1)[1]
    forged = {"Host": f"attacker.example:{port}", "Origin": f"http://attacker.example:{port}"}
    rebinding = requests.post(f"{base}/vote", data={"t": alice, "battle_id": "x", "choice": "first"}, headers=forged)
    assert rebinding.status_code == 400
    huge = requests.post(f"{base}/vote", data=b"t=" + b"a" * (MAX_BODY_BYTES + 1),
                         headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert huge.status_code == 413

    def chunked():  # no declared length: the page counts what arrives
        for _ in range(64):
            yield b"a" * 1024

    assert requests.post(f"{base}/vote", data=chunked()).status_code == 413
    for body in (b"t=\xff\xfe&choice=first", b"t=%ff%fe&choice=first"):
        bad = requests.post(f"{base}/vote", data=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert bad.status_code == 400 and "UTF-8" in bad.text
    assert wh.df("SELECT count(*) FROM votes").iat[0, 0] == 0


def test_votes_are_rate_limited_per_voter(page):
    base, _ = page
    alice, bob = (invitations.invitation(KEY, "a1", v) for v in ("alice", "bob"))
    answers = [requests.post(f"{base}/vote", data={"t": alice, "battle_id": "none", "choice": "first"},
                             allow_redirects=False).status_code for _ in range(VOTES_PER_MINUTE + 1)]  # fmt: skip
    assert answers[:VOTES_PER_MINUTE] == [400] * VOTES_PER_MINUTE and answers[-1] == 429  # (no such battle)
    assert requests.post(f"{base}/vote", data={"t": bob, "battle_id": "none", "choice": "first"}).status_code == 400


def test_the_signing_key_file_is_made_once_and_readable_by_its_owner_only(tmp_path, monkeypatch):
    monkeypatch.delenv(invitations.KEY_ENV, raising=False)
    key = invitations.vote_key(tmp_path / "vote.key")
    assert key == invitations.vote_key(tmp_path / "vote.key") and len(key) >= 32
    assert (tmp_path / "vote.key").stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv(invitations.KEY_ENV, "from-the-environment")
    assert invitations.vote_key(tmp_path / "vote.key") == b"from-the-environment"
    with pytest.raises(ValueError, match="voter id"):
        invitations.invitation(key, "a1", "<script>")
