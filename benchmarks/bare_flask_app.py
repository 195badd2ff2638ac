"""The machine's own limit for the collector's job: a bare Flask endpoint, no safeguards.

``bench_collector.py`` runs this under gunicorn with ``collector/gunicorn_conf.py`` (same
worker count and class, same bind style, same access log) beside the real collector::

    LDP_REDIS_URL=redis://127.0.0.1:6379/0 LDP_BIND=127.0.0.1:8001 PYTHONPATH=benchmarks \\
        .venv/bin/python -m gunicorn -c collector/gunicorn_conf.py 'bare_flask_app:create_app()'

``POST /v1/reports`` parses the JSON batch ``{"reports": [...]}`` and appends each report's
payload (compact JSON, as the collector stores it) to ONE stream with one pipelined
round trip of ``XADD``. There is deliberately nothing else: no content-type, size or
strict-JSON checks, no report validation, no replay guard, no backlog check, no
telemetry, no metadata stripping. It is a yardstick, never a service to deploy.
"""

from __future__ import annotations

import json
import os
from typing import Any

import redis
from flask import Flask, request

__all__ = ["STREAM", "create_app"]

STREAM = "bench:bare:reports"
"""The one stream every report goes to (the benchmark deletes it between phases)."""


def create_app() -> Flask:
    """The bare app; Redis at ``LDP_REDIS_URL`` (or ``REDIS_URL``)."""
    app = Flask(__name__)
    client = redis.Redis.from_url(os.environ.get("LDP_REDIS_URL") or os.environ["REDIS_URL"])
    encode = json.JSONEncoder(separators=(",", ":")).encode

    @app.post("/v1/reports")
    def post_reports() -> tuple[dict[str, Any], int]:
        reports = json.loads(request.get_data())["reports"]
        pipe = client.pipeline(transaction=False)
        for report in reports:
            pipe.xadd(STREAM, {"p": encode(report["payload"])})
        pipe.execute()
        return {"accepted": len(reports)}, 202

    @app.get("/readyz")
    def readyz() -> dict[str, str]:
        client.ping()
        return {"status": "ready"}

    return app
