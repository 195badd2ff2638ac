"""The machine's own limit for the collector's job: a bare Flask endpoint, no safeguards.

``bench_collector.py`` runs this under gunicorn with ``collector/gunicorn_conf.py`` (same
worker count and class, same bind style, same access log) beside the real collector::

    LDP_REDIS_URL=redis://127.0.0.1:6379/0 LDP_BIND=127.0.0.1:8001 PYTHONPATH=benchmarks \\
        .venv/bin/python -m gunicorn -c collector/gunicorn_conf.py 'bare_flask_app:create_app()'

``POST /v1/reports`` parses the JSON batch ``{"reports": [...]}`` and appends each report's
payload (compact JSON, as the collector stores it) to ONE stream with ONE command: a Lua
script (:data:`APPEND`) that XADDs its arguments, as the collector also writes a batch
with one script call. There is deliberately nothing else: no content-type, size or
strict-JSON checks, no report validation, no replay guard, no backlog check, no
telemetry, no metadata stripping. It is a yardstick, never a service to deploy.

It is meant as a ceiling: the collector's job with every safeguard taken out and the
least Python per report. (The first version pipelined one ``XADD`` per report from
Python: redis-py's packing of 500 commands and parsing of 500 replies cost more than the
collector's one script call, so "bare" was sometimes *slower* than the collector.)
"""

from __future__ import annotations

import json
import os
from typing import Any

import redis
from flask import Flask, request

__all__ = ["APPEND", "STREAM", "create_app"]

STREAM = "bench:bare:reports"
"""The one stream every report goes to (the benchmark deletes it between phases)."""

APPEND = """
for i = 1, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'p', ARGV[i])
end
return #ARGV
"""
"""XADD every argument to the stream KEYS[1]: a batch in one command and one reply."""


def create_app() -> Flask:
    """The bare app; Redis at ``LDP_REDIS_URL`` (or ``REDIS_URL``)."""
    app = Flask(__name__)
    client = redis.Redis.from_url(os.environ.get("LDP_REDIS_URL") or os.environ["REDIS_URL"])
    encode = json.JSONEncoder(separators=(",", ":")).encode
    append = client.register_script(APPEND)

    @app.post("/v1/reports")
    def post_reports() -> tuple[dict[str, Any], int]:
        reports = json.loads(request.get_data())["reports"]
        accepted = append(keys=[STREAM], args=[encode(r["payload"]) for r in reports])
        return {"accepted": accepted}, 202

    @app.get("/readyz")
    def readyz() -> dict[str, str]:
        client.ping()
        return {"status": "ready"}

    return app
