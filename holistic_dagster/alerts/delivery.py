"""Posting alerts to a Slack-compatible webhook, and what to do when the receiver does not take them.

- One post is bounded as a whole (aiohttp's total timeout: a receiver that answers a header line every few
  seconds cannot hold the caller past `timeout_s`), and redirects are followed only on the configured host (a
  redirect elsewhere would hand the payload to another server).
- The URL is a secret: no error raised here holds it, its path segments or its query values, even when the
  receiver echoes them in its answer.
- An Outbox holds the alerts not yet delivered (in the alerts sensor's cursor): a failed post is tried again
  after a backoff that doubles up to RETRY_MAX_S, or at once when a new alert comes; each alert counts its own
  failures, and after MAX_ATTEMPTS, or at once when the receiver refuses them (permanent), alerts are handed back
  as undeliverable (the sensor records them) and later alerts still go out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol
from urllib.parse import parse_qsl, urljoin, urlsplit

from holistic_dagster.config.alerts import DEFAULT_URL_ENV, LEVELS, AlertsSpec, Level
from holistic_dagster.config.redaction import read_secret, redact
from holistic_dagster.errors import CatalogError, HolisticError


class Notifiable(Protocol):
    """What becomes an alert: a graded finding (alerts.grading.Finding)."""

    def alert(self) -> Alert: ...


@dataclass(frozen=True)
class Alert:
    """One item to notify about: a failing finding (Finding.alert), or a failed check of any run."""

    level: Level
    title: str
    text: str


class AlertDeliveryError(HolisticError):
    """The webhook did not take the alerts (its URL is never part of the message). permanent: the receiver
    refused them (a 4xx other than 408 and 429, a redirect to another host), so asking again will not help."""

    def __init__(self, message: str, permanent: bool = False):
        super().__init__(message)
        self.permanent = permanent


EMOJI = {"critical": ":red_circle:", "warning": ":warning:", "ok": ":white_check_mark:"}
MAX_SECTIONS = 48  # Slack: at most 50 blocks per message (a header, the sections, one "and N more")
MAX_SECTION_CHARS = 3000  # Slack: a section's text
MAX_HEADER_CHARS = 150  # Slack: a header's plain text
MAX_TEXT_CHARS = 4000  # the fallback text, kept short: notifications show its beginning
MAX_REDIRECTS = 3
RETRY_BASE_S = 30.0  # the first retry after a failed post; then doubling
RETRY_MAX_S = 3600.0
MAX_ATTEMPTS = 8  # then the alerts are undeliverable (about 2 hours of retries)
MAX_PENDING = 500  # alerts kept waiting at most; older ones are undeliverable
TRANSIENT_4XX = (408, 429)  # client errors that a later post may get past


def at_least(items: Sequence[Alert | Notifiable], min_level: Level = "warning") -> list[Alert]:
    """The items at `min_level` or above, as Alerts with secrets redacted (a chat channel is a log too),
    critical first (stable otherwise)."""
    alerts = [i if isinstance(i, Alert) else i.alert() for i in items]
    alerts = [Alert(a.level, redact(a.title), redact(a.text)) for a in alerts]
    alerts = [a for a in alerts if LEVELS.index(a.level) >= LEVELS.index(min_level)]
    return sorted(alerts, key=lambda a: -LEVELS.index(a.level))


def slack_payload(alerts: Sequence[Alert], header: str = "holistic-dagster") -> dict:
    """Slack incoming-webhook JSON: `text` (the whole list in plain lines, for receivers that read only text,
    and the notification), and blocks: a header and one section per alert."""
    counts = ", ".join(f"{n} {lv}" for lv in ("critical", "warning", "ok") if (n := sum(a.level == lv for a in alerts)))
    title = _cut(f"{header}: {counts or 'no alerts'}", MAX_HEADER_CHARS)
    lines = [f"[{a.level.upper()}] {a.title}: {a.text}" for a in alerts]
    blocks: list[dict] = [{"type": "header", "text": {"type": "plain_text", "text": title}}]
    for a in alerts[:MAX_SECTIONS]:
        body = f"{EMOJI[a.level]} *{a.level.upper()}* {_mrkdwn(a.title)}\n{_mrkdwn(a.text)}"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut(body, MAX_SECTION_CHARS)}})
    if len(alerts) > MAX_SECTIONS:
        more = f"… and {len(alerts) - MAX_SECTIONS} more"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": more}]})
    return {"text": _cut("\n".join([title, *lines]), MAX_TEXT_CHARS), "blocks": blocks}


def notify(
    items: Sequence[Alert | Notifiable],
    url: str,
    *,
    timeout_s: float = 10.0,
    url_env: str = DEFAULT_URL_ENV,
    min_level: Level = "warning",
    header: str = "holistic-dagster",
) -> int:
    """Posts the items at `min_level` or above in one Slack-compatible message; returns how many (0: nothing
    was posted). `url_env` names where the URL came from, for error messages, which never contain the URL."""
    alerts = at_least(items, min_level)
    if not alerts:
        return 0
    import aiohttp  # a third of a second to import, for a post that most runs never make

    where = f"the webhook in ${url_env}"
    failed = f"could not post {len(alerts)} alert(s) to {where}"
    try:
        status, said = asyncio.run(_post(url, slack_payload(alerts, header), timeout_s))
    except asyncio.TimeoutError:
        raise AlertDeliveryError(f"{failed}: no complete answer in {timeout_s:g} s") from None
    except aiohttp.ClientConnectionError:  # its text holds the host: only the kind is told
        raise AlertDeliveryError(f"{failed}: ConnectionError") from None
    except aiohttp.ClientError as e:  # its text can hold the URL: only its type is told
        raise AlertDeliveryError(f"{failed}: {type(e).__name__}") from None
    except _OffHost as e:
        raise AlertDeliveryError(f"{failed}: redirected to another host ({e}), not followed", permanent=True) from None
    if not 200 <= status < 300:
        said = _scrub(said, url)[:200]
        permanent = 400 <= status < 500 and status not in TRANSIENT_4XX
        raise AlertDeliveryError(f"{failed}: HTTP {status}" + (f": {said}" if said else ""), permanent=permanent)
    return len(alerts)


class _OffHost(Exception):
    pass


async def _post(url: str, payload: dict, timeout_s: float) -> tuple[int, str]:
    """(status, body) of the POST, following redirects on the URL's own scheme, host and port only, all of it
    within `timeout_s`."""
    import aiohttp

    origin = urlsplit(url)[:2]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
        for _ in range(MAX_REDIRECTS + 1):
            async with session.post(url, json=payload, allow_redirects=False) as response:
                body = await response.text(errors="replace")
                location = response.headers.get("Location")
                if response.status not in (301, 302, 303, 307, 308) or not location:
                    return response.status, body
            target = urljoin(url, location)
            if urlsplit(target)[:2] != origin:
                raise _OffHost(urlsplit(target).hostname or "?")
            url = target
        return response.status, body


def webhook_url(spec: AlertsSpec) -> str | None:
    """The URL in the environment variable the spec names (None when unset); from now on it is redacted from
    logged and raised text (redaction.read_secret)."""
    name = spec.webhook.url_env
    value = read_secret(name).strip()
    if not value:
        return None
    if not value.startswith(("http://", "https://")):
        raise CatalogError(f"environment variable {name} does not hold an http(s) webhook URL")
    return value


def send_alerts(items: Sequence[Alert | Notifiable], spec: AlertsSpec, header: str = "holistic-dagster") -> int:
    """notify() with the spec's webhook settings; 0 without posting when the URL variable is not set."""
    url = webhook_url(spec)
    if url is None:
        return 0
    hook = spec.webhook
    return notify(items, url, timeout_s=hook.timeout_s, url_env=hook.url_env, min_level=hook.min_level, header=header)


