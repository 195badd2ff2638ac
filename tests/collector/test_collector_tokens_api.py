"""``/v1/tokens`` (collector/api_tokens.py): what a request may ask for, and what a scoped
token may give. Schemathesis found the first two (a null expiry made a token that never
expires; both kind and scopes was a 400 the document did not say)."""

from __future__ import annotations

from typing import Any

from collector_helpers import ADMIN, make_app

from ldp_store.tokens import TokenStore


def test_bad_requests_are_400(redis_db: Any) -> None:
    client = make_app(redis_db.url).test_client()
    for body in (
        {"name": "a", "scopes": ["ingest"], "expires_in": None},
        {"name": "a", "kind": "read", "scopes": ["ingest"]},
        {"name": "a"},
        {"name": "", "kind": "read"},
        {"name": "a", "scopes": ["metrics:everything"]},
    ):
        answer = client.post("/v1/tokens", json=body, headers=ADMIN)
        assert answer.status_code == 400, (body, answer.json)
    assert client.get("/v1/tokens", headers=ADMIN).json == {"tokens": []}


def test_a_scoped_token_gives_only_what_it_holds_in_its_own_project(redis_db: Any) -> None:
    client = make_app(redis_db.url).test_client()
    store = TokenStore(redis_db.client(), sleep=lambda s: None)
    manager, _ = store.create("team-lead", {"tokens:manage", "metrics:read"}, project="shop")
    store.create("other-team", {"ingest"}, project="blog")
    headers = {"Authorization": f"Bearer {manager}"}
    refused = client.post("/v1/tokens", json={"name": "x", "kind": "admin"}, headers=headers)
    assert refused.status_code == 403 and "metrics:delete" in refused.json["error"]
    made = client.post("/v1/tokens", json={"name": "r", "kind": "read"}, headers=headers)
    assert made.status_code == 201 and made.json["project"] == "shop"
    listed = client.get("/v1/tokens", headers=headers).json["tokens"]
    assert {t["name"] for t in listed} == {"team-lead", "r"}  # not the other project's
    blog = next(t for t in store.list("blog"))
    assert client.post(f"/v1/tokens/{blog.prefix}/revoke", headers=headers).status_code == 404
    assert store.get(blog.id).revoked is None
