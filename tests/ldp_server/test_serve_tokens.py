"""Scoped tokens on ``ldp serve``'s web app with four workers (gunicorn, as deployed).

* Revocation: each of the four workers has just accepted a token (its cache holds it);
  the first request after ``revoke`` returns is refused on every one of them. Which
  worker holds a connection is read from the kernel's socket table (psutil), so every
  worker is asked, not four connections that may share one.
* ``ldp tokens create|list|rotate|revoke`` end to end: the token printed once, a list
  with prefixes and no secret, rotation with and without overlap.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner
from gunicorn_helpers import SERVER, start_gunicorn

from ldp_server.cli import main
from ldp_store.embedded import free_port
from tests.process_helpers import stop

ADMIN = "serve-tokens-admin-0123456"
WORKERS = 4
MAX_CONNECTIONS = 200
"""Connections opened at most to find one per worker (the kernel spreads accepts; a few
dozen suffice in practice)."""


@dataclass(frozen=True)
class Web:
    """The web service under gunicorn: its master process, port and URL."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def server(redis_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    """``ldp serve``'s web app under gunicorn with four workers, reads closed."""
    redis_server.client().flushall()
    logs = tmp_path_factory.mktemp("gunicorn")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update(
        REDIS_URL=redis_server.url,
        LDP_ADMIN_TOKEN=ADMIN,
        LDP_REQUIRE_READ_TOKEN="true",
        LDP_BIND=f"127.0.0.1:{port}",
        LDP_WEB_WORKERS=str(WORKERS),
        LDP_ACCESS_LOG=str(logs / "access.log"),
    )
    with open(logs / "output.log", "wb") as output:
        process = start_gunicorn(env, output, SERVER)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (logs / "output.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "gunicorn did not become ready"
            time.sleep(0.1)
        yield Web(process, port)
    finally:
        stop(process, signal.SIGTERM, 30)


def ldp(*args: str, url: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--url", url], env={"LDP_ADMIN_TOKEN": ADMIN})
    assert result.exit_code == 0, result.output
    return result


def ask(conn: http.client.HTTPConnection, token: str) -> int:
    """A request that needs metrics:delete (of a metric that does not exist: 404 when
    the token is accepted)."""
    conn.request("GET", "/v1/metrics/app.none/keys", headers={"Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    response.read()
    return response.status


def worker_of(conn: http.client.HTTPConnection, workers: list[psutil.Process]) -> int | None:
    """The pid of the worker holding the server side of ``conn``."""
    assert conn.sock is not None
    mine = conn.sock.getsockname()[1]
    for worker in workers:
        for c in worker.net_connections(kind="tcp"):
            if c.raddr and c.raddr.port == mine:
                return worker.pid
    return None


def test_the_first_request_after_revoke_is_refused_on_every_worker(server: Web) -> None:
    created = json.loads(
        ldp("tokens", "create", "ops", "--scope", "metrics:delete", "--json", url=server.url).output
    )
    token = created["token"]
    master = psutil.Process(server.process.pid)
    deadline = time.monotonic() + 120
    while len(master.children()) < WORKERS:  # gunicorn forks them one by one
        assert time.monotonic() < deadline
        time.sleep(0.1)
    workers = master.children()
    by_worker: dict[int, http.client.HTTPConnection] = {}
    for _ in range(MAX_CONNECTIONS):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        assert ask(conn, token) == 404  # accepted: now in that worker's cache
        pid = worker_of(conn, workers)
        if pid is not None and pid not in by_worker:
            by_worker[pid] = conn
        else:
            conn.close()
        if len(by_worker) == WORKERS:
            break
        for held in by_worker.values():  # used within gunicorn's keep-alive (5 s)
            assert ask(held, token) == 404
    assert len(by_worker) == WORKERS, "the kernel gave every connection to fewer workers"
    # Each worker has just accepted the token (within its cache's half second).
    assert all(ask(conn, token) == 404 for conn in by_worker.values())
    revoker = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    revoker.request(
        "POST",
        f"/v1/tokens/{created['prefix']}/revoke",
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    revoked = revoker.getresponse()
    assert revoked.status == 200, revoked.read()
    revoked.read()
    statuses = {pid: ask(conn, token) for pid, conn in by_worker.items()}
    assert set(statuses.values()) == {403}, statuses
    for conn in [*by_worker.values(), revoker]:
        conn.close()


def test_ldp_tokens_create_list_rotate_revoke(server: Web, tmp_path: Path) -> None:
    made = ldp("tokens", "create", "ios-app", "--kind", "ingest", url=server.url)
    text = made.stdout.strip()
    assert text.startswith("ldp_") and len(text.splitlines()) == 1
    prefix = text[:16]
    listed = ldp("tokens", "list", "--json", url=server.url).output
    assert prefix in listed and text not in listed and text[17:] not in listed
    row = next(t for t in json.loads(listed)["tokens"] if t["prefix"] == prefix)
    assert (row["scopes"], row["active"], row["created_by"]) == (["ingest"], True, "admin-token")

    # Rotation with an overlap: both work; without one: the old one is refused at once.
    read = ldp("tokens", "create", "ci", "--kind", "read", url=server.url).stdout.strip()
    overlapped = ldp("tokens", "rotate", read[:16], "--overlap", "3600", url=server.url)
    new = overlapped.stdout.strip()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)

    def status(token: str, path: str = "/v1/tokens") -> int:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        response.read()
        return response.status

    overview = "/v1/overview"
    assert status(read, overview) == 200 and status(new, overview) == 200
    newer = ldp("tokens", "rotate", new[:16], "--overlap", "0", url=server.url).stdout.strip()
    assert status(new, overview) == 401 and status(newer, overview) == 200
    assert status(newer) == 403  # a read token manages no tokens

    ldp("tokens", "revoke", prefix, url=server.url)
    states = {
        t["prefix"]: t
        for t in json.loads(ldp("tokens", "list", "--json", url=server.url).output)["tokens"]
    }
    assert states[prefix]["revoked"] and not states[prefix]["active"]
    assert states[new[:16]]["replaced_by"] == newer[:16]

    refused = CliRunner().invoke(
        main,
        ["tokens", "revoke", "ldp_" + "0" * 12, "--url", server.url],
        env={"LDP_ADMIN_TOKEN": ADMIN},
    )
    assert refused.exit_code != 0 and "no token" in refused.output
    bad = CliRunner().invoke(main, ["tokens", "revoke", "nonsense", "--url", server.url])
    assert bad.exit_code == 2 and "12 hex digits" in bad.output


def test_ldp_audit_log_shows_the_token_actions(server: Web) -> None:
    made = ldp("tokens", "create", "audit-me", "--kind", "read", url=server.url).stdout.strip()
    ldp("tokens", "revoke", made[:16], url=server.url)
    shown = json.loads(ldp("audit-log", "--limit", "3", "--json", url=server.url).stdout)
    rows = [(e["action"], e["target"], e["actor"], e["outcome"]) for e in shown["entries"]]
    assert rows[:2] == [
        ("token.revoke", made[:16], "admin-token", "ok"),
        ("token.create", made[:16], "admin-token", "ok"),
    ]
    table = ldp("audit-log", "--limit", "2", url=server.url).stdout
    assert "actor" in table and made[17:] not in table.replace("\n", "")  # never a secret