@dataclass
class Outbox:
    """Alerts waiting to be posted, each with how often posting it failed (`tries`, one per pending alert), and
    when to try again (epoch seconds). Each alert keeps its own count: a new alert is not given up with old ones,
    nor does it wait out their backoff (a new critical alert behind an hour's backoff was an hour late)."""

    pending: list[Alert] = field(default_factory=list)
    tries: list[int] = field(default_factory=list)
    next_try: float = 0.0

    @property
    def attempts(self) -> int:
        """The most failed posts of any alert waiting."""
        return max(self.tries, default=0)

    def to_json(self) -> dict:
        return {"pending": [asdict(a) for a in self.pending], "tries": self.tries, "next_try": self.next_try}

    @classmethod
    def from_json(cls, data: dict | None) -> Outbox:
        data = data or {}
        pending = [Alert(**a) for a in data.get("pending", [])]
        # an earlier release's cursor kept one count for the whole outbox
        tries = [int(t) for t in data.get("tries", [int(data.get("attempts", 0))] * len(pending))]
        return cls(pending, tries, float(data.get("next_try", 0.0)))


@dataclass(frozen=True)
class Delivery:
    """What one delivery attempt did: the outbox after it, a line for the tick's log, and the alerts given up on
    (with the error that ended them)."""

    outbox: Outbox
    message: str
    undeliverable: list[Alert]
    error: str = ""


