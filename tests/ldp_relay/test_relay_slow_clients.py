"""``ldp relay`` under slow clients (issue 35, item 4): a real relay process, in front of
a stand-in gateway, and sockets that send a request's headers and two bytes of a
100 kB body from one address (127.0.0.66).

Before, the relay read a body without any deadline and held every such connection its
request limit let through for as long as the client liked: an address that opened them
at the limit's pace (20 a second), or any address with the limit off (devices behind one
NAT), filled the worker's 1,000 connections, and an honest upload waited until it timed
out. Now a body is cut by the edge's deadline
(:mod:`ldp_edge.slow_bodies`), and one address holds at most its share of a worker's
connections (:mod:`ldp_edge.connections`): the rest are answered 429 at once. The p99
of an honest sealed upload under 2,000 such connections is measured in
``benchmarks/bench_relay_slow_clients.py``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
import requests
from relay_helpers import run_relay
from test_ohttp_relay import SEALED, Recorder

from ldp_edge.slow_bodies import MAX_SECONDS
from ldp_relay.limits import DEFAULT_SOURCE_CONNECTIONS, KEEPALIVE_SECONDS
from tests.socket_helpers import open_many

ATTACKER = "127.0.0.66"
HEAD = (
    b"POST / HTTP/1.1\r\nHost: relay\r\nContent-Type: message/ohttp-req\r\n"
    b"Content-Length: 100000\r\n\r\n\x00\x01"
)
MARGIN = 30.0
"""Seconds past a deadline before the test gives up on a connection being closed (the
machine is shared); before the fix they stayed open indefinitely."""

CAP = 5

FLOOD = 1050
"""Slow connections of the flood: more than the one worker's 1,000 connections."""


@pytest.fixture
def gateway() -> Iterator[str]:
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/.well-known/ohttp-gateway"
    server.shutdown()


@pytest.fixture
def relay(gateway: str) -> Iterator[str]:
    yield from run_relay(gateway)


@pytest.fixture
def capped_relay(gateway: str) -> Iterator[str]:
    """A relay whose cap is 5 connections per address, the request limit off."""
    yield from run_relay(
        gateway, "", "--requests-per-second", "0", "--source-connections", str(CAP)
    )


@pytest.fixture
def unlimited_relay(gateway: str) -> Iterator[str]:
    """A relay without the request limit: what an address may open is not paced."""
    yield from run_relay(gateway, "", "--requests-per-second", "0")


def open_slow(url: str, count: int, head: bytes = HEAD) -> list[socket.socket]:
    """``count`` connections from :data:`ATTACKER` that sent ``head`` and then nothing."""
    host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)

    def one(_: int) -> socket.socket:
        s = socket.create_connection((host, int(port)), 10, source_address=(ATTACKER, 0))
        if head:
            s.sendall(head)
        return s

    return open_many(count, one)


def answer_of(s: socket.socket) -> bytes | None:
    """What the server sent on ``s`` before closing it (b"" if nothing), or None while it
    is open and silent."""
    s.setblocking(False)
    try:
        return s.recv(4096)
    except BlockingIOError:
        return None
    except OSError:  # reset: closed
        return b""
    finally:
        s.setblocking(True)


def closed_by_server(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (or answered it: 408 or 429, then closed)."""
    return answer_of(s) is not None


def upload(url: str) -> int:
    return requests.post(
        url, data=SEALED, headers={"Content-Type": "message/ohttp-req"}, timeout=10
    ).status_code


def test_slow_bodies_and_idle_connections_are_cut(relay: str) -> None:
    slow = open_slow(relay, 20) + open_slow(relay, 5, b"")  # 5 idle: not even headers
    started = time.monotonic()
    try:
        open_ = list(slow)
        while open_ and time.monotonic() < started + MAX_SECONDS + MARGIN:
            open_ = [s for s in open_ if not closed_by_server(s)]
            time.sleep(0.5)
        assert not open_, f"{len(open_)} of {len(slow)} slow connections still open"
        assert upload(relay) == 200
    finally:
        for s in slow:
            s.close()
    assert len(Recorder.seen) == 1  # nothing of the slow ones was forwarded


def test_a_flood_of_slow_connections_from_one_address_leaves_room_for_an_upload(
    unlimited_relay: str,
) -> None:
    relay = unlimited_relay
    flood = open_slow(relay, FLOOD)
    try:
        assert upload(relay) == 200  # from 127.0.0.1: another source
        deadline = time.monotonic() + KEEPALIVE_SECONDS + MARGIN
        refused: set[int] = set()
        while len(refused) < FLOOD - DEFAULT_SOURCE_CONNECTIONS and time.monotonic() < deadline:
            refused |= {i for i, s in enumerate(flood) if i not in refused and closed_by_server(s)}
            time.sleep(0.2)
        assert len(refused) >= FLOOD - DEFAULT_SOURCE_CONNECTIONS
    finally:
        for s in flood:
            s.close()


def test_connections_kept_alive_between_requests_do_not_count_against_the_cap(
    capped_relay: str,
) -> None:
    """A device that uploads on a fresh connection each time leaves each one kept alive
    (5 s) behind it: four times the cap of them are all served."""
    sessions = [requests.Session() for _ in range(4 * CAP)]
    try:
        for session in sessions:
            answer = session.post(
                capped_relay, data=SEALED, headers={"Content-Type": "message/ohttp-req"}, timeout=10
            )
            assert answer.status_code == 200, answer.text
    finally:
        for session in sessions:
            session.close()
    slow = open_slow(capped_relay, CAP + 1)  # but requests in progress do count
    try:
        deadline = time.monotonic() + MARGIN
        while not (answers := [a for s in slow if (a := answer_of(s)) is not None]):
            assert time.monotonic() < deadline, "no slow connection past the cap was refused"
            time.sleep(0.1)
        assert answers[0].startswith(b"HTTP/1.1 429"), answers  # the cap's, not a deadline's
    finally:
        for s in slow:
            s.close()
