"""The audit log (ldp_store/auditlog.py, ldp_api/auditing.py): every admin action with
actor, project, target, outcome and time; refused and failed ones too; no device data;
retention and the cap; the API, the dashboard page."""

from __future__ import annotations

import base64
from typing import Any

from collector_helpers import THEME_SPEC
from flask.testing import FlaskClient

from client_sdk.wire import MetricDefinition, build_report
from ldp_server.app import create_server_app
from ldp_store.auditlog import AUDIT_STREAM, FIELDS, AuditLog, AuditRecord
from ldp_store.tokens import KINDS, TokenStore

ADMIN = "audit-admin-token-000111"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def actions(client: FlaskClient, token: str = ADMIN) -> list[tuple[str, str, str, str]]:
    """(action, actor, target, outcome) of every entry, oldest first."""
    page = client.get("/v1/audit-log?limit=1000", headers=bearer(token))
    assert page.status_code == 200, page.json
    return [(e["action"], e["actor"], e["target"], e["outcome"]) for e in page.json["entries"]][
        ::-1
    ]


def test_each_admin_action_is_logged_with_who_what_and_how(redis_db: Any) -> None:
    app = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True, "ADMIN_TOKEN": ADMIN})
    client = app.test_client()
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    writer, writer_token = store.create("deploy", {"metrics:write"})
    assert (
        client.put("/v1/metrics/app.theme", json=THEME_SPEC, headers=bearer(ADMIN)).status_code
        == 201
    )
    assert (
        client.put("/v1/metrics/app.theme", json=THEME_SPEC, headers=bearer(writer)).status_code
        == 200
    )
    assert client.post("/v1/metrics/app.theme/retire", headers=bearer(writer)).status_code == 200
    assert client.post("/v1/metrics/app.theme/unretire", headers=bearer(ADMIN)).status_code == 200
    # Refused: a token without the scope (named by its prefix), and no token at all.
    assert client.delete("/v1/metrics/app.theme", headers=bearer(writer)).status_code == 403
    assert client.delete("/v1/metrics/app.theme").status_code == 401
    assert client.post("/v1/metrics/app.none/retire", headers=bearer(ADMIN)).status_code == 404
    assert client.get("/v1/export/app.theme", headers=bearer(ADMIN)).status_code == 200
    made = client.post("/v1/tokens", json={"name": "ios", "kind": "ingest"}, headers=bearer(ADMIN))
    prefix = made.json["prefix"]
    assert client.post(f"/v1/tokens/{prefix}/revoke", headers=bearer(ADMIN)).status_code == 200
    # Reports and reads of estimates are no admin actions: not logged.
    definition = MetricDefinition.from_dict(client.get("/v1/metrics/app.theme").json)
    report = build_report(definition, "dark")
    assert client.post("/v1/reports", json={"reports": [report]}).status_code == 202
    assert client.get("/v1/estimates/app.theme").status_code == 200

    w = writer_token.prefix
    assert actions(client) == [
        ("metric.create", "admin-token", "app.theme", "ok"),
        ("metric.change", w, "app.theme", "ok"),
        ("metric.retire", w, "app.theme", "ok"),
        ("metric.unretire", "admin-token", "app.theme", "ok"),
        ("metric.delete", w, "app.theme", "refused"),
        ("metric.delete", "anonymous", "app.theme", "refused"),
        ("metric.retire", "admin-token", "app.none", "failed"),
        ("metric.export", "admin-token", "app.theme", "ok"),
        ("token.create", "admin-token", prefix, "ok"),
        ("token.revoke", "admin-token", prefix, "ok"),
    ]
    # Nothing of a device or a request's origin: exactly the fields of an entry.
    raw = redis_db.client().xrange(AUDIT_STREAM)
    assert {k.decode() for _, fields in raw for k in fields} == set(FIELDS)
    dump = b" ".join(v for _, fields in raw for v in fields.values())
    assert report["id"].encode() not in dump and b"127.0.0.1" not in dump
    assert made.json["token"].encode() not in dump


def test_reading_needs_audit_read_and_pages(redis_db: Any) -> None:
    app = create_server_app({"REDIS_URL": redis_db.url, "TESTING": True, "ADMIN_TOKEN": ADMIN})
    client = app.test_client()
    log = AuditLog(redis_db.client())
    for i in range(5):
        log.append(AuditRecord("metric.retire", "admin-token", "default", f"app.m{i}", "ok", 200))
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    reader, _ = store.create("r", KINDS["read"])
    auditor, _ = store.create("a", {"audit:read"})
    first = client.get("/v1/audit-log?limit=2", headers=bearer(auditor)).json
    assert [e["target"] for e in first["entries"]] == ["app.m4", "app.m3"]
    rest = client.get(f"/v1/audit-log?limit=10&before={first['next']}", headers=bearer(auditor))
    assert [e["target"] for e in rest.json["entries"]][:3] == ["app.m2", "app.m1", "app.m0"]
    assert client.get("/v1/audit-log", headers=bearer(reader)).status_code == 403
    assert client.get("/v1/audit-log?limit=0", headers=bearer(auditor)).status_code == 400
    assert client.get("/v1/audit-log?before=x", headers=bearer(auditor)).status_code == 400
    # The oldest possible cursor: nothing before it (was a 503 from Redis, schemathesis).
    empty = client.get("/v1/audit-log?before=0-0", headers=bearer(auditor))
    assert empty.status_code == 200 and empty.json["entries"] == []
    # The dashboard's page: the browser's Basic credentials, audit:read only.
    basic = base64.b64encode(f"x:{auditor}".encode()).decode()
    page = client.get("/ui/audit", headers={"Authorization": f"Basic {basic}"})
    assert page.status_code == 200 and b"app.m4" in page.data
    basic = base64.b64encode(f"x:{reader}".encode()).decode()
    assert client.get("/ui/audit", headers={"Authorization": f"Basic {basic}"}).status_code == 401


def test_retention_and_the_cap(redis_db: Any) -> None:
    log = AuditLog(redis_db.client(), retention_days=30, max_entries=3)
    entry = AuditRecord("token.create", "admin-token", "default", "ldp_0", "ok", 201)
    for _ in range(5):
        log.append(entry)
    assert len(log.read(100)) == 3  # the cap: the oldest went
    redis_db.client().delete(AUDIT_STREAM)
    now_ms = int(redis_db.client().time()[0]) * 1000
    for days in (31, 29):  # entries of 31 and 29 days ago
        redis_db.client().xadd(
            AUDIT_STREAM, {"action": "old"}, id=f"{now_ms - days * 86_400_000}-0"
        )
    log.append(entry)
    assert [e.action for e in log.read(100)] == ["token.create", "old"]
