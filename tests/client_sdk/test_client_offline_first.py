"""An app that ships its metric definitions reports from its first start, offline.

The real stack (``ldp_server.serve.Server``) and the same metrics file on both
sides: the server registers it as ``ldp serve --metrics`` does, the app bundles it
(``Client(url, definitions=path)``). A device that has never reached the collector
reports, is SIGKILLed, restarts once the server is up and delivers every report, counted
exactly once. Then, against a server whose metric moved on: reports made with an older
bundled version that the server still has are accepted as that version, reports made
with a spec the server does not have are dropped as ``bundle_mismatch`` (never sent), and
the server's newer version is used after the next fetch. Last, the ``requests``
transport: through an app's own ``Session`` and through a forward proxy named by
``HTTP_PROXY``.
"""

from __future__ import annotations

import http.client
import http.server
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
import requests
import requests.adapters
from test_pipeline_e2e import offline_counts, wait_counted

from aggregator.query.window import read_counts
from client_sdk import Client
from client_sdk.bundle import load_metrics_file, split_version
from ldp_server.serve import Server
from ldp_store.embedded import free_port
from ldp_store.registry import Registry

ROOT = Path(__file__).resolve().parents[2]

METRICS_TOML = """
[metrics."first.theme"]
domain = ["light", "dark", "auto"]
epsilon = 1.0
mechanism = "grr"

[metrics."first.screen"]
domain = ["home", "search", "settings", "profile", "feed", "cart", "help", "about"]
epsilon = 1.0
mechanism = "oue"
version = 1
"""

APP = r"""
import json, os, random, signal, sqlite3, sys
from client_sdk import Client
from client_sdk.store import FILENAME

url, storage, definitions, side, mode = sys.argv[1:6]
client = Client(url, storage_dir=storage, definitions=definitions, flush_at=10**9,
                flush_interval=3600, max_batch_reports=25)
if mode == "restart":
    delivered = client.flush(timeout=120)
    print(json.dumps({"delivered": delivered, "stats": client.stats()}), flush=True)
    client.shutdown()
    sys.exit(0)
picker = random.Random(11)
domains = {"first.theme": ["light", "dark", "auto"], "first.screen": ["home", "feed", "cart"]}
made = [client.report(name, picker.choice(domains[name]))
        for name in sorted(domains) for _ in range(40)]
with sqlite3.connect(os.path.join(storage, FILENAME)) as conn:
    queued = [json.loads(d) for (d,) in conn.execute("SELECT data FROM reports ORDER BY id")]
with open(side, "w") as f:
    json.dump({"made": made, "queued": queued, "stats": client.stats()}, f)
os.kill(os.getpid(), signal.SIGKILL)  # killed before the collector was ever reached
"""


def register_like_ldp_serve(server: Server, path: Path) -> Registry:
    """What ``ldp serve --metrics path`` does once the server is up."""
    registry = Registry(redis.Redis.from_url(server.redis_url or ""))
    for name, table in load_metrics_file(path).items():
        spec, declared = split_version(name, table)
        change = registry.put(name, spec)
        assert declared is None or declared == change.definition.version
    return registry


def run_app(url: str, storage: Path, definitions: Path, side: Path, mode: str) -> Any:
    return subprocess.run(
        [sys.executable, "-c", APP, url, str(storage), str(definitions), str(side), mode],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
    )


def test_a_device_that_starts_offline_delivers_every_report_after_a_kill_and_restart(
    tmp_path: Path,
) -> None:
    definitions = tmp_path / "metrics.toml"
    definitions.write_text(METRICS_TOML)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    storage, side = tmp_path / "app-store", tmp_path / "made.json"

    first = run_app(url, storage, definitions, side, "offline")
    assert first.returncode == -signal.SIGKILL, first.stderr
    offline = json.loads(side.read_text())
    assert offline["made"] == [True] * 80  # nothing dropped as unreachable
    assert offline["stats"]["dropped"]["unreachable"] == 0
    queued = offline["queued"]
    assert len(queued) == 80
    # Queued unconfirmed: the bundled version, negated, which no collector accepts.
    assert {r["version"] for r in queued} == {-1}

    with Server(port=port, data_dir=tmp_path / "stack", web_workers=1, quiet=True) as server:
        registry = register_like_ldp_serve(server, definitions)
        again = run_app(url, storage, definitions, side, "restart")
        assert again.returncode == 0, again.stderr
        result = json.loads(again.stdout.strip().splitlines()[-1])
        assert result["delivered"] is True
        stats = result["stats"]
        assert stats["sent"] == 80 and stats["accepted"] == 80 and stats["queued"] == 0
        assert sum(stats["dropped"].values()) == 0

        r = redis.Redis.from_url(server.redis_url or "")
        by_metric: dict[str, list[dict[str, Any]]] = {}
        for report in queued:
            by_metric.setdefault(report["metric"], []).append(report)
        metrics = [registry.get(name, 1) for name in sorted(by_metric)]
        assert all(d is not None for d in metrics)
        current = [d for d in metrics if d is not None]
        wait_counted(r, current, {name: 40 for name in by_metric})
        time.sleep(0.5)  # anything counted twice would show up now
        for d in current:
            counts = read_counts(r, d)
            assert counts.n == 40
            np.testing.assert_array_equal(
                np.asarray(counts.support), offline_counts(d, by_metric[d.name])
            )


