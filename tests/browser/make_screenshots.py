"""Screenshots of the dashboard for the docs, made with a simulated demo population.

    .venv/bin/python tests/browser/make_screenshots.py [--users 30000] [--out docs]

Starts the real system (``ldp_server.serve.Server`` on a free port, embedded Redis in a
temporary folder), defines ``ldp_server.demo``'s metrics, sends a population through the
SDK over real HTTP, waits for the aggregator, then photographs the overview, a metric
page, the explorer and the metric page on a phone-sized screen in Chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import redis
from browser_helpers import chromium_missing, launch
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

from client_sdk import mechanisms
from client_sdk.wire import MetricDefinition, build_report
from ldp_server.demo import define_metrics, run_population, wait_for_counts
from ldp_server.serve import Server
from ldp_store.registry import Registry

ROOT = Path(__file__).resolve().parents[2]

EXTRA_METRICS: dict[str, dict[str, Any]] = {
    "app.notifications": {
        "domain": ["all", "mentions", "none"],
        "epsilon": 1.0,
        "description": "Notification setting; at most 2 reports a day, memoized.",
        "budget": {"reports_per_period": 2, "period": "day"},
        "longitudinal": {"permanent_epsilon": 4.0},
    },
    "session.minutes": {
        "kind": "numeric",
        "range": [0, 120],
        "epsilon": 1.0,
        "description": "Minutes in the app per session.",
        "budget": {"reports_per_period": 4, "period": "day"},
    },
}
"""Metrics beyond the demo's, to show a device budget, memoization and a numeric mean
(defined only where the running version of the wire format knows these fields)."""


def _extra_metrics(server: Server, users: int) -> None:
    """Define EXTRA_METRICS (those the server accepts) and send their reports."""
    accepted = []
    for name, spec in EXTRA_METRICS.items():
        req = urllib.request.Request(
            f"{server.url}/v1/metrics/{name}",
            data=json.dumps(spec).encode(),
            method="PUT",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {server.admin_token}",
            },
        )
        try:
            urllib.request.urlopen(req, timeout=10).close()
            accepted.append(name)
        except urllib.error.HTTPError as exc:
            print(f"skipping {name}: {exc.read().decode()[:200]}", file=sys.stderr)
    # One report per simulated device, each made by the SDK's own build_report (a single
    # Client would be one device, held to the budget). A memoized metric needs each
    # device's secret.
    new_secret = getattr(mechanisms, "new_secret", None)
    rng = random.Random(5)
    for name in accepted:
        definition = MetricDefinition.from_dict(
            json.load(urllib.request.urlopen(f"{server.url}/v1/metrics/{name}", timeout=10))
        )
        batch = []
        for _ in range(users):
            if definition.kind == "numeric":
                value: str | float = min(120.0, rng.lognormvariate(2.6, 0.7))
            else:
                value = rng.choices(definition.domain, [5, 3, 2])[0]
            extra = {"secret": new_secret()} if new_secret and definition.longitudinal else {}
            batch.append(build_report(definition, value, **extra))
        for i in range(0, len(batch), 500):
            req = urllib.request.Request(
                f"{server.url}/v1/reports",
                data=json.dumps({"reports": batch[i : i + 500]}).encode(),
                method="POST",
                headers={"Content-Type": "application/json"},
            )
            urllib.request.urlopen(req, timeout=30).close()


def _ready(page: Page, url: str, selector: str = "main[data-state='ready']") -> None:
    page.goto(url)
    page.wait_for_selector(selector, timeout=30_000)
    page.wait_for_timeout(600)  # let Plotly finish its transitions


def main() -> int:
    """Make the screenshots; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=30_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--metric", default="user.country")
    args = parser.parse_args()
    reason = chromium_missing()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    # One address sends the whole population: the per-source limits would answer 429.
    os.environ["LDP_SOURCE_REQUESTS_PER_SECOND"] = "0"
    os.environ["LDP_SOURCE_REPORTS_PER_MINUTE"] = "0"
    with tempfile.TemporaryDirectory() as tmp, Server(port=0, data_dir=tmp, quiet=True) as server:
        client = redis.Redis.from_url(server.redis_url or "")
        definitions = define_metrics(Registry(client))
        _truth, accepted, dropped, seconds = run_population(server.url, args.users, args.processes)
        print(f"{accepted:,} reports accepted in {seconds:.1f} s, dropped {dropped}")
        per_metric = accepted // len(definitions)
        _extra_metrics(server, args.users // 4)
        wait_for_counts(client, definitions, {d.name: per_metric for d in definitions})
        time.sleep(2)  # the extra metrics' last batch
        with sync_playwright() as pw:
            browser = launch(pw)
            laptop = browser.new_page(viewport={"width": 1280, "height": 860})
            _ready(laptop, server.url + "/", "#overview-table tbody tr")
            laptop.wait_for_timeout(800)
            laptop.screenshot(path=str(args.out / "dashboard-overview.png"))
            _ready(laptop, f"{server.url}/ui/metric/{args.metric}")
            laptop.screenshot(
                path=str(args.out / "dashboard-metric.png"),
                full_page=True,
                clip={"x": 0, "y": 0, "width": 1280, "height": 1320},
            )
            _ready(
                laptop,
                f"{server.url}/ui/metric/{args.metric}/explorer",
                "#explorer[data-state='ready']",
            )
            laptop.screenshot(path=str(args.out / "dashboard-explorer.png"), full_page=True)
            if "session.minutes" in EXTRA_METRICS:
                try:
                    _ready(laptop, f"{server.url}/ui/metric/session.minutes")
                    laptop.screenshot(path=str(args.out / "dashboard-numeric.png"))
                except PlaywrightError as exc:
                    print(f"no numeric page: {exc}", file=sys.stderr)
            phone = browser.new_page(
                viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True
            )
            _ready(phone, f"{server.url}/ui/metric/app.theme")
            phone.screenshot(path=str(args.out / "dashboard-phone.png"))
            browser.close()
    for name in ("overview", "metric", "explorer", "numeric", "phone"):
        print(args.out / f"dashboard-{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
