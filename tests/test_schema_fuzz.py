"""The API does what /openapi.json says: schemathesis against ``ldp serve``'s app.

The whole web app (``ldp_server.app:create_server_app()``) runs under a real
gunicorn with ``collector/gunicorn_conf.py`` on a free port, over a real Redis holding a
categorical, a numeric, a memoized (budgeted) and a sharded metric with counted reports,
so the estimates routes answer real numbers. Schemathesis' CLI then tests every
operation the document lists, in all its phases (examples, coverage: boundary and
negative values; fuzzing; stateful sequences), with every check: no 5xx, only
documented statuses, content types, headers and bodies that match their schemas, schema-
invalid requests refused, schema-valid ones accepted, security enforced where declared.
``tests/schemathesis.toml`` holds its settings and the three narrow exclusions, each with
its reason.

Three ways of meeting the API:

* ``open``: no token configured. The read APIs are open (the document says their
  security is optional) and metric changes are disabled (403).
* ``tokens``: LDP_ADMIN_TOKEN and LDP_READ_TOKEN configured, the admin token sent (it
  grants everything); schemathesis also sends each protected request without it and
  with a wrong one, expecting 401/403.
* ``anonymous``: the same server, no credentials: protected operations must answer their
  documented 401/403, open ones as usual.

Generation is deterministic (``--generation-deterministic``) and bounded by
:data:`EXAMPLES` per operation in the fuzzing phase (the stateful phase's count is in
``tests/schemathesis.toml``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gunicorn_helpers import SERVER, start_gunicorn

pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra")

from aggregator.stream.worker import Worker  # noqa: E402
from client_sdk import mechanisms  # noqa: E402
from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from collector.context import services
from ldp_server.app import create_server_app  # noqa: E402
from ldp_store.embedded import free_port  # noqa: E402
from tests.process_helpers import stop

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "tests" / "schemathesis.toml"

EXAMPLES = 20
"""Test cases per operation in the fuzzing phase, about a sixth of a run's cases (the
coverage phase adds its ~2,900 boundary and negative cases, the stateful phase its
sequences). Enough: in each mode, the run's phases together meet every status, per
operation, that twice as many fuzzing cases meet."""

REQUEST_TIMEOUT = 120
"""Seconds schemathesis waits for one answer. Speed is not what this test checks: with
three suites on two cores an estimates or planning request took over 10 s (the old
timeout) and failed the run; a request that hangs still fails it, after two minutes."""

RUN_TIMEOUT = 1200
"""Seconds one schemathesis run may take at most (idle: well under a minute)."""

ADMIN_TOKEN = "fuzz-admin-token"
READ_TOKEN = "fuzz-read-token-1"

METRICS: dict[str, dict[str, Any]] = {
    "app.theme": {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"},
    "session.minutes": {"kind": "numeric", "range": [0, 120], "epsilon": 1.0},
    "app.seen": {
        "domain": ["a", "b", "c"],
        "epsilon": 1.0,
        "longitudinal": {"permanent_epsilon": 3.0},
        "budget": {"reports_per_period": 2, "period": "day"},
    },
    "app.pages": {
        "domain": [f"page-{i}" for i in range(8)],
        "epsilon": 2.0,
        "mechanism": "oue",
        "shards": 4,
    },
}
"""Categorical, numeric, memoized with a budget, sharded."""

ALL_PHASES = ["--phases", "examples,coverage,fuzzing,stateful"]
MODES = {
    "open": ({}, ALL_PHASES),
    "tokens": (
        {"LDP_ADMIN_TOKEN": ADMIN_TOKEN, "LDP_READ_TOKEN": READ_TOKEN},
        ["-H", f"Authorization: Bearer {ADMIN_TOKEN}", *ALL_PHASES],
    ),
    # What this mode adds to the two above is each operation met without credentials:
    # its documented examples and its coverage cases (valid, boundary and invalid
    # input) reach every operation that way. Random fuzzing and stateful sequences of
    # the same handlers run in the other two modes, "tokens" also without and with a
    # wrong token for each protected request.
    "anonymous": (
        {"LDP_ADMIN_TOKEN": ADMIN_TOKEN, "LDP_READ_TOKEN": READ_TOKEN},
        ["--phases", "examples,coverage"],
    ),
}
"""The server's token settings and the CLI options schemathesis runs with, by mode."""


