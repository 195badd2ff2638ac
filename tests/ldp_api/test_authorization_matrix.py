"""The authorization matrix, derived from the OpenAPI document: every route × every kind
of credential (none among them) is refused exactly when the route's ``x-scope`` is not
granted, and a refused request changes nothing (ldp_api/auth.py).

The routes come from ``/openapi.json`` (each operation's ``x-scope``) and the dashboard's
pages from the app's URL map; a route with no scope must be on :data:`OPEN`, so a new
route that forgets its scope fails here (tests/collector/test_collector_openapi.py
already fails a route left out of the document).
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask

from ldp_api import auth
from ldp_server.app import create_server_app
from ldp_store import keys
from ldp_store.auditlog import AUDIT_STREAM, AuditLog
from ldp_store.tokens import KINDS, SCOPES, TokenStore

ADMIN, READ, METRICS = (
    "matrix-admin-token-0001",
    "matrix-read-token-00002",
    "matrix-metrics-tok-003",
)

OPEN = {
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/openapi.json"),
    ("get", "/v1/metrics"),
    ("get", "/v1/metrics/{name}"),
    ("get", "/sdk/ldp-telemetry/{name}"),
    ("get", "/ui/vendor/plotly.min.js"),
    ("get", "/ui/static/{filename}"),
}
"""The routes that need nothing: health, the document, the apps' definitions and SDK, the
dashboard's own assets."""

AUDITED_SCOPES = {"metrics:write", "metrics:delete", "tokens:manage", "audit:read"}
"""Every route of these scopes is an admin action, and so is an export."""

VALUES = {
    "name": "app.none",
    "prefix": "ldp_000000000000",
    "filename": "app.css",
    "rule_id": "r0000000000",
}
"""What a path's variables are filled with (nothing of the kind exists: 404 once through)."""


