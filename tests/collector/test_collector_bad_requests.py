"""Anything a client sends gets a 4xx with a useful JSON message, never a 5xx.

Each case is followed by a valid request, which must still be accepted: a bad request
leaves nothing behind and the server keeps serving.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from collector_helpers import ADMIN, PAGES_SPEC, THEME_SPEC, define, make_app, reports
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from client_sdk.wire import MetricDefinition
from collector import settings
from ldp_store import keys, streams

JSON = "application/json"


@dataclass
class Ctx:
    """What a case may use: the client and the two metrics' definitions."""

    client: FlaskClient
    theme: MetricDefinition
    pages: MetricDefinition

    def report(self, **changes: Any) -> dict[str, Any]:
        """A valid theme report with ``changes`` applied (None deletes a field)."""
        base = reports(self.theme, 1)[0]
        base.update(changes)
        return {k: v for k, v in base.items() if v is not None}

    def post_raw(self, body: bytes, content_type: str | None = JSON, **kw: Any) -> TestResponse:
        return self.client.post("/v1/reports", data=body, content_type=content_type, **kw)

    def post_reports(self, items: list[Any]) -> TestResponse:
        return self.client.post("/v1/reports", json={"reports": items})

    def post_text(self, text: str) -> TestResponse:
        return self.post_raw(text.encode())


def _huge_version(c: Ctx) -> TestResponse:
    report = c.report()
    text = json.dumps({"reports": [report]}).replace(
        f'"version": {report["version"]}', '"version": ' + "1" + "0" * 400
    )
    return c.post_text(text)


def _duplicate(c: Ctx, key: str, first: Any, inside: str | None = None) -> TestResponse:
    """A valid report with ``key`` written twice: first ``first``, then its real value."""
    report = c.report()
    target = report[inside] if inside else report
    text = json.dumps(target)
    target_text = "{" + json.dumps(key) + ": " + json.dumps(first) + ", " + text[1:]
    whole = json.dumps({"reports": [report]})
    return c.post_text(whole.replace(text, target_text, 1))


def _oue_bits(c: Ctx, bits: str) -> TestResponse:
    report = reports(c.pages, 1)[0]
    return c.post_reports([{**report, "payload": {"b": bits}}])


def _nan_in_payload(c: Ctx) -> TestResponse:
    text = json.dumps({"reports": [c.report(payload={"v": 0})]}).replace('"v": 0', '"v": NaN')
    return c.post_text(text)


def _many_reports(c: Ctx) -> TestResponse:
    return c.post_reports(reports(c.theme, settings.MAX_REPORTS + 1))


def _oversized(c: Ctx) -> TestResponse:
    filler = "x" * settings.MAX_BODY_BYTES
    return c.post_text(json.dumps({"reports": [c.report()], "pad": filler}))


