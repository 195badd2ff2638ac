"""Helpers of the collector tests (imported by their conftest and test modules)."""

from __future__ import annotations

import random
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from client_sdk.wire import MetricDefinition, build_report
from collector import create_app

TOKEN = "test-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}

THEME_SPEC = {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"}
PAGES_SPEC = {"domain": [f"page-{i}" for i in range(20)], "epsilon": 2.0, "mechanism": "oue"}


def make_app(redis_url: str, **config: Any) -> Flask:
    """A collector app on ``redis_url`` with the test token and ``config`` on top."""
    return create_app({"REDIS_URL": redis_url, "ADMIN_TOKEN": TOKEN, "TESTING": True, **config})


def define(client: FlaskClient, name: str, spec: dict[str, Any]) -> MetricDefinition:
    """Create (or keep) a metric through the API and return its definition."""
    response = client.put(f"/v1/metrics/{name}", json=spec, headers=ADMIN)
    assert response.status_code in (200, 201), response.json
    return MetricDefinition.from_dict(response.json)


def reports(
    definition: MetricDefinition, n: int, seed: int = 1, value: int | None = None
) -> list[dict[str, Any]]:
    """``n`` valid reports made with the SDK's own ``build_report`` (fresh random ids)."""
    rng = random.Random(seed)
    return [
        build_report(definition, value if value is not None else rng.randrange(definition.k), rng)
        for _ in range(n)
    ]


def post_accepted(
    client: FlaskClient, batch: list[Any], accepted: int, duplicates: int = 0
) -> None:
    """POST ``batch`` to ``/v1/reports``: a 202 with these counts and nothing rejected."""
    response = client.post("/v1/reports", json={"reports": batch})
    assert response.status_code == 202
    assert response.json == {"accepted": accepted, "duplicates": duplicates, "rejected": []}


def scan_redis(server: Any) -> list[tuple[bytes, list[bytes]]]:
    """Every key of ``server`` with every value in it, whatever its type."""
    r = server.client()
    found: list[tuple[bytes, list[bytes]]] = []
    for key in r.scan_iter(count=1000):
        kind = r.type(key).decode()
        values: list[bytes]
        if kind == "string":
            values = [r.get(key) or b""]
        elif kind == "hash":
            values = [x for pair in r.hgetall(key).items() for x in pair]
        elif kind == "set":
            values = list(r.smembers(key))
        elif kind == "list":
            values = list(r.lrange(key, 0, -1))
        elif kind == "zset":
            values = [m for m, _ in r.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            values = []
            for entry_id, fields in r.xrange(key):
                values.append(entry_id)
                values += [x for pair in fields.items() for x in pair]
        else:
            raise AssertionError(f"unexpected key type {kind} of {key!r}")
        found.append((key, values))
    return found
