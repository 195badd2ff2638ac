"""Alert notifications: signed webhooks and email, at least once, dead letters visible.

A real HTTP receiver (``http.server`` in a thread) and a real SMTP server (aiosmtpd)
started by the tests, over a real Redis; the notifier's backoff shortened to milliseconds.
Guide: docs/guides/alerts.md.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from aggregator.alerts.evaluate import Alerts
from aggregator.alerts.notify import MAX_ATTEMPTS, Notifier, SmtpSettings, sign
from ldp_store import alerts as store

SECRET = "webhook-secret-40"
EVENT = {
    "id": "1-0",
    "type": "fired",
    "summary": "share of 'dark' in app.theme above 30%",
    "message": "app.theme: the share is above 30.00% ... https://x/ui/metric/app.theme",
}


class Receiver:
    """An HTTP server answering the statuses it is given, in order (then 200)."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.calls: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.calls.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver([])
    yield r
    r.server.shutdown()


def _queue(client: Any, webhook: str | None = None, email: list[str] | None = None) -> None:
    Alerts(client).notify(EVENT, webhook, email or [])


def _drain(notifier: Notifier, rounds: int = 200) -> None:
    """Step until the outbox and the retries are empty (retries are milliseconds away)."""
    for _ in range(rounds):
        notifier.step(block_ms=5)
        if not notifier.redis.zcard(store._key("retry")) and not notifier.redis.xlen(
            store._key("outbox")
        ):
            return
    raise AssertionError("notifications still waiting")


def test_a_webhook_is_signed_retried_with_one_idempotency_key_and_sent(
    redis_db: Any, receiver: Receiver
) -> None:
    client = redis_db.client()
    receiver.statuses = [500, 503]
    _queue(client, webhook=receiver.url)
    notifier = Notifier(client, "n1", secret=SECRET, backoff=0.001)
    _drain(notifier)
    assert len(receiver.calls) == 3 and notifier.sent == 1
    keys = {headers["idempotency-key"] for headers, _ in receiver.calls}
    assert keys == {"1-0:webhook:" + receiver.url}
    headers, body = receiver.calls[-1]
    assert json.loads(body)["message"] == EVENT["message"]
    assert headers["x-ldp-signature"] == sign(SECRET, int(headers["x-ldp-timestamp"]), body)
    assert store.dead_letters(client) == []


def test_a_webhook_that_keeps_failing_ends_in_the_dead_letters(
    redis_db: Any, receiver: Receiver
) -> None:
    client = redis_db.client()
    receiver.statuses = [502] * MAX_ATTEMPTS
    _queue(client, webhook=receiver.url)
    _drain(Notifier(client, "n1", secret=SECRET, backoff=0.001))
    assert len(receiver.calls) == MAX_ATTEMPTS
    (dead,) = store.dead_letters(client)
    assert dead["attempt"] == MAX_ATTEMPTS and "502" in dead["error"]
    receiver.statuses = [404]  # a 4xx no retry can change: dead at once
    _queue(client, webhook=receiver.url)
    _drain(Notifier(client, "n1", secret=SECRET, backoff=0.001))
    assert store.dead_letters(client)[0]["attempt"] == 1
    assert store.dead_letter_count(client) == 2


def test_a_notification_read_by_a_notifier_that_died_is_sent_by_its_restart(
    redis_db: Any, receiver: Receiver
) -> None:
    client = redis_db.client()
    _queue(client, webhook=receiver.url)
    store.ensure_outbox_group(client)
    taken = store.read_outbox(client, "n1", 10, 5)  # read, then "crash" before sending
    assert len(taken) == 1 and receiver.calls == []
    _drain(Notifier(client, "n1", secret=SECRET))
    assert len(receiver.calls) == 1


def test_an_alert_email_reaches_a_real_smtp_server(redis_db: Any) -> None:
    from aiosmtpd.controller import Controller
    from aiosmtpd.handlers import Message

    got: list[Any] = []

    class Keep(Message):
        def handle_message(self, message: Any) -> None:
            got.append(message)

    with socket.socket() as probe:  # a free port for the SMTP server
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Keep(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        client = redis_db.client()
        _queue(client, email=["ops@example.org"])
        smtp = SmtpSettings.from_url(f"smtp://127.0.0.1:{port}", "alerts@example.org")
        _drain(Notifier(client, "n1", smtp=smtp))
    finally:
        controller.stop()
    (message,) = got
    assert message["To"] == "ops@example.org" and message["From"] == "alerts@example.org"
    assert message["Subject"] == f"[ldp alert] {EVENT['summary']}"
    assert message["Message-ID"] == "<1-0.email.ops.example.org@ldp-telemetry>"
    assert EVENT["message"] in message.get_payload()


def test_an_email_without_an_smtp_server_is_a_dead_letter_that_says_why(redis_db: Any) -> None:
    client = redis_db.client()
    _queue(client, email=["ops@example.org"])
    notifier = Notifier(client, "n1")
    notifier.smtp = None
    _drain(notifier)
    assert "LDP_SMTP_URL" in store.dead_letters(client)[0]["error"]