def _chunked_oversized(c: Ctx) -> TestResponse:
    # No Content-Length: Werkzeug enforces the limit while reading the stream (a server
    # that de-chunks, like gunicorn, marks the input as terminated).
    body = json.dumps({"reports": [c.report()], "pad": "x" * settings.MAX_BODY_BYTES}).encode()
    return c.client.post(
        "/v1/reports",
        input_stream=io.BytesIO(body),
        content_type=JSON,
        headers={"Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},
    )


Case = tuple[str, Callable[[Ctx], TestResponse], int, str]

CASES: list[Case] = [
    # -- the body is not JSON, or not the JSON we take ---------------------------------------
    ("malformed JSON", lambda c: c.post_text('{"reports": ['), 400, "malformed JSON"),
    ("trailing garbage", lambda c: c.post_text('{"reports": []} x'), 400, "malformed JSON"),
    ("empty body", lambda c: c.post_raw(b""), 400, "empty"),
    ("whitespace body", lambda c: c.post_raw(b"  \n"), 400, "empty"),
    ("text/plain", lambda c: c.post_raw(b'{"reports": []}', "text/plain"), 415, "JSON"),
    ("no content type", lambda c: c.post_raw(b'{"reports": []}', None), 415, "JSON"),
    ("form", lambda c: c.client.post("/v1/reports", data={"reports": "x"}), 415, "JSON"),
    ("latin-1", lambda c: c.post_raw(b"{}", f"{JSON}; charset=latin-1"), 415, "UTF-8"),
    ("gzip", lambda c: c.post_raw(b"{}", headers={"Content-Encoding": "gzip"}), 415, "compress"),
    ("non-UTF-8", lambda c: c.post_raw(b'{"reports": ["\xff\xfe"]}'), 400, "UTF-8"),
    ("UTF-8 BOM", lambda c: c.post_raw(b'\xef\xbb\xbf{"reports": []}'), 400, "malformed"),
    # -- a key twice in one object: which did the client mean? (json.loads keeps the last)
    (
        "duplicate top key",
        lambda c: c.post_text('{"reports": [], "reports": []}'),
        400,
        '"reports"',
    ),
    ("duplicate version", lambda c: _duplicate(c, "version", 99), 400, 'duplicate key "version"'),
    ("duplicate payload key", lambda c: _duplicate(c, "v", 2, inside="payload"), 400, 'key "v"'),
    ("deep nesting", lambda c: c.post_text("[" * 100_000 + "]" * 100_000), 400, "too deep"),
    ("NaN", lambda c: c.post_text('{"reports": [NaN]}'), 400, "NaN"),
    ("Infinity", lambda c: c.post_text('{"reports": [Infinity]}'), 400, "Infinity"),
    ("-Infinity", lambda c: c.post_text('{"reports": [-Infinity]}'), 400, "Infinity"),
    ("NaN in a payload", _nan_in_payload, 400, "NaN"),
    ("1e400", lambda c: c.post_text('{"reports": [1e400]}'), 400, "finite"),
    ("10**400 as version", _huge_version, 400, "out of range"),
    ("10**5000", lambda c: c.post_text("[" + "9" * 5000 + "]"), 400, "out of range"),
    # -- JSON of the wrong shape ---------------------------------------------------------------
    ("a list body", lambda c: c.post_text("[]"), 400, "object"),
    ("a string body", lambda c: c.post_text('"reports"'), 400, "object"),
    ("no reports", lambda c: c.post_text("{}"), 400, "missing 'reports'"),
    ("extra top level", lambda c: c.post_text('{"reports": [], "device": 1}'), 400, "device"),
    ("reports not a list", lambda c: c.post_text('{"reports": {}}'), 400, "list"),
    ("reports empty", lambda c: c.post_text('{"reports": []}'), 400, "empty"),
    ("too many reports", _many_reports, 413, "too many"),
    ("oversized body", _oversized, 413, "too large"),
    ("oversized chunked body", _chunked_oversized, 413, "too large"),
    # -- reports that will never be valid ----------------------------------------------------
    ("report not an object", lambda c: c.post_reports([[1, 2]]), 400, "must be an object"),
    ("missing id", lambda c: c.post_reports([c.report(id=None)]), 400, "missing ['id']"),
    ("missing payload", lambda c: c.post_reports([c.report(payload=None)]), 400, "missing"),
    ("extra field", lambda c: c.post_reports([c.report(device_id="d-1")]), 400, "device_id"),
    ("client time", lambda c: c.post_reports([c.report(ts=1.5e9)]), 400, "unknown fields"),
    ("version string", lambda c: c.post_reports([c.report(version="1")]), 400, "'version'"),
    ("version float", lambda c: c.post_reports([c.report(version=1.0)]), 400, "'version'"),
    ("version bool", lambda c: c.post_reports([c.report(version=True)]), 400, "'version'"),
    ("version 0", lambda c: c.post_reports([c.report(version=0)]), 400, "'version'"),
    ("version -1", lambda c: c.post_reports([c.report(version=-1)]), 400, "'version'"),
    ("metric number", lambda c: c.post_reports([c.report(metric=5)]), 400, "'metric'"),
    ("id number", lambda c: c.post_reports([c.report(id=12)]), 400, "'id'"),
    ("id upper hex", lambda c: c.post_reports([c.report(id="AB" * 16)]), 400, "'id'"),
    ("id short", lambda c: c.post_reports([c.report(id="ab" * 8)]), 400, "'id'"),
    ("unknown metric", lambda c: c.post_reports([c.report(metric="no.such")]), 400, "unknown"),
    ("unknown version", lambda c: c.post_reports([c.report(version=99)]), 400, "version 99"),
    ("bad metric name", lambda c: c.post_reports([c.report(metric="A{b}")]), 400, "unknown"),
    ("lone surrogate", lambda c: c.post_text('{"reports": [{"metric": "\\ud800"}]}'), 400, "id"),
    ("payload a list", lambda c: c.post_reports([c.report(payload=[0])]), 400, "object"),
    ("payload extra", lambda c: c.post_reports([c.report(payload={"v": 0, "x": 1})]), 400, "x"),
    ("value string", lambda c: c.post_reports([c.report(payload={"v": "0"})]), 400, "integer"),
    ("value float", lambda c: c.post_reports([c.report(payload={"v": 0.0})]), 400, "integer"),
    ("value bool", lambda c: c.post_reports([c.report(payload={"v": False})]), 400, "integer"),
    ("negative index", lambda c: c.post_reports([c.report(payload={"v": -1})]), 400, "outside"),
    ("index = k", lambda c: c.post_reports([c.report(payload={"v": 3})]), 400, "outside"),
    ("huge index", lambda c: c.post_reports([c.report(payload={"v": 10**30})]), 400, "outside"),
    ("OUE too many bits", lambda c: _oue_bits(c, "AAAAAAAA"), 400, "20 bits"),
    ("OUE too few bits", lambda c: _oue_bits(c, "AAA"), 400, "20 bits"),
    ("OUE decodes short", lambda c: _oue_bits(c, "AA=="), 400, "1 bytes, not 3"),
    ("OUE padding bits set", lambda c: _oue_bits(c, "AAAP"), 400, "must be 0"),
    ("OUE not base64", lambda c: _oue_bits(c, "A*A="), 400, "base64"),
    ("OUE not a string", lambda c: _oue_bits(c, 7), 400, "base64"),  # type: ignore[arg-type]
    # -- routing and the other endpoints ----------------------------------------------------
    ("GET reports", lambda c: c.client.get("/v1/reports"), 405, "not allowed"),
    ("PATCH metric", lambda c: c.client.patch("/v1/metrics/app.theme"), 405, "not allowed"),
    ("DELETE metric, no token", lambda c: c.client.delete("/v1/metrics/app.theme"), 401, "token"),
    ("unknown path", lambda c: c.client.get("/v1/report"), 404, "no such endpoint"),
    ("unknown metric GET", lambda c: c.client.get("/v1/metrics/nope"), 404, "unknown metric"),
    ("version=abc", lambda c: c.client.get("/v1/metrics/app.theme?version=abc"), 400, "version"),
    ("version=0", lambda c: c.client.get("/v1/metrics/app.theme?version=0"), 400, "version"),
    ("version=-1", lambda c: c.client.get("/v1/metrics/app.theme?version=-1"), 400, "version"),
    ("version=99", lambda c: c.client.get("/v1/metrics/app.theme?version=99"), 404, "version 99"),
    (
        "PUT NaN epsilon",
        lambda c: c.client.put(
            "/v1/metrics/x",
            data='{"domain": ["a", "b"], "epsilon": NaN}',
            content_type=JSON,
            headers=ADMIN,
        ),
        400,
        "NaN",
    ),
    (
        "PUT text/plain",
        lambda c: c.client.put(
            "/v1/metrics/x", data="{}", content_type="text/plain", headers=ADMIN
        ),
        415,
        "JSON",
    ),
    (  # what `curl -d` sends (issue 36: a docs example answered 415 without a way out)
        "PUT as curl -d sends it",
        lambda c: c.client.put(
            "/v1/metrics/x",
            data='{"domain": ["a", "b"], "epsilon": 1}',
            content_type="application/x-www-form-urlencoded",
            headers=ADMIN,
        ),
        415,
        "with curl: -H 'Content-Type: application/json'",
    ),
    (
        "PUT bad name",
        lambda c: c.client.put("/v1/metrics/Bad%20Name", json=THEME_SPEC, headers=ADMIN),
        400,
        "metric name",
    ),
]


@pytest.fixture
def ctx(redis_db: Any) -> Ctx:
    app: Flask = make_app(redis_db.url)
    client = app.test_client()
    return Ctx(
        client, define(client, "app.theme", THEME_SPEC), define(client, "app.pages", PAGES_SPEC)
    )


@pytest.mark.parametrize(("case", "send", "status", "says"), CASES, ids=[c[0] for c in CASES])
def test_bad_request_gets_a_4xx_with_a_useful_message(
    ctx: Ctx, redis_db: Any, case: str, send: Callable[[Ctx], TestResponse], status: int, says: str
) -> None:
    response = send(ctx)
    assert response.status_code == status, (case, response.json)
    body = response.json
    assert isinstance(body, dict) and isinstance(body["details"], list), body
    text = " ".join([body["error"], *body["details"], *map(str, body.get("rejected", []))])
    assert says.lower() in text.lower(), (case, body)
    if response.status_code == 400 and "rejected" in body:  # no valid report at all
        assert body["error"] == "no valid report in the request"
        assert [r["index"] for r in body["rejected"]] == list(range(len(body["rejected"])))
        assert body["details"][0].startswith("reports[0]: ")
    # Nothing was stored, and the server keeps serving.
    stream = keys.stream_key(ctx.theme.name, ctx.theme.version)
    assert streams.length(redis_db.client(), stream) == 0
    after = ctx.post_reports(reports(ctx.theme, 2))
    assert after.status_code == 202 and after.json["accepted"] == 2
    assert streams.length(redis_db.client(), stream) == 2


def test_many_bad_reports_are_each_listed(ctx: Ctx) -> None:
    bad = [ctx.report(payload={"v": i + 3}) for i in range(settings.MAX_REPORTS)]
    response = ctx.post_reports(bad)
    assert response.status_code == 400
    assert len(response.json["rejected"]) == settings.MAX_REPORTS
    assert response.json["details"][-1].startswith(f"reports[{settings.MAX_REPORTS - 1}]: ")


def test_limits_follow_the_configuration(redis_db: Any) -> None:
    client = make_app(redis_db.url, MAX_REPORTS=3, MAX_BODY_BYTES=2000).test_client()
    theme = define(client, "app.theme", THEME_SPEC)
    assert client.post("/v1/reports", json={"reports": reports(theme, 3)}).status_code == 202
    too_many = client.post("/v1/reports", json={"reports": reports(theme, 4)})
    assert too_many.status_code == 413 and "at most 3" in too_many.json["details"][0]
    big = client.post("/v1/reports", json={"reports": reports(theme, 1), "x": "y" * 2000})
    assert big.status_code == 413 and "at most 2000" in big.json["details"][0]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_of_exactly_the_limit_is_accepted_one_more_byte_is_not(
    redis_db: Any, chunked: bool
) -> None:
    limit = 2000
    client = make_app(redis_db.url, MAX_BODY_BYTES=limit).test_client()
    theme = define(client, "app.theme", THEME_SPEC)

    def post(size: int) -> TestResponse:
        body = json.dumps({"reports": reports(theme, 1)}).encode()
        body += b" " * (size - len(body))  # JSON allows trailing whitespace
        assert len(body) == size
        if not chunked:
            return client.post("/v1/reports", data=body, content_type=JSON)
        return client.post(
            "/v1/reports",
            input_stream=io.BytesIO(body),
            content_type=JSON,
            environ_overrides={"wsgi.input_terminated": True},
        )

    assert post(limit).status_code == 202
    assert post(limit + 1).status_code == 413
    assert post(limit - 1).status_code == 202
