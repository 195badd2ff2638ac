"""What authorization costs: µs per check, and ingest throughput with ingest keys on vs off.

    python benchmarks/bench_authorization.py --rounds 5 --requests 200 --batch 100

One run, one embedded redis-server, two apps of ``ldp serve``'s web service
(``create_server_app``) in this process: one with ``LDP_REQUIRE_INGEST_KEY`` off (as
today), one with it on, whose requests carry a scoped ingest key.

* **per check** — :func:`ldp_api.auth.check`, the ``before_request`` hook, timed alone in
  a request context (``--checks`` calls each, median of 5): ingest open; ingest with a
  key (the worker's cache holds it: the usual case); the same with the cache off (one
  Redis ``HGETALL`` each time: a worker's first use of a token each half second); a read
  with a scoped read token; a read with the configured ``LDP_READ_TOKEN``; an admin
  route with the configured admin token.
* **per project hook** — :func:`ldp_api.projects.enter`, the hook after the check that
  finds the request's project and qualifies its metric name, timed alone (a scoped key
  and a scoped read token of project ``shop``), and a project's reports-per-minute quota
  check (``collector.quotas``: one pipelined ``INCRBY`` + ``EXPIRE``, only when
  ``LDP_PROJECT_QUOTAS`` sets one).
* **ingest throughput** — ``POST /v1/reports`` of ``--batch`` reports built with the SDK,
  ``--requests`` per phase, through Flask's test client (no HTTP server: the hook's share
  of the work is larger here than behind gunicorn, so this ratio is the pessimistic one);
  off and on take turns ``--rounds`` times, streams and replay sets emptied before each
  phase. Prints reports/s of each phase, on ÷ off per round and the median.

The load average is printed at the start and the end (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flask import Flask, request

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from collector import quotas  # noqa: E402
from ldp_api import auth, projects  # noqa: E402
from ldp_server.app import create_server_app  # noqa: E402
from ldp_store.embedded import EmbeddedRedis  # noqa: E402
from ldp_store.tokens import KINDS, TokenStore  # noqa: E402

ADMIN = "bench-authorization-admin-token"
READ = "bench-authorization-read-token-1"
SPEC = {"domain": ["a", "b", "c", "d"], "epsilon": 1.0, "mechanism": "grr"}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def per_check(app: Flask, path: str, method: str, token: str | None, checks: int) -> float:
    """Median over 5 runs of µs per ``auth.check()`` for one request."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    runs = []
    with app.test_request_context(path, method=method, headers=headers):
        assert auth.check() is None, path  # let through
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(checks):
                auth.check()
            runs.append((time.perf_counter() - start) / checks * 1e6)
    return statistics.median(runs)