def populate(redis_url: str) -> None:
    """Define :data:`METRICS` and count 40 reports of each (through the app's API)."""
    client = create_server_app({"REDIS_URL": redis_url, "ADMIN_TOKEN": ADMIN_TOKEN}).test_client()
    rng = random.Random(5)
    batch: list[dict[str, Any]] = []
    for name, spec in METRICS.items():
        response = client.put(
            f"/v1/metrics/{name}", json=spec, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        assert response.status_code == 201, response.json
        definition = MetricDefinition.from_dict(response.json)
        for _ in range(40):
            if definition.kind == "numeric":
                batch.append(build_report(definition, rng.uniform(0, 120), rng))
            else:
                value = rng.randrange(definition.k)
                batch.append(build_report(definition, value, rng, mechanisms.new_secret()))
    assert client.post("/v1/reports", json={"reports": batch}).status_code == 202
    Worker(services(client.application).redis, handle_signals=False).run(once=True)
    overview = client.get("/v1/overview").json["metrics"]
    assert sorted(row["n"] for row in overview) == [40] * len(METRICS)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=30) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.HTTPError):
        return False


def serve(redis_url: str, tokens: dict[str, str], logs: Path) -> Iterator[str]:
    """``ldp serve``'s web app under gunicorn on a free port; its URL while it runs."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.pop("REDIS_URL", None)
    env.update(
        tokens,
        LDP_REDIS_URL=redis_url,
        LDP_BIND=f"127.0.0.1:{port}",
        LDP_WEB_WORKERS="2",
        LDP_ACCESS_LOG="off",
        LDP_ERROR_LOG=str(logs / "error.log"),
        # Schemathesis sends thousands of requests from one address, the flood the
        # per-source limits stop (tests/test_admission_gunicorn.py): off here, so every
        # request meets the operation it tests. The 429 stays documented.
        LDP_SOURCE_REQUESTS_PER_SECOND="0",
        LDP_SOURCE_REPORTS_PER_MINUTE="0",
    )
    process = start_gunicorn(env, subprocess.DEVNULL, SERVER)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not _ready(url):
            assert process.poll() is None, (logs / "error.log").read_text()
            assert time.monotonic() < deadline, "gunicorn did not become ready"
            time.sleep(0.2)
        yield url
    finally:
        stop(process, signal.SIGTERM, 30)


@pytest.fixture(params=list(MODES))
def server(
    request: pytest.FixtureRequest, redis_db: Any, tmp_path: Path
) -> Iterator[tuple[str, list[str]]]:
    """A populated server in one of :data:`MODES`, and the CLI options of that mode."""
    tokens, options = MODES[request.param]
    populate(redis_db.url)
    for url in serve(redis_db.url, tokens, tmp_path):
        yield url, options


def test_the_api_does_what_its_document_says(server: tuple[str, list[str]], tmp_path: Path) -> None:
    url, options = server
    command = [
        sys.executable,
        "-c",
        "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())",
        "--config-file",
        str(CONFIG),
        "--no-color",
        "run",
        f"{url}/openapi.json",
        "--max-examples",
        str(EXAMPLES),
        "--generation-deterministic",
        "--workers",
        "1",
        "--request-timeout",
        str(REQUEST_TIMEOUT),
        *options,
    ]
    run = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-20_000:]
    # Every operation was tested: a run that tested nothing would pass too.
    with urllib.request.urlopen(url + "/openapi.json", timeout=60) as response:
        paths = json.load(response)["paths"]
    operations = sum(len(item) for item in paths.values())
    assert f"Selected: {operations}/{operations}" in report, report[-5_000:]
    assert f"Tested: {operations}" in report, report[-5_000:]
