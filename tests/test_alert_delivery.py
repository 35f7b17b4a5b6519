"""Alerts that reach people: the alert_webhook sensor on the storage the default install uses (SQLite, whose event
log is run-sharded), and delivery that neither hangs on a slow receiver, nor retries forever, nor lets one refused
post block the next, nor leaks the URL, nor follows a redirect to another host."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    DagsterInstance,
    asset,
    asset_check,
    build_sensor_context,
    materialize,
)

from holistic_dagster.alerts.delivery import (
    MAX_ATTEMPTS,
    RETRY_BASE_S,
    RETRY_MAX_S,
    Alert,
    AlertDeliveryError,
    Outbox,
    deliver,
    notify,
)
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.summaries import alert_sensor
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write
from tests.helpers import free_port
from tests.servers.webhook_receiver import TOKEN, WebhookReceiver

alert_webhook = alert_sensor(30)  # the sensor as the daemon runs it
ALERT = [Alert("critical", "no_critical_alert failed on alerts [v5]", "wrong vs oracle on mini_qa")]


@pytest.fixture(scope="module")
def receiver():
    with WebhookReceiver() as server:
        yield server


def _failing_check(name: str, text: str = "planted"):
    @asset(name=name)
    def thing():
        return 1

    @asset_check(asset=thing, name=f"{name}_is_fine")
    def is_fine():
        return AssetCheckResult(passed=False, severity=AssetCheckSeverity.ERROR, description=f"{name} {text}")

    return [thing, is_fine]


def test_every_tick_on_the_default_sqlite_storage_posts_the_new_failures_once(tmp_path, receiver, monkeypatch):
    """The default install's instance (SQLite: a run-sharded event log) raised on every tick after the first."""
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        every_tick_posts_the_new_failures_once(instance, tmp_path, receiver, monkeypatch)


def every_tick_posts_the_new_failures_once(instance, tmp_path, receiver, monkeypatch) -> None:
    """Three sensor ticks on `instance` with a run with a failed check before each: the first starts from now, each
    later one posts the run before it, once."""
    resource = HolisticResource(
        warehouse_path=str(tmp_path / "w.duckdb"),
        alerts_file=str(write(tmp_path / "alerts.yaml", "webhook: {url_env: TEST_ALERT_HOOK}\n")),
    )
    monkeypatch.setenv("TEST_ALERT_HOOK", receiver.url())
    receiver.bodies.clear()
    materialize(_failing_check("before"), instance=instance)  # before the sensor started: not news
    cursor = None
    for tick, name in enumerate(["first", "second"]):
        context = build_sensor_context(instance=instance, resources={"holistic": resource}, cursor=cursor)
        result = alert_webhook(context)
        if tick == 0:
            assert "started" in str(result.skip_message)
        else:
            assert "posted 1 of 1" in str(result.skip_message), result.skip_message
        cursor = context.cursor
        materialize(_failing_check(name), instance=instance)
    last = build_sensor_context(instance=instance, resources={"holistic": resource}, cursor=cursor)
    assert "posted 1 of 1" in str(alert_webhook(last).skip_message)
    again = build_sensor_context(instance=instance, resources={"holistic": resource}, cursor=last.cursor)
    assert str(alert_webhook(again).skip_message) == "no new check results"
    titles = [b["text"].splitlines()[1] for b in receiver.bodies]
    assert titles == [f"[CRITICAL] {n}_is_fine failed on {n}: {n} planted" for n in ("first", "second")]