def per_hook(app: Flask, path: str, method: str, token: str | None, checks: int) -> float:
    """Median over 5 runs of µs per ``projects.enter()`` (after one ``auth.check()``)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    runs = []
    with app.test_request_context(path, method=method, headers=headers):
        assert auth.check() is None, path
        name = (request.view_args or {}).get("name")
        assert projects.enter() is None, path
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(checks):
                if name is not None:
                    request.view_args["name"] = name  # type: ignore[index]
                projects.enter()
            runs.append((time.perf_counter() - start) / checks * 1e6)
    return statistics.median(runs)


def per_quota(redis: Any, checks: int) -> float:
    """Median over 5 runs of µs per reports-per-minute quota check (within the quota)."""
    quota = quotas.ProjectQuotas(quotas.parse_quotas({"shop": {"reports_per_minute": 10**12}}))
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(checks):
            quota.admit_reports(redis, "shop", 100)
        runs.append((time.perf_counter() - start) / checks * 1e6)
    return statistics.median(runs)


def phase(app: Flask, bodies: list[dict[str, Any]], key: str | None, redis: Any) -> float:
    """Reports/s of posting ``bodies`` (streams and replay sets emptied first)."""
    for k in redis.scan_iter("*{m:*"):
        redis.delete(k)
    client = app.test_client()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    start = time.perf_counter()
    for body in bodies:
        answer = client.post("/v1/reports", json=body, headers=headers)
        assert answer.status_code == 202, answer.json
    return sum(len(b["reports"]) for b in bodies) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--checks", type=int, default=20_000)
    args = parser.parse_args()
    print(f"load average at start (1, 5, 15 min): {load()}")
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedRedis(Path(folder)).start()
        try:
            run(server, args)
        finally:
            server.stop()
    print(f"load average at end: {load()}")


def run(server: EmbeddedRedis, args: argparse.Namespace) -> None:
    base = {
        "REDIS_URL": server.url,
        "ADMIN_TOKEN": ADMIN,
        "READ_TOKEN": READ,
        "SOURCE_REQUESTS_PER_SECOND": 0,
        "SOURCE_REPORTS_PER_MINUTE": 0,
    }
    off = create_server_app(base)
    on = create_server_app({**base, "REQUIRE_INGEST_KEY": True})
    redis = server.client()
    store = TokenStore(redis)
    key, _ = store.create("bench-app", KINDS["ingest"])
    reader, _ = store.create("bench-reader", KINDS["read"])
    off.test_client().put(
        "/v1/metrics/bench.m", json=SPEC, headers={"Authorization": f"Bearer {ADMIN}"}
    )

    n = args.checks
    print(f"\nµs per authorization check (median of 5 × {n} calls):")
    rows = [
        ("ingest, keys off (open)", off, "/v1/reports", "POST", None),
        ("ingest, scoped key, cached", on, "/v1/reports", "POST", key),
        ("read, scoped read token, cached", on, "/v1/estimates/bench.m", "GET", reader),
        ("read, configured LDP_READ_TOKEN", on, "/v1/estimates/bench.m", "GET", READ),
        ("admin route, configured admin token", on, "/v1/metrics/bench.m", "PUT", ADMIN),
    ]
    for label, app, path, method, token in rows:
        print(f"  {label:40s} {per_check(app, path, method, token, n):8.2f}")
    policy = auth.POLICY.get(on)
    policy.tokens.cache_seconds = 0.0  # every check reads Redis
    uncached = per_check(on, "/v1/reports", "POST", key, max(n // 20, 200))
    policy.tokens.cache_seconds = 0.5
    print(f"  {'ingest, scoped key, cache off (HGETALL)':40s} {uncached:8.2f}")

    shop_key, _ = store.create("shop-app", KINDS["ingest"], "shop")
    shop_reader, _ = store.create("shop-reader", KINDS["read"], "shop")
    print(f"\nµs per project hook and quota check (median of 5 × {n} calls):")
    hooks = [
        ("project hook, ingest, shop's key", "/v1/reports", "POST", shop_key),
        ("project hook, read, shop's read token", "/v1/estimates/bench.m", "GET", shop_reader),
        ("project hook, read, default project", "/v1/estimates/bench.m", "GET", reader),
    ]
    for label, path, method, token in hooks:
        print(f"  {label:40s} {per_hook(on, path, method, token, n):8.2f}")
    quota_checks = max(n // 20, 200)
    print(f"  {'reports/minute quota (INCRBY+EXPIRE)':40s} {per_quota(redis, quota_checks):8.2f}")

    definition = MetricDefinition.from_dict(off.test_client().get("/v1/metrics/bench.m").json or {})
    rng = random.Random(39)
    print(f"\ningest: {args.requests} requests × {args.batch} reports per phase")
    ratios = []
    for i in range(args.rounds):
        found = {}
        for name, app, sent in (("off", off, None), ("on", on, key)):
            bodies = [
                {
                    "reports": [
                        build_report(definition, rng.choice("abcd"), rng) for _ in range(args.batch)
                    ]
                }
                for _ in range(args.requests)
            ]
            found[name] = phase(app, bodies, sent, redis)
        ratios.append(found["on"] / found["off"])
        print(
            f"  round {i + 1}: off {found['off']:9.0f} reports/s, on {found['on']:9.0f} "
            f"reports/s, on ÷ off {ratios[-1]:.3f}"
        )
    spread = (max(ratios) - min(ratios)) / statistics.median(ratios)
    print(f"  median on ÷ off: {statistics.median(ratios):.3f} (spread {spread:.3f})")


if __name__ == "__main__":
    main()
