"""Sending alert notifications: signed webhooks and email, delivered at least once.

A firing queues one entry per channel in the outbox stream (:mod:`ldp_store.alerts`). A
:class:`Notifier` (a thread of each ``ldp aggregate`` process, a consumer of the outbox's
group) sends each, and acknowledges the entry only once it was sent, scheduled for a
retry or dead-lettered: a crash in between leaves it pending, and the restarted notifier
(same consumer name) sends it again. Receivers deduplicate with the ``Idempotency-Key``
header (email: the ``Message-ID``), the same for every attempt. Failures are retried with
exponential backoff; after :data:`MAX_ATTEMPTS` (or a 4xx answer that no retry can change)
the notification goes to the dead letters, which ``GET /v1/alerts``, ``ldp alerts list``
and the dashboard show.

Webhook: ``POST`` of the event as JSON with ``X-LDP-Timestamp`` (Unix seconds) and
``X-LDP-Signature: sha256=<hex>``, the HMAC-SHA256 of ``<timestamp>.<body>`` under
``LDP_ALERT_WEBHOOK_SECRET`` (receivers recompute it and refuse old timestamps).
Email: ``LDP_SMTP_URL`` (``smtp://[user:password@]host[:port]``, STARTTLS when the server
offers it; ``smtps://`` for TLS from the start), from ``LDP_ALERT_EMAIL_FROM``.

Guide: ``docs/guides/alerts.md``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import smtplib
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

import redis

from ldp_store import alerts as store

__all__ = [
    "BACKOFF_SECONDS",
    "MAX_ATTEMPTS",
    "Notifier",
    "Permanent",
    "SmtpSettings",
    "sign",
]

log = logging.getLogger("ldp.aggregator.notify")

MAX_ATTEMPTS = 6
"""Attempts per notification: with :data:`BACKOFF_SECONDS` the last is about a minute
after the first (1 + 2 + 4 + 8 + 16 s of waits, plus timeouts): a receiver restarting
or briefly down still gets it; one down for longer is what the dead letters are for."""

BACKOFF_SECONDS = 1.0
"""The first retry's delay, doubled for each later one."""

TIMEOUT_SECONDS = 10.0
"""A webhook or SMTP exchange that takes longer failed (it is retried)."""


