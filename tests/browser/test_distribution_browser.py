"""A distribution metric's page in a real Chromium: the quantiles-over-time chart.

``ldp_server.serve.Server`` runs gunicorn, an aggregator worker and an embedded Redis;
reports built by the SDK land in six past hours (entries of the metric's stream with
those hours' ids, as the pipeline tests write them), the worker counts them, and
Chromium (Debian's, driven by Playwright) opens the metric's page. The test reads the
traces Plotly drew against ``/v1/estimates/<name>/trend``, hourly and daily, and checks
the page for console errors and requests off the server's origin.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from browser_helpers import Watched, chromium_missing

_missing = chromium_missing()
if _missing:
    pytest.skip(_missing, allow_module_level=True)

import redis  # noqa: E402

from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from ldp_server.serve import Server  # noqa: E402
from ldp_store import keys  # noqa: E402
from tests.http_helpers import answer  # noqa: E402
from tests.ingest_helpers import load_time_spec  # noqa: E402

NAME = "page.load_ms"
SPEC = load_time_spec(4.0, description="page load time (ms)")
HOURS = 6
PER_HOUR = 1500
MEDIANS = (100.0, 150.0, 220.0, 330.0, 500.0, 750.0)  # oldest first: a rising load time
TOL = 1e-9


def _request(url: str, method: str = "GET", body: Any = None, token: str | None = None) -> Any:
    kind, text = answer(url, method, body, token, timeout=10)
    return json.loads(text) if kind == "application/json" else text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The real system with the metric's reports counted in six past hours."""
    data = tmp_path_factory.mktemp("distribution")
    with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s:
        d = _request(f"{s.url}/v1/metrics/{NAME}", "PUT", SPEC, s.admin_token)
        definition = MetricDefinition.from_dict(d)
        assert s.redis_url is not None
        client = redis.Redis.from_url(s.redis_url)
        stream = keys.stream_key(definition.name, definition.version)
        rng = random.Random(5)
        gen = np.random.default_rng(6)
        now_hour = int(time.time()) // 3600 * 3600
        pipe = client.pipeline(transaction=False)
        for age, median in zip(range(HOURS, 0, -1), MEDIANS, strict=True):
            start = (now_hour - age * 3600) * 1000
            for i, v in enumerate(np.clip(gen.lognormal(np.log(median), 0.4, PER_HOUR), 1, 9999)):
                payload = build_report(definition, float(v), rng)["payload"]
                entry = {"p": json.dumps(payload, separators=(",", ":"))}
                pipe.xadd(stream, entry, id=f"{start + i}-0")  # type: ignore[arg-type]
        pipe.execute()
        deadline = time.monotonic() + 60
        while True:
            trend = _request(f"{s.url}/v1/estimates/{NAME}/trend?granularity=hour")
            if sum(w["n"] for w in trend["windows"]) == HOURS * PER_HOUR:
                break
            assert time.monotonic() < deadline, trend
            time.sleep(0.3)
        client.close()
        yield s


def drawn(page: Any) -> dict[str, dict[str, Any]]:
    """The trend chart's traces as Plotly holds them, by ``meta`` (p50…, n)."""
    traces = page.evaluate(
        """() => document.getElementById('trend-chart').data.map((t) => ({
            meta: t.meta, y: t.y, x: t.x,
            plus: t.error_y ? t.error_y.array : null,
            minus: t.error_y ? t.error_y.arrayminus : null,
        }))"""
    )
    return {t["meta"]: t for t in traces}


def close(got: list[float], want: list[float]) -> bool:
    return len(got) == len(want) and all(
        abs(g - w) <= TOL * max(1.0, abs(w)) for g, w in zip(got, want, strict=True)
    )


def test_the_quantiles_over_time_chart_draws_the_trend(watched: Watched, server: Server) -> None:
    """Hourly: one point per window for each quantile, its error bar the window's interval,
    the n bars the windows' n; the medians rise as the populations do. Daily: the windows'
    reports summed into the day windows."""
    page = watched.page
    api = _request(f"{server.url}/v1/estimates/{NAME}/trend?granularity=hour")
    windows = api["windows"]
    assert len(windows) == HOURS
    page.goto(f"{server.url}/ui/metric/{NAME}")
    page.wait_for_function(
        "() => (document.getElementById('trend-chart').data || []).some((t) => t.meta === 'p50')"
    )
    traces = drawn(page)
    assert set(traces) == {"p50", "p90", "p95", "p99", "n"}
    assert traces["n"]["y"] == [w["n"] for w in windows] == [PER_HOUR] * HOURS
    for i, p in enumerate((0.5, 0.9, 0.95, 0.99)):
        at = [w["quantiles"][i] for w in windows]
        assert all(q["p"] == p for q in at)
        t = traces[f"p{p * 100:g}"]
        assert close(t["y"], [q["value"] for q in at])
        assert close(t["plus"], [q["ci_high"] - q["value"] for q in at])
        assert close(t["minus"], [q["value"] - q["ci_low"] for q in at])
        assert all(m >= 0 for m in t["plus"] + t["minus"])
    medians = traces["p50"]["y"]
    assert medians == sorted(medians) and medians[-1] > 3 * medians[0]

    page.click("[data-granularity='day']")
    page.wait_for_function("() => document.body.dataset.granularity === 'day'")
    page.wait_for_function(
        "() => document.getElementById('trend-chart').data.find((t) => t.meta === 'n')"
        f".y.reduce((a, b) => a + b, 0) === {HOURS * PER_HOUR}"
    )
    days = _request(f"{server.url}/v1/estimates/{NAME}/trend?granularity=day")["windows"]
    daily = drawn(page)
    assert daily["n"]["y"] == [w["n"] for w in days]
    assert close(daily["p95"]["y"], [w["quantiles"][2]["value"] for w in days])
    assert page.locator("#trend-error").is_hidden()
    watched.check()