THEME_V1 = {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"}
THEME_V2 = {"domain": ["light", "dark", "auto", "high-contrast"], "epsilon": 1.0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("bundle-stack")
    with Server(port=0, data_dir=data, web_workers=1, quiet=True) as s:
        registry = Registry(redis.Redis.from_url(s.redis_url or ""))
        assert registry.put("moved.theme", THEME_V1).definition.version == 1
        assert registry.put("moved.theme", THEME_V2).definition.version == 2
        yield s


def offline_client(server: Server, tmp_path: Path, bundle: dict[str, Any]) -> Client:
    """A client whose first reports are made before any fetch could succeed."""
    client = Client(
        server.url,
        definitions=bundle,
        storage_dir=tmp_path,
        flush_at=10**9,
        flush_interval=3600,
        metrics_ttl=0,
    )
    return client


def test_a_bundled_version_the_server_still_has_is_accepted_and_the_newer_one_used_next(
    server: Server, tmp_path: Path
) -> None:
    # The app ships version 1 of the file; the server has moved on to version 2.
    bundle = {"moved.theme": {**THEME_V1, "version": 1}}
    client = offline_client(server, tmp_path, bundle)
    client._unreachable_until = float("inf")  # as after a failed fetch: offline
    assert all(client.report("moved.theme", "dark") for _ in range(5))
    client._unreachable_until = float("-inf")  # back online
    assert client.flush(timeout=30)
    stats = client.stats()
    assert stats["sent"] == 5 and stats["accepted"] == 5
    assert sum(stats["dropped"].values()) == 0
    # The next report fetches the server's current definition: version 2 from now on.
    assert client.report("moved.theme", "high-contrast")
    assert client.definition("moved.theme").version == 2
    assert client.flush(timeout=30) and client.stats()["accepted"] == 6
    client.shutdown()


@pytest.mark.parametrize(
    "bundle",
    [
        {"moved.theme": {"domain": ["light", "dark"], "epsilon": 1.0}},  # v1 ≠ the server's
        {"moved.theme": {**THEME_V1, "version": 3}},  # a version the server never made
        {"never.created": THEME_V1},  # a metric the server does not have
    ],
    ids=["other-parameters", "unknown-version", "unknown-metric"],
)
def test_reports_of_a_bundled_spec_the_server_lacks_are_dropped_and_counted(
    server: Server, tmp_path: Path, bundle: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    (name,) = bundle
    client = offline_client(server, tmp_path, bundle)
    client._unreachable_until = float("inf")
    assert all(client.report(name, "dark") for _ in range(4))
    client._unreachable_until = float("-inf")
    assert client.flush(timeout=30) is False  # the queue is empty, nothing was delivered
    stats = client.stats()
    assert stats["dropped"]["bundle_mismatch"] == 4
    assert stats["sent"] == 0 and stats["batches"] == 0  # never sent to be misread
    assert any("bundled definition" in r.getMessage() for r in caplog.records)
    client.shutdown()


class RecordingAdapter(requests.adapters.HTTPAdapter):
    """An app's adapter (mTLS certificates would be mounted the same way)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str]] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        self.sent.append((request.method or "", request.headers.get("X-App", "")))
        return super().send(request, **kwargs)


def test_an_app_session_carries_every_request(server: Server) -> None:
    session = requests.Session()
    adapter = RecordingAdapter()
    session.mount("http://", adapter)
    session.headers["X-App"] = "corp"
    with Client(server.url, session=session, flush_at=10**9, flush_interval=3600) as client:
        assert client._transport.session is session  # type: ignore[attr-defined]
        assert client.report("moved.theme", "dark")
        assert client.flush(timeout=30)
        assert client.stats()["accepted"] == 1
    assert adapter.sent == [("GET", "corp"), ("POST", "corp")]
    assert session.get(server.url + "/healthz").status_code == 200  # not closed by the SDK


class ForwardProxy(http.server.ThreadingHTTPServer):
    """A minimal HTTP forward proxy: absolute-URI requests, relayed and recorded."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self.seen: list[str] = []


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    server: ForwardProxy

    def relay(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        self.server.seen.append(f"{self.command} {self.path}")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        upstream = http.client.HTTPConnection(target.hostname or "", target.port, timeout=10)
        path = target.path + (f"?{target.query}" if target.query else "")
        headers = {k: v for k, v in self.headers.items() if k.lower() != "proxy-connection"}
        upstream.request(self.command, path, body=body or None, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        upstream.close()

    do_GET = do_POST = relay

    def log_message(self, format: str, *args: Any) -> None:
        return None


def test_the_own_session_goes_through_the_proxy_the_environment_names(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = ForwardProxy()
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        for var in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
        with Client(server.url, flush_at=10**9, flush_interval=3600) as client:
            assert client.report("moved.theme", "dark")
            assert client.flush(timeout=30)
            assert client.stats()["accepted"] == 1
        assert proxy.seen == [
            f"GET {server.url}/v1/metrics/moved.theme",
            f"POST {server.url}/v1/reports",
        ]
    finally:
        proxy.shutdown()
        proxy.server_close()