def test_a_receiver_that_sends_its_answer_slowly_cannot_hold_the_post():
    """A header line every half second, forever: each read is quick, the answer never ends."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def drip():
        connection, _ = server.accept()
        connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\r\n")
        while not stop.wait(0.5):
            try:
                connection.sendall(b"X-Slow: yes\r\n")
            except OSError:
                return

    threading.Thread(target=drip, daemon=True).start()
    outcome: list = []

    def post():
        try:
            notify(ALERT, f"http://127.0.0.1:{server.getsockname()[1]}/hooks/{TOKEN}", timeout_s=1)
        except AlertDeliveryError as e:
            outcome.append(e)

    poster = threading.Thread(target=post, daemon=True)
    poster.start()
    poster.join(timeout=120)  # a bound that only a post that waits for the end of the drip would pass
    stop.set()
    server.close()
    assert not poster.is_alive(), "the post waited on a receiver that never finishes its answer"
    assert "no complete answer in 1 s" in str(outcome[0])


def test_a_failing_receiver_is_retried_with_backoff_then_given_up_and_later_alerts_go_out(receiver):
    receiver.bodies.clear()
    broken = lambda items: notify(items, receiver.url("broken"), timeout_s=5)  # noqa: E731
    outbox, now, delays = Outbox(), 1000.0, []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        done = deliver(outbox, ALERT if attempt == 1 else [], broken, now)
        if attempt < MAX_ATTEMPTS:
            assert done.outbox.attempts == attempt and not done.undeliverable, done.message
            delays.append(done.outbox.next_try - now)
            early = deliver(done.outbox, [], broken, done.outbox.next_try - 1)  # not before its time
            assert "waiting to be posted again" in early.message and early.outbox == done.outbox
            now, outbox = done.outbox.next_try, done.outbox
    assert delays[:3] == [RETRY_BASE_S, 2 * RETRY_BASE_S, 4 * RETRY_BASE_S] and delays == sorted(delays)
    assert done.undeliverable == ALERT and done.outbox == Outbox() and "failed 8 times" in done.message
    later = [Alert("warning", "later", "a later alert")]
    sent = deliver(done.outbox, later, lambda items: notify(items, receiver.url(), timeout_s=5), now + 1)
    assert sent.message == "posted 1 of 1 alert(s)" and "later" in receiver.bodies[-1]["text"]


def test_a_new_alert_does_not_wait_out_an_old_backoff_nor_share_its_count(receiver):
    """Seven failed posts put an old alert an hour off; a new critical alert is posted at the next tick, and
    while the receiver stays down it keeps a count of its own (the old one is given up, the new one waits)."""
    broken = lambda items: notify(items, receiver.url("broken"), timeout_s=5)  # noqa: E731
    outbox, now = Outbox(), 1000.0
    for attempt in range(MAX_ATTEMPTS - 1):
        outbox, failed_at = deliver(outbox, ALERT if attempt == 0 else [], broken, now).outbox, now
        now = outbox.next_try
    assert outbox.tries == [MAX_ATTEMPTS - 1] and outbox.next_try - failed_at >= RETRY_MAX_S / 2  # a long wait
    critical = [Alert("critical", "new", "a new critical alert")]
    soon = failed_at + RETRY_BASE_S  # the next tick, long before the old backoff ends
    stuck = deliver(outbox, critical, broken, soon)
    assert "waiting" not in stuck.message  # tried at once
    assert stuck.undeliverable == ALERT and stuck.outbox.pending == critical and stuck.outbox.tries == [1]
    assert stuck.outbox.next_try == soon + RETRY_BASE_S  # the new alert's own backoff
    receiver.bodies.clear()
    sent = deliver(stuck.outbox, [], lambda items: notify(items, receiver.url(), timeout_s=5), stuck.outbox.next_try)
    assert sent.message == "posted 1 of 1 alert(s)" and "a new critical alert" in receiver.bodies[-1]["text"]
    restored = Outbox.from_json({"pending": [vars(a) for a in ALERT], "attempts": 3, "next_try": 5.0})  # older cursor
    assert restored.tries == [3] * len(ALERT) and restored.next_try == 5.0


def test_a_refused_post_is_given_up_at_once_and_its_echo_of_the_url_is_hidden(receiver):
    signed = receiver.url("reject") + "?sig=Zm9vYmFyc2lnbmF0dXJl&expires=1999999999"
    done = deliver(Outbox(), ALERT, lambda items: notify(items, signed, timeout_s=5), 1000.0)
    assert done.undeliverable == ALERT and "refused" in done.message and "HTTP 403" in done.error
    for secret in (TOKEN, "Zm9vYmFyc2lnbmF0dXJl", "1999999999", str(receiver.port), "/reject/"):
        assert secret not in done.message and secret not in done.error


def test_redirects_are_followed_on_the_webhook_s_host_only(receiver):
    receiver.bodies.clear()
    assert notify(ALERT, receiver.url("moved"), timeout_s=5) == 1 and len(receiver.bodies) == 1
    with WebhookReceiver() as other:
        hop = receiver.url(f"elsewhere/{other.port}")
        with pytest.raises(AlertDeliveryError, match="redirected to another host .* not followed") as e:
            notify(ALERT, hop, timeout_s=5)
        assert e.value.permanent and not other.bodies and TOKEN not in str(e.value)


def test_a_closed_port_says_connection_error_and_is_tried_again(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}/hooks/{TOKEN}"
    done = deliver(Outbox(), ALERT, lambda items: notify(items, closed, timeout_s=5), 1000.0)
    assert done.outbox.pending == ALERT and done.outbox.attempts == 1 and "ConnectionError" in done.message


def test_undeliverable_alerts_are_recorded_in_the_warehouse(tmp_path, receiver, monkeypatch):
    (tmp_path / "home").mkdir()
    path = tmp_path / "w.duckdb"
    resource = HolisticResource(
        warehouse_path=str(path),
        alerts_file=str(write(tmp_path / "alerts.yaml", "webhook: {url_env: TEST_ALERT_HOOK}\n")),
    )
    monkeypatch.setenv("TEST_ALERT_HOOK", receiver.url("reject"))
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        start = build_sensor_context(instance=instance, resources={"holistic": resource})
        alert_webhook(start)
        # one check failing twice with different texts, given up in one tick: two rows (the second was lost)
        materialize(_failing_check("refused", "first text"), instance=instance)
        materialize(_failing_check("refused", "second text"), instance=instance)
        tick = build_sensor_context(instance=instance, resources={"holistic": resource}, cursor=start.cursor)
        assert "undeliverable (refused)" in str(alert_webhook(tick).skip_message)
    rows = list(Warehouse(path).df("SELECT * FROM undelivered_alerts ORDER BY text").itertuples())
    assert [r.text for r in rows] == ["refused first text", "refused second text"]
    for row in rows:
        assert row.title == "refused_is_fine failed on refused" and "HTTP 403" in row.error and TOKEN not in row.error
        assert time.time() - row.recorded_at.timestamp() < 24 * 3600  # the tick's own time (UTC)
