"""Scoped tokens: stored hashed in Redis, checked in constant time, cached for a moment.

A token is ``ldp_<id>_<secret>``: the id (12 hex digits, not secret) finds its record,
``ldp:token:<id>``, which holds the SHA-256 of the whole text, never the text; only
``ldp_<id>`` (its *prefix*) is ever shown again. Each web worker keeps what it read for
:data:`CACHE_SECONDS`, so a revocation (or a rotation whose overlap is over) reaches every
worker within that time: :meth:`TokenStore.revoke` returns only once it has passed.
Docs: docs/guides/teams.md.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ldp_store import keys
from ldp_store.connection import as_text

if TYPE_CHECKING:  # the command line reads SCOPES without loading redis
    import redis

__all__ = [
    "ADMIN_SCOPES",
    "CACHE_SECONDS",
    "DEFAULT_PROJECT",
    "KINDS",
    "MAX_CACHED",
    "SCOPES",
    "Token",
    "TokenStore",
    "UnknownToken",
    "hash_of",
    "parse",
]

SCOPES = (
    "ingest",
    "metrics:read",
    "metrics:write",
    "metrics:delete",
    "tokens:manage",
    "audit:read",
    "prometheus:read",
)
"""Every scope a token may hold: send reports; read estimates, exports and the dashboard;
create, change, retire metrics; delete them; manage tokens; read the audit log; scrape
``/metrics``."""

ADMIN_SCOPES = frozenset(SCOPES) - {"ingest"}
"""What an admin token holds (``LDP_ADMIN_TOKEN``'s too): everything but ingest, which is
for apps."""

KINDS = {
    "ingest": frozenset({"ingest"}),
    "read": frozenset({"metrics:read"}),
    "admin": ADMIN_SCOPES,
}
"""The usual kinds of token, by name, and their scopes (``ldp tokens create --kind``)."""

DEFAULT_PROJECT = "default"
"""The project of a token made without one."""

CACHE_SECONDS = 0.5
"""How long a worker trusts a token record it read: one Redis read per token and worker
each half second at most (nothing per request), and the bound on how late a revocation
reaches a worker, which :meth:`TokenStore.revoke` waits out before it returns."""

MAX_CACHED = 10_000
"""Records (and misses) one worker keeps at most; past it the cache starts over, so a
flood of made-up ids costs memory no more than time."""

_TEXT = re.compile(r"ldp_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")
_ID = re.compile(r"[0-9a-f]{12}")


class UnknownToken(LookupError):
    """No token has this id (or prefix)."""


def hash_of(text: str) -> str:
    """The SHA-256 (hex) a token's record keeps: a token has 256 random bits, so a fast
    hash is enough (nothing to brute-force as with a password)."""
    return hashlib.sha256(text.encode()).hexdigest()


def parse(text: str) -> str | None:
    """The id of a token's text, or None when it is not shaped like one."""
    found = _TEXT.fullmatch(text)
    return found.group(1) if found else None


def token_id(prefix_or_id: str) -> str:
    """The id in ``ldp_<id>`` or ``<id>``.

    Raises:
        UnknownToken: neither shape.
    """
    text = prefix_or_id.removeprefix("ldp_")
    if not _ID.fullmatch(text):
        raise UnknownToken(f"not a token id or prefix: {prefix_or_id[:40]!r} (ldp_ + 12 hex)")
    return text


@dataclass(frozen=True)
class Token:
    """A token's record (what ``ldp tokens list`` shows; never its text)."""

    id: str
    name: str
    project: str
    scopes: frozenset[str]
    created: float
    expires: float | None = None
    revoked: float | None = None
    created_by: str = ""
    replaced_by: str | None = None
    digest: str = ""

    @property
    def prefix(self) -> str:
        """What identifies it in lists and logs: ``ldp_<id>``."""
        return f"ldp_{self.id}"

    def valid(self, now: float) -> bool:
        """Neither revoked nor expired at ``now``."""
        return self.revoked is None and (self.expires is None or now < self.expires)

    def to_fields(self) -> dict[Any, Any]:
        """The record's Redis hash fields (text)."""
        fields: dict[Any, Any] = {
            "name": self.name,
            "project": self.project,
            "scopes": " ".join(s for s in SCOPES if s in self.scopes),
            "created": repr(self.created),
            "created_by": self.created_by,
            "digest": self.digest,
        }
        if self.expires is not None:
            fields["expires"] = repr(self.expires)
        if self.revoked is not None:
            fields["revoked"] = repr(self.revoked)
        if self.replaced_by is not None:
            fields["replaced_by"] = self.replaced_by
        return fields

    @classmethod
    def of(cls, token_id: str, fields: Mapping[Any, Any]) -> Token:
        """A record read back from Redis."""
        f = {as_text(k): as_text(v) for k, v in fields.items()}

        def stamp(name: str) -> float | None:
            return float(f[name]) if f.get(name) else None

        return cls(
            id=token_id,
            name=f.get("name", ""),
            project=f.get("project", DEFAULT_PROJECT),
            scopes=frozenset(f.get("scopes", "").split()),
            created=float(f.get("created", 0)),
            expires=stamp("expires"),
            revoked=stamp("revoked"),
            created_by=f.get("created_by", ""),
            replaced_by=f.get("replaced_by") or None,
            digest=f.get("digest", ""),
        )


class TokenStore:
    """Scoped tokens in Redis, with each worker's short cache.

    Args:
        client: the Redis client (server or cluster).
        clock: wall time (expiry, creation); tests pass their own.
        cache_seconds: how long a record read is trusted (:data:`CACHE_SECONDS`).
        sleep: what waits out the cache after a revocation.
    """

    def __init__(
        self,
        client: redis.Redis,
        clock: Callable[[], float] = time.time,
        cache_seconds: float = CACHE_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.redis = client
        self.clock = clock
        self.cache_seconds = cache_seconds
        self.sleep = sleep
        self._cache: dict[str, tuple[float, Token | None]] = {}

    # -- checking ------------------------------------------------------------------------

    def verify(self, text: str) -> Token | None:
        """The valid token whose text ``text`` is, or None (unknown, wrong secret, revoked,
        expired). The secret's hash is compared in constant time."""
        found = parse(text)
        if found is None:
            return None
        record = self._cached(found)
        digest = hash_of(text)
        if record is None or not hmac.compare_digest(digest, record.digest):
            return None
        return record if record.valid(self.clock()) else None

    def _cached(self, token_id: str) -> Token | None:
        now = time.monotonic()
        hit = self._cache.get(token_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        fields = self.redis.hgetall(keys.token_key(token_id))
        record = Token.of(token_id, fields) if fields else None
        if len(self._cache) >= MAX_CACHED:
            self._cache.clear()
        self._cache[token_id] = (now + self.cache_seconds, record)
        return record

    # -- managing ------------------------------------------------------------------------

    def create(
        self,
        name: str,
        scopes: Iterable[str],
        project: str = DEFAULT_PROJECT,
        expires_in: float | None = None,
        created_by: str = "",
    ) -> tuple[str, Token]:
        """Make a token; its text is returned here once and stored only hashed.

        Args:
            name: what it is for (shown in lists).
            scopes: some of :data:`SCOPES`.
            project: the project it acts on.
            expires_in: seconds until it expires (None: never).
            created_by: who made it (an actor, for the audit log and lists).

        Returns:
            The token's text and its record.

        Raises:
            ValueError: an unknown scope, no scope, or a non-positive lifetime.
        """
        wanted = frozenset(scopes)
        unknown = sorted(wanted - set(SCOPES))
        if unknown or not wanted:
            raise ValueError(f"scopes must be some of {', '.join(SCOPES)}; got {sorted(wanted)}")
        if expires_in is not None and not expires_in > 0:
            raise ValueError(f"expires_in must be positive seconds, got {expires_in}")
        now = self.clock()
        new_id = secrets.token_hex(6)
        text = f"ldp_{new_id}_{secrets.token_urlsafe(32)}"
        token = Token(
            id=new_id,
            name=name,
            project=project,
            scopes=wanted,
            created=now,
            expires=None if expires_in is None else now + expires_in,
            created_by=created_by,
            digest=hash_of(text),
        )
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(keys.token_key(new_id), mapping=token.to_fields())
        pipe.sadd(keys.TOKENS_SET, new_id)
        pipe.execute()
        return text, token

    def get(self, prefix_or_id: str) -> Token:
        """A token's record, fresh from Redis.

        Raises:
            UnknownToken: no such token.
        """
        found = token_id(prefix_or_id)
        fields = self.redis.hgetall(keys.token_key(found))
        if not fields:
            raise UnknownToken(f"no token ldp_{found}")
        return Token.of(found, fields)

    def list(self, project: str | None = None) -> list[Token]:
        """Every token (of ``project``), oldest first, revoked and expired ones too."""
        ids = sorted(as_text(m) for m in self.redis.smembers(keys.TOKENS_SET))
        pipe = self.redis.pipeline(transaction=False)
        for found in ids:
            pipe.hgetall(keys.token_key(found))
        records = [Token.of(i, f) for i, f in zip(ids, pipe.execute(), strict=True) if f]
        chosen = [t for t in records if project is None or t.project == project]
        return sorted(chosen, key=lambda t: (t.created, t.id))

    def any(self) -> bool:
        """Whether any scoped token was ever made (else only the configured ones exist)."""
        return bool(self.redis.scard(keys.TOKENS_SET))

    def revoke(self, prefix_or_id: str) -> Token:
        """Revoke a token; returns once no worker's cache can still accept it.

        Raises:
            UnknownToken: no such token.
        """
        token = self.get(prefix_or_id)
        if token.revoked is None:
            token = replace(token, revoked=self.clock())
            self.redis.hset(keys.token_key(token.id), mapping=token.to_fields())
        self._settle(token.id)
        return token

    def rotate(
        self, prefix_or_id: str, overlap: float, created_by: str = ""
    ) -> tuple[str, Token, Token]:
        """A new token with the old one's name, project and scopes; the old one keeps
        working for ``overlap`` seconds more (0: not at all, as a revocation).

        Returns:
            The new token's text, its record, and the old one's record.

        Raises:
            UnknownToken: no such token.
            ValueError: the old token is revoked or expired, or ``overlap`` is negative.
        """
        old = self.get(prefix_or_id)
        now = self.clock()
        if not old.valid(now):
            raise ValueError(f"{old.prefix} is revoked or expired: create a new token instead")
        if overlap < 0:
            raise ValueError(f"overlap must be 0 or more seconds, got {overlap}")
        lifetime = None if old.expires is None else max(old.expires - now, 1.0)
        text, new = self.create(old.name, old.scopes, old.project, lifetime, created_by)
        ends = now + overlap
        old = replace(
            old,
            expires=ends if old.expires is None else min(old.expires, ends),
            replaced_by=new.prefix,
        )
        self.redis.hset(keys.token_key(old.id), mapping=old.to_fields())
        if overlap < self.cache_seconds:
            self._settle(old.id)
        return text, new, old

    def _settle(self, changed: str) -> None:
        """Forget ``changed`` here and wait until every other worker's cache has too."""
        self._cache.pop(changed, None)
        self.sleep(self.cache_seconds)
