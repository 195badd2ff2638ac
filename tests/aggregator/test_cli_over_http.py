"""``ldp estimates`` and ``ldp export`` through the HTTP API, from another folder.

Issue 36: both read only a local ``ldp-data`` ("no Redis to read" from any other
folder), while ``ldp metrics`` talks to ``LDP_URL``. A real ``ldp serve`` (gunicorn, an
aggregator, an embedded Redis) with a read token; the ``ldp`` command run as its own
process in an empty folder, pointed at the server by ``LDP_URL`` and the token by
``LDP_READ_TOKEN``: the same rows as the Redis path, byte for byte, and a clear message
without the token.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from client_sdk.wire import MetricDefinition, build_report
from ldp_server.serve import Server
from tests.http_helpers import call as _call

READ = "read-token-36-36-36"
THEME = {
    "domain": ["light", "dark", "auto", "high-contrast"],
    "epsilon": 2.0,
    "mechanism": "grr",
    "dimensions": [{"name": "platform", "values": ["ios", "android"]}],
}
MINUTES = {"kind": "numeric", "range": [0, 120], "epsilon": 1.0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """ldp serve with a read token, two metrics and their reports counted."""
    data = tmp_path_factory.mktemp("serve") / "ldp-data"
    os.environ["LDP_READ_TOKEN"] = READ
    try:
        s = Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True).start()
    finally:
        del os.environ["LDP_READ_TOKEN"]
    try:
        rng = random.Random(36)
        reports = []
        for name, spec in (("app.theme", THEME), ("app.minutes", MINUTES)):
            body = _call(f"{s.url}/v1/metrics/{name}", "PUT", spec, s.admin_token)
            d = MetricDefinition.from_dict(body)
            for _ in range(400):
                if d.kind == "numeric":
                    reports.append(build_report(d, rng.uniform(0, 120), rng))
                else:
                    value = rng.choices(d.domain, [6, 3, 1, 0])[0]
                    platform = {"platform": rng.choice(["ios", "android"])}
                    reports.append(build_report(d, value, rng, None, platform))
        for start in range(0, len(reports), 400):
            _call(f"{s.url}/v1/reports", "POST", {"reports": reports[start : start + 400]})
        deadline = time.monotonic() + 60
        for name in ("app.theme", "app.minutes"):
            while _call(f"{s.url}/v1/estimates/{name}", token=READ)["n"] < 400:
                assert time.monotonic() < deadline, f"{name} not counted"
                time.sleep(0.2)
        yield s
    finally:
        s.stop()


def ldp(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The ``ldp`` command as its own process, in ``cwd``, with only ``env`` set of ours."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LDP_", "REDIS_URL"))}
    return subprocess.run(
        [sys.executable, "-m", "ldp_server", *args],
        cwd=cwd,
        env={**base, "COLUMNS": "160", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_estimates_and_export_read_the_api_with_a_read_token(
    server: Server, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    http = {"LDP_URL": server.url, "LDP_READ_TOKEN": READ}
    local = ("--redis-url", server.redis_url or "")

    got = ldp("estimates", "app.theme", "--format", "json", cwd=elsewhere, **http)
    assert got.returncode == 0, got.stderr
    direct = ldp("estimates", "app.theme", "--format", "json", *local, cwd=elsewhere)
    assert direct.returncode == 0, direct.stderr
    assert json.loads(got.stdout) == json.loads(direct.stdout)
    api = _call(f"{server.url}/v1/estimates/app.theme", token=READ)
    rows = [r for r in json.loads(got.stdout) if "segment" not in r]
    assert [r["ci_low"] for r in rows] == [r["ci_low"] for r in api["estimates"]]
    assert [r["distinguishable_from_zero"] for r in rows] == [
        r["distinguishable_from_zero"] for r in api["estimates"]
    ]

    table = ldp("estimates", "app.theme", cwd=elsewhere, **http)
    assert table.returncode == 0, table.stderr
    assert "n = 400" in table.stdout and "~0" in table.stdout  # nobody: high-contrast
    by = ldp("estimates", "app.theme", "--by", "platform", "--min-segment-reports", "5",
             cwd=elsewhere, **http)  # fmt: skip
    assert by.returncode == 2 and "applies its own LDP_MIN_SEGMENT_REPORTS" in by.stderr

    for fmt in ("csv",):
        over_http, from_redis = elsewhere / f"http.{fmt}", elsewhere / f"redis.{fmt}"
        done = ldp("export", "--all", "--out", str(over_http), cwd=elsewhere, **http)
        assert done.returncode == 0, done.stderr
        assert server.url in done.stderr
        done = ldp("export", "--all", "--out", str(from_redis), *local, cwd=elsewhere)
        assert done.returncode == 0, done.stderr
        assert over_http.read_bytes() == from_redis.read_bytes()
        lines = over_http.read_text().splitlines()
        assert len(lines) > 8 and lines[0].endswith("p_value,distinguishable_from_zero")


def test_without_the_token_or_a_server_the_message_says_what_was_tried(
    server: Server, tmp_path: Path
) -> None:
    refused = ldp("estimates", "app.theme", cwd=tmp_path, LDP_URL=server.url)
    assert refused.returncode == 1
    assert "401" in refused.stderr and "LDP_READ_TOKEN" in refused.stderr
    assert "Traceback" not in refused.stderr
    wrong = ldp("export", "app.theme", "--out", "-", cwd=tmp_path, LDP_URL=server.url,
                LDP_READ_TOKEN="not-the-token-at-all")  # fmt: skip
    assert wrong.returncode == 1 and "not valid" in wrong.stderr
    unknown = ldp("estimates", "app.nothing", cwd=tmp_path, LDP_URL=server.url,
                  LDP_READ_TOKEN=READ)  # fmt: skip
    assert unknown.returncode == 1 and "unknown metric 'app.nothing'" in unknown.stderr


def test_the_estimand_is_asked_of_the_api_and_named(server: Server, tmp_path: Path) -> None:
    """``--estimand population`` reaches the API (the old export answered the reporters'
    intervals whatever was asked): the rows name it and hold the API's population
    intervals; a string metric's refusal is a message and exit 1, not a traceback."""
    http = {"LDP_URL": server.url, "LDP_READ_TOKEN": READ}
    got = ldp("estimates", "app.theme", "--estimand", "population", "--format", "json",
              cwd=tmp_path, **http)  # fmt: skip
    assert got.returncode == 0, got.stderr
    rows = json.loads(got.stdout)
    assert {r["estimand"] for r in rows} == {"population"}
    api = _call(f"{server.url}/v1/estimates/app.theme?estimand=population", token=READ)
    top = [r for r in rows if "segment" not in r]
    assert [r["ci_high"] for r in top] == [r["ci_high"] for r in api["estimates"]]
    table = ldp("estimates", "app.minutes", "--estimand", "population", cwd=tmp_path, **http)
    assert table.returncode == 0 and "estimand population" in table.stdout
    words = {"kind": "string", "max_length": 8, "epsilon": 4.0}
    _call(f"{server.url}/v1/metrics/app.words", "PUT", words, server.admin_token)
    for args in (("estimates", "app.words"), ("export", "app.words", "--out", "-")):
        refused = ldp(*args, "--estimand", "population", cwd=tmp_path, **http)
        assert refused.returncode == 1, refused.stdout
        assert "not offered for string metrics" in refused.stderr
        assert "Traceback" not in refused.stderr
