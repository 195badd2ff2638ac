"""Starting `ldp serve` and `ldp demo`: the port check, IPv6 hosts, a failed start's leftovers.

Issue 28 item 6 (a newcomer's stumbles): `ldp demo` could not be run again for a minute
after Ctrl-C (its port check bound without ``SO_REUSEADDR``, so the TIME-WAIT sockets of
the last run's connections made the port look taken); `ldp serve`'s port error gave no
``--port 0`` hint; a failed start left a data directory with a ``.lock`` file. Issue 29
item 7: `ldp serve --host ::1` failed ("Address family for hostname not supported").
"""

from __future__ import annotations

import json
import random
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from serve_helpers import ldp_serve

from client_sdk.wire import MetricDefinition, build_report
from ldp_server.cli import main
from ldp_server.serve import check_port, host_port

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "test-admin-token-serve-start"


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture
def time_wait_port() -> Iterator[int]:
    """A port whose listener is gone, held only by a connection in TIME-WAIT (what a
    stopped server leaves for a minute: the side that closes first waits there)."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        served.close()  # the server closes first: its end goes to TIME-WAIT
        client.recv(1)  # its FIN arrived
        client.close()
    with socket.socket() as plain, pytest.raises(OSError):  # what the old demo check did
        plain.bind(("127.0.0.1", port))
    yield port


def test_the_port_check_takes_a_port_left_in_time_wait(time_wait_port: int) -> None:
    check_port("127.0.0.1", time_wait_port)  # free for gunicorn, which sets SO_REUSEADDR


def test_ldp_demo_runs_again_on_a_port_left_in_time_wait(
    time_wait_port: int, tmp_path: Path
) -> None:
    """The newcomer's re-run: `ldp demo --port P` right after a run on P stopped."""
    args = ["demo", "--data-dir", str(tmp_path), "--users", "50", "--processes", "1"]
    result = CliRunner().invoke(main, [*args, "--port", str(time_wait_port), "--no-serve"])
    assert result.exit_code == 0, result.output
    assert "Address already in use" not in result.output
    assert f"127.0.0.1:{time_wait_port}" in result.output


def test_a_taken_port_is_refused_with_the_way_out_and_leaves_nothing(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        data = tmp_path / "fresh"
        result = CliRunner().invoke(main, ["serve", "--port", str(port), "--data-dir", str(data)])
        assert result.exit_code == 1
        said = " ".join(result.output.split())
        assert f"cannot listen on 127.0.0.1:{port}" in said and "--port 0" in said, said
        assert not data.exists()  # the failed start made it: gone, .lock and all

        kept = tmp_path / "kept"  # an existing data dir keeps what it had, and no .lock
        kept.mkdir()
        (kept / "admin-token").write_text("x\n")
        result = CliRunner().invoke(main, ["serve", "--port", str(port), "--data-dir", str(kept)])
        assert result.exit_code == 1 and "--port 0" in " ".join(result.output.split())
        assert sorted(p.name for p in kept.iterdir()) == ["admin-token"]

        result = CliRunner().invoke(main, ["demo", "--port", str(port), "--data-dir", str(data)])
        assert result.exit_code == 1 and "--port 0" in " ".join(result.output.split())
        assert not data.exists()


def test_ipv6_hosts_are_written_in_brackets() -> None:
    assert host_port("::1", 8000) == "[::1]:8000"
    assert host_port("127.0.0.1", 8000) == "127.0.0.1:8000"
    assert host_port("localhost", 1) == "localhost:1"


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_ldp_serve_on_ipv6_loopback_serves_a_real_request(redis_db: Any, tmp_path: Path) -> None:
    """`ldp serve --host ::1`: the port check, gunicorn's bind and the printed URLs all take
    the IPv6 address; a metric is created and a report accepted over it."""
    args = ["--host", "::1", "--port", "0", "--data-dir", str(tmp_path / "data")]
    args += ["--redis-url", redis_db.url, "--web-workers", "1", "--aggregators", "1"]
    with ldp_serve(args, {"LDP_ADMIN_TOKEN": TOKEN}) as (url, serve):
        assert url.startswith("http://[::1]:"), url

        def call(path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
            data = None if body is None else json.dumps(body).encode()
            req = urllib.request.Request(url + path, data=data, method=method)
            req.add_header("Content-Type", "application/json")
            req.add_header("Authorization", f"Bearer {TOKEN}")
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())

        assert call("/healthz")[0] == 200
        spec = {"domain": ["a", "b"], "epsilon": 1.0, "mechanism": "grr"}
        status, body = call("/v1/metrics/app.v6", "PUT", spec)
        assert status == 201
        d = MetricDefinition.from_dict(body)
        rng = random.Random(6)
        status, body = call("/v1/reports", "POST", {"reports": [build_report(d, 1, rng)]})
        assert status == 202 and body["accepted"] == 1
    assert serve.returncode == 0
