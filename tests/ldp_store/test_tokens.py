"""Scoped tokens in Redis: only a hash is stored, the secret must match, expiry, rotation
with its overlap, revocation, and each worker's short cache (ldp_store/tokens.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ldp_store import keys
from ldp_store.tokens import KINDS, TokenStore, UnknownToken, hash_of, parse
from tests.clock import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock(1_800_000_000.0)


@pytest.fixture
def store(redis_db: Any, clock: Clock) -> TokenStore:
    """No cache, no waiting: each check reads Redis (the cache has its own test)."""
    return TokenStore(redis_db.client(), clock, cache_seconds=0.0, sleep=lambda s: None)


def test_only_the_hash_is_stored_and_the_secret_must_match(
    store: TokenStore, redis_db: Any
) -> None:
    text, token = store.create("ios-app", KINDS["ingest"], created_by="admin-token")
    assert parse(text) == token.id and text.startswith(token.prefix + "_")
    client = redis_db.client()
    dump = b"".join(client.dump(k) or b"" for k in client.keys("*"))
    secret = text.rsplit("_", 1)[1].encode()
    assert secret not in dump and text.encode() not in dump
    assert redis_db.client().hget(keys.token_key(token.id), "digest") == hash_of(text).encode()
    assert store.verify(text) == token
    tampered = text[:-1] + ("A" if text[-1] != "A" else "B")
    assert store.verify(tampered) is None
    assert store.verify(text + "x") is None and store.verify("") is None
    assert store.verify(f"ldp_{'0' * 12}_{text.rsplit('_', 1)[1]}") is None


def test_expiry_is_checked_at_every_use(store: TokenStore, clock: Clock) -> None:
    text, _ = store.create("ci", KINDS["read"], expires_in=60)
    clock.now += 59
    assert store.verify(text) is not None
    clock.now += 1
    assert store.verify(text) is None


def test_rotation_keeps_the_old_token_for_the_overlap(store: TokenStore, clock: Clock) -> None:
    old_text, old = store.create("backend", {"metrics:read", "metrics:write"}, project="shop")
    new_text, new, retired = store.rotate(old.prefix, overlap=300)
    assert (new.scopes, new.project, new.name) == (old.scopes, "shop", "backend")
    assert retired.replaced_by == new.prefix
    clock.now += 299
    assert store.verify(old_text) is not None and store.verify(new_text) is not None
    clock.now += 1
    assert store.verify(old_text) is None and store.verify(new_text) is not None
    with pytest.raises(ValueError, match="revoked or expired"):
        store.rotate(old.id, overlap=10)


def test_revocation_and_lists(store: TokenStore, clock: Clock) -> None:
    text, token = store.create("a", KINDS["admin"])
    clock.now += 1
    other, _ = store.create("b", KINDS["read"], project="shop")
    assert store.revoke(token.prefix).revoked is not None
    assert store.verify(text) is None and store.verify(other) is not None
    assert [t.name for t in store.list()] == ["a", "b"]
    assert [t.name for t in store.list("shop")] == ["b"]
    with pytest.raises(UnknownToken):
        store.revoke("ldp_" + "f" * 12)
    with pytest.raises(UnknownToken):
        store.get("not-a-prefix")


def test_bad_scopes_and_lifetimes_are_refused(store: TokenStore) -> None:
    with pytest.raises(ValueError, match="scopes must be"):
        store.create("x", {"metrics:everything"})
    with pytest.raises(ValueError, match="scopes must be"):
        store.create("x", set())
    with pytest.raises(ValueError, match="positive"):
        store.create("x", {"ingest"}, expires_in=0)


def test_a_worker_trusts_its_cache_only_as_long_as_a_revocation_waits(
    redis_db: Any, clock: Clock
) -> None:
    """Another worker's revocation reaches this one's cache once ``cache_seconds`` have
    passed, which is what revoke() waits before it returns."""
    waited: list[float] = []
    revoker = TokenStore(redis_db.client(), clock, cache_seconds=0.5, sleep=waited.append)
    worker = TokenStore(redis_db.client(), clock, cache_seconds=3600)  # never expires here
    text, token = revoker.create("app", KINDS["ingest"])
    assert worker.verify(text) is not None
    revoker.revoke(token.id)
    assert waited == [0.5]
    assert worker.verify(text) is not None  # still cached: that is what the wait covers
    worker._cache.clear()  # the cache's time is over
    assert worker.verify(text) is None