class Permanent(Exception):
    """A failure no retry can change (a 4xx other than 408/429; an address refused)."""


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-LDP-Signature`` value: ``sha256=`` and HMAC-SHA256(secret, "ts.body")."""
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


@dataclass(frozen=True)
class SmtpSettings:
    """Where alert emails go."""

    host: str
    port: int
    tls: bool = False
    """TLS from the start (``smtps://``); otherwise STARTTLS when offered."""
    user: str | None = None
    password: str | None = None
    sender: str = "ldp-alerts@localhost"

    @classmethod
    def from_url(cls, url: str, sender: str | None = None) -> SmtpSettings:
        """From ``smtp://[user:password@]host[:port]`` (or ``smtps://``).

        Raises:
            ValueError: another scheme, or no host.
        """
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError(f"LDP_SMTP_URL must be smtp://host[:port] or smtps://…, got {url!r}")
        tls = parts.scheme == "smtps"
        return cls(
            host=parts.hostname,
            port=parts.port or (465 if tls else 25),
            tls=tls,
            user=urllib.parse.unquote(parts.username) if parts.username else None,
            password=urllib.parse.unquote(parts.password) if parts.password else None,
            sender=sender or "ldp-alerts@localhost",
        )

    @classmethod
    def from_environ(cls) -> SmtpSettings | None:
        """``LDP_SMTP_URL`` and ``LDP_ALERT_EMAIL_FROM``; None without a URL."""
        url = os.environ.get("LDP_SMTP_URL")
        return cls.from_url(url, os.environ.get("LDP_ALERT_EMAIL_FROM")) if url else None


class Notifier:
    """Sends the outbox's notifications (see the module docstring).

    Args:
        client: Redis.
        name: the consumer name; stable across restarts (the pending entries are its).
        secret: the webhook signing secret (default ``LDP_ALERT_WEBHOOK_SECRET``; without
            one webhooks are sent unsigned).
        smtp: where emails go (default from the environment; without it an email
            notification is dead-lettered at once, saying so).
        clock: Unix time.
        backoff: the first retry's delay in seconds.
    """

    def __init__(
        self,
        client: redis.Redis,
        name: str,
        secret: str | None = None,
        smtp: SmtpSettings | None = None,
        clock: Callable[[], float] = time.time,
        backoff: float = BACKOFF_SECONDS,
    ) -> None:
        self.redis = client
        self.name = name
        self.secret = secret if secret is not None else os.environ.get("LDP_ALERT_WEBHOOK_SECRET")
        self.smtp = smtp if smtp is not None else SmtpSettings.from_environ()
        self.clock = clock
        self.backoff = backoff
        self.sent = 0
        self._pending_done = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the loop -----------------------------------------------------------------------------
    def step(self, block_ms: int = 1000) -> int:
        """Move due retries into the outbox, then send what this consumer has (its pending
        entries first, once); returns how many entries were handled."""
        store.ensure_outbox_group(self.redis)
        store.due_retries(self.redis, self.clock())
        entries = []
        if not self._pending_done:
            entries = store.read_outbox(self.redis, self.name, 100, None, pending=True)
            self._pending_done = not entries
        if not entries:
            entries = store.read_outbox(self.redis, self.name, 100, block_ms)
        for entry_id, delivery in entries:
            self.handle(entry_id, delivery)
        return len(entries)

    def start(self) -> Notifier:
        """Run :meth:`step` in a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="ldp-notifier", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread after its current step."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step(block_ms=500)
            except redis.RedisError as exc:  # Redis away: nothing is lost, try again
                log.warning("notifier: %s", exc)
                self._stop.wait(1.0)

    # -- one notification ----------------------------------------------------------------------
    def handle(self, entry_id: str, delivery: dict[str, Any]) -> None:
        """Send one notification; on failure schedule a retry or dead-letter it; then ack."""
        attempt = int(delivery.get("attempt", 0)) + 1
        try:
            self.send(delivery)
        except (Permanent, OSError, smtplib.SMTPException, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
            failed = {**delivery, "attempt": attempt, "error": error, "failed_at": self.clock()}
            if isinstance(exc, Permanent) or attempt >= MAX_ATTEMPTS:
                log.error(
                    "alert notification dead-lettered: %s → %s: %s",
                    delivery["channel"],
                    delivery["target"],
                    error,
                )
                store.dead_letter(self.redis, failed)
            else:
                due = self.clock() + self.backoff * 2 ** (attempt - 1)
                store.schedule_retry(self.redis, failed, due)
        else:
            self.sent += 1
        store.ack_outbox(self.redis, entry_id)

    def send(self, delivery: dict[str, Any]) -> None:
        """One attempt.

        Raises:
            Permanent: the receiver refused for good.
            OSError, smtplib.SMTPException: a failure worth retrying.
        """
        if delivery["channel"] == "webhook":
            self._post(delivery["target"], delivery["key"], delivery["event"])
        elif delivery["channel"] == "email":
            self._mail(delivery["target"], delivery["key"], delivery["event"])
        else:
            raise Permanent(f"unknown channel {delivery['channel']!r}")

    def _post(self, url: str, key: str, event: dict[str, Any]) -> None:
        body = json.dumps(event, sort_keys=True).encode()
        timestamp = int(self.clock())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "ldp-telemetry-alerts",
            "Idempotency-Key": key,
            "X-LDP-Timestamp": str(timestamp),
        }
        if self.secret:
            headers["X-LDP-Signature"] = sign(self.secret, timestamp, body)
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                response.read(1024)
        except urllib.error.HTTPError as exc:
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                raise Permanent(f"the webhook answered {exc.code}") from None
            raise

    def _mail(self, address: str, key: str, event: dict[str, Any]) -> None:
        if self.smtp is None:
            raise Permanent("no SMTP server configured (LDP_SMTP_URL)")
        message = EmailMessage()
        message["From"] = self.smtp.sender
        message["To"] = address
        kind = "alert" if event.get("type") == "fired" else str(event.get("type"))
        message["Subject"] = f"[ldp {kind}] {event.get('summary', '')}"[:200]
        message["Message-ID"] = f"<{key.replace(':', '.').replace('@', '.')}@ldp-telemetry>"
        message.set_content(
            f"{event.get('message', '')}\n\n{json.dumps(event, indent=2, sort_keys=True)}\n"
        )
        smtp_class = smtplib.SMTP_SSL if self.smtp.tls else smtplib.SMTP
        with smtp_class(self.smtp.host, self.smtp.port, timeout=TIMEOUT_SECONDS) as smtp:
            if not self.smtp.tls:
                smtp.ehlo()
                if smtp.has_extn("starttls"):
                    smtp.starttls()
                    smtp.ehlo()
            if self.smtp.user:
                smtp.login(self.smtp.user, self.smtp.password or "")
            try:
                smtp.send_message(message)
            except smtplib.SMTPRecipientsRefused as exc:
                raise Permanent(f"the SMTP server refused {address}") from exc