@dataclass(frozen=True)
class Credential:
    name: str
    text: str | None
    scopes: frozenset[str]
    basic: bool = False

    def headers(self) -> dict[str, str]:
        if self.text is None:
            return {}
        if self.basic:
            pair = base64.b64encode(f"any:{self.text}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        return {"Authorization": f"Bearer {self.text}"}

    def grants(self, scope: str | None, page: bool) -> bool:
        """Whether a route of ``scope`` must let this credential through (Basic is the
        dashboard's: its pages and the read APIs)."""
        if scope is None:
            return True
        return scope in self.scopes and (not self.basic or page or scope == "metrics:read")


def closed_app(redis_url: str) -> Flask:
    return create_server_app(
        {
            "REDIS_URL": redis_url,
            "TESTING": True,
            "ADMIN_TOKEN": ADMIN,
            "READ_TOKEN": READ,
            "METRICS_TOKEN": METRICS,
            "REQUIRE_INGEST_KEY": True,
        }
    )


def credentials(store: TokenStore) -> list[Credential]:
    none: frozenset[str] = frozenset()
    made = [
        Credential("none", None, none),
        Credential("garbage", "not-a-token-of-any-kind", none),
        Credential("unknown scoped", f"ldp_{'0' * 12}_{'A' * 43}", none),
        Credential("LDP_ADMIN_TOKEN", ADMIN, auth.CONFIGURED[0][1]),
        Credential("LDP_READ_TOKEN", READ, auth.CONFIGURED[1][1]),
        Credential("LDP_METRICS_TOKEN", METRICS, auth.CONFIGURED[2][1]),
        Credential("LDP_ADMIN_TOKEN as Basic", ADMIN, auth.CONFIGURED[0][1], basic=True),
    ]
    for scope in SCOPES:
        text, token = store.create(f"only {scope}", {scope})
        made.append(Credential(f"scoped {scope}", text, token.scopes))
    for kind, scopes in KINDS.items():
        text, _ = store.create(kind, scopes)
        made.append(Credential(f"{kind} kind", text, scopes))
        made.append(Credential(f"{kind} kind as Basic", text, scopes, basic=True))
    text, token = store.create("revoked", KINDS["admin"])
    store.revoke(token.id)
    made.append(Credential("revoked admin", text, none))
    past = TokenStore(store.redis, clock=lambda: time.time() - 100)
    text, _ = past.create("expired", KINDS["admin"], expires_in=10)
    made.append(Credential("expired admin", text, none))
    text, _ = store.create("ingest+read", {"ingest", "metrics:read"})
    made.append(Credential("tampered", text[:-2] + "xx", none))
    return made


DERIVED = {
    AUDIT_STREAM.encode(),
    keys.IN_USE.encode(),
    keys.GUARD_UNITS_KEY.encode(),
    *(keys.warm_reads_key(lane).encode() for lane in ("", "light", "heavy")),
}
"""Keys a read may write that hold nothing a request stored: the audit log (it records
the refusals), the versions in use (a scrape's sweep fills it from the counters), the
guard's unit count (a cache of the registry's), the reads kept warm (queries)."""


def snapshot(client: Any) -> dict[bytes, bytes]:
    """Every key's dump but the :data:`DERIVED` ones."""
    return {k: client.dump(k) for k in client.keys("*") if k not in DERIVED}


def operations(app: Flask) -> Iterator[tuple[str, str, dict[str, Any]]]:
    doc = app.test_client().get("/openapi.json").json
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def test_every_admin_action_is_audited(redis_db: Any) -> None:
    """Each route that changes, deletes, exports or manages says its audit action."""
    app = closed_app(redis_db.url)
    for method, path, operation in operations(app):
        admin = operation.get("x-scope") in AUDITED_SCOPES or path.startswith("/v1/export")
        assert bool(operation.get("x-audit")) == admin, (method, path)


def routes(app: Flask) -> Iterator[tuple[str, str, str | None]]:
    """(method, path, scope) of every documented operation and every dashboard page."""
    for method, path, operation in operations(app):
        yield method, path, operation.get("x-scope")
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("dashboard."):
            path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
            yield "get", path, auth.scope_of(app, rule.endpoint)


def test_every_route_refuses_exactly_what_its_scope_does_not_grant(redis_db: Any) -> None:
    app = closed_app(redis_db.url)
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    creds = credentials(store)
    table = list(routes(app))
    open_routes = {(m, p) for m, p, scope in table if scope is None}
    assert open_routes == OPEN, "a route without a scope: give it one, or add it to OPEN"
    assert {scope for _, _, scope in table} - {None} == set(SCOPES)  # each scope is used
    before = snapshot(redis_db.client())
    client = app.test_client()
    wrong = []
    for method, path, scope in table:
        url = re.sub(r"{(\w+)}", lambda m: VALUES[m.group(1)], path)
        # An open route is asked with two credentials (its answer is slow: the document,
        # the charting library); every other with all of them.
        for cred in creds if scope is not None else creds[:2]:
            body = {} if method in ("post", "put") else None
            status = client.open(url, method=method.upper(), json=body, headers=cred.headers())
            refused = status.status_code in (401, 403)
            if refused == cred.grants(scope, path == "/" or path.startswith("/ui/")):
                wrong.append(f"{method.upper()} {path} [{scope}] {cred.name}: {status.status_code}")
    assert not wrong, "\n".join(wrong)
    assert snapshot(redis_db.client()) == before  # nor did what was let through (400s, 404s)
    audited = {e.action for e in AuditLog(redis_db.client()).read(10_000) if e.outcome == "refused"}
    assert audited == {op.get("x-audit") for m, p, op in operations(app) if op.get("x-audit")}
    closed = len(table) - len(OPEN)
    print(f"authorization matrix: {closed} closed routes x {len(creds)} credentials")


@pytest.mark.parametrize("scope", ["ingest", "metrics:read", "prometheus:read"])
def test_without_settings_reads_metrics_and_ingest_stay_open(redis_db: Any, scope: str) -> None:
    app = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True})
    table = [(m, p) for m, p, s in routes(app) if s == scope]
    assert table
    client = app.test_client()
    for method, path in table:
        url = re.sub(r"{(\w+)}", lambda m: VALUES[m.group(1)], path)
        answer = client.open(url, method=method.upper(), json={} if method == "post" else None)
        assert answer.status_code not in (401, 403), (method, path)