def deliver(outbox: Outbox, new: Sequence[Alert], post: Callable[[list[Alert]], int], now: float) -> Delivery:
    """Adds `new` to the outbox and posts everything waiting when its time has come, or at once when there is a
    new alert (the backoff is for alerts tried before). `post` returns how many it posted (0: nothing to post,
    e.g. no webhook configured) or raises AlertDeliveryError."""
    pending, tries = [*outbox.pending, *new], [*outbox.tries, *([0] * len(new))]
    cut = max(len(pending) - MAX_PENDING, 0)
    dropped, pending, tries = pending[:cut], pending[cut:], tries[cut:]
    too_many = "more alerts waiting than kept" if dropped else ""
    if not pending:
        return Delivery(Outbox(), "nothing to post", dropped, too_many)
    if now < outbox.next_try and not new:
        waiting = Outbox(pending, tries, outbox.next_try)
        return Delivery(waiting, f"{len(pending)} alert(s) waiting to be posted again in {outbox.next_try - now:.0f} s",
                        dropped, too_many)  # fmt: skip
    try:
        sent = post(pending)
    except AlertDeliveryError as e:
        tries = [t + 1 for t in tries]
        if e.permanent:
            refused = f"{len(pending)} alert(s) undeliverable (refused): {e}"
            return Delivery(Outbox(), refused, dropped + pending, str(e))
        spent = [a for a, t in zip(pending, tries) if t >= MAX_ATTEMPTS]
        left = [(a, t) for a, t in zip(pending, tries) if t < MAX_ATTEMPTS]
        if not left:
            return Delivery(Outbox(), f"{len(pending)} alert(s) undeliverable (failed {MAX_ATTEMPTS} times): {e}",
                            dropped + pending, str(e))  # fmt: skip
        fewest = min(t for _, t in left)  # the newest alert's backoff sets the next try
        delay = min(RETRY_BASE_S * 2 ** (fewest - 1), RETRY_MAX_S)
        outbox = Outbox([a for a, _ in left], [t for _, t in left], now + delay)
        given_up = f"; {len(spent)} undeliverable (failed {MAX_ATTEMPTS} times)" if spent else ""
        return Delivery(outbox, f"{len(left)} alert(s) not posted (attempt {fewest}, next in {delay:.0f} s){given_up}: "
                        f"{e}", dropped + spent, str(e) if spent else too_many)  # fmt: skip
    message = f"posted {sent} of {len(pending)} alert(s)" if sent else f"{len(pending)} alert(s), none posted"
    return Delivery(Outbox(), message, dropped, too_many)


def _scrub(text: str, url: str) -> str:
    """A receiver's answer without the URL or any part of it that could be a secret (a server may echo the
    request line, a path token or a query signature)."""
    parts = urlsplit(url)
    secrets = [url, parts.path if len(parts.path) > 1 else "", parts.query, parts.password or "", parts.username or ""]
    secrets += [s for s in parts.path.split("/") if len(s) >= 6]
    secrets += [v for _, v in parse_qsl(parts.query, keep_blank_values=True) if len(v) >= 4]
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):  # longest first: a URL before its path
        text = text.replace(secret, "[webhook URL]")
    return redact(text).strip()


def _mrkdwn(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
