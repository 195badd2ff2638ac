"""Dashboard sessions and sign-in attempts, kept in Redis under hashed ids.

A session (``ldp:session:<sha256 of its id>``) holds who signed in, their role per
project, a CSRF token and its expiry; the browser holds only the random id in a cookie.
A sign-in attempt (``ldp:signin:<sha256 of its state>``) holds the PKCE verifier, the
nonce and the page to return to, and is taken once. Both expire in Redis as well, so a
store left alone empties itself. Nothing of a device is ever in either.
Docs: docs/guides/teams.md.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ldp_store import keys
from ldp_store.connection import as_text

if TYPE_CHECKING:
    import redis

__all__ = ["ATTEMPT_SECONDS", "Attempt", "Session", "SessionStore"]

ATTEMPT_SECONDS = 600
"""How long a sign-in attempt waits for the provider's answer: ten minutes to type a
password and a second factor; an attempt not finished by then starts over."""


def _hashed(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Session:
    """A signed-in operator."""

    actor: str
    """For the audit log: ``sso:<email, user name or subject>``."""
    roles: Mapping[str, str] = field(default_factory=dict)
    """Role (``viewer``, ``editor``, ``owner``) by project name."""
    csrf: str = ""
    """The token every state-changing request of this session must carry."""
    expires: float = 0.0
    """Epoch seconds after which the session is no longer accepted."""


@dataclass(frozen=True)
class Attempt:
    """A sign-in under way: what the provider's answer is checked against."""

    verifier: str
    """The PKCE code verifier (RFC 7636), sent with the code."""
    nonce: str
    """The nonce the id_token must carry."""
    next: str
    """The dashboard path to go back to."""


class SessionStore:
    """Sessions and sign-in attempts in Redis.

    Args:
        client: the Redis client.
        clock: epoch seconds (tests pass their own to expire a session at once).
    """

    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.clock = clock

    def create(self, actor: str, roles: Mapping[str, str], lifetime: int) -> tuple[str, Session]:
        """A new session for ``lifetime`` seconds: its id (for the cookie) and record."""
        session_id = secrets.token_urlsafe(32)
        session = Session(actor, dict(roles), secrets.token_urlsafe(32), self.clock() + lifetime)
        record: dict[Any, str] = {
            "actor": session.actor,
            "roles": json.dumps(session.roles, sort_keys=True),
            "csrf": session.csrf,
            "expires": repr(session.expires),
        }
        key = keys.session_key(_hashed(session_id))
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(key, mapping=record)
        pipe.expire(key, lifetime + 1)
        pipe.execute()
        return session_id, session

    def get(self, session_id: str) -> Session | None:
        """The live session of ``session_id``, or None (unknown, ended or expired)."""
        if not session_id:
            return None
        key = keys.session_key(_hashed(session_id))
        raw: dict[Any, Any] = self.client.hgetall(key)
        if not raw:
            return None
        record = {as_text(k): as_text(v) for k, v in raw.items()}
        try:
            session = Session(
                record["actor"],
                json.loads(record["roles"]),
                record["csrf"],
                float(record["expires"]),
            )
        except (KeyError, ValueError):
            return None
        if self.clock() >= session.expires:
            self.client.delete(key)
            return None
        return session

    def end(self, session_id: str) -> None:
        """Forget ``session_id`` (signing out): the cookie is worth nothing after this."""
        if session_id:
            self.client.delete(keys.session_key(_hashed(session_id)))

    def begin(self, attempt: Attempt) -> str:
        """Keep ``attempt`` for :data:`ATTEMPT_SECONDS`; returns its ``state``."""
        state = secrets.token_urlsafe(32)
        record = json.dumps(
            {"verifier": attempt.verifier, "nonce": attempt.nonce, "next": attempt.next}
        )
        self.client.set(keys.signin_key(_hashed(state)), record, ex=ATTEMPT_SECONDS)
        return state

    def take(self, state: str) -> Attempt | None:
        """The attempt of ``state``, removed (a provider's answer is used once), or None."""
        if not state:
            return None
        key = keys.signin_key(_hashed(state))
        pipe = self.client.pipeline(transaction=True)
        pipe.get(key)
        pipe.delete(key)
        raw, _ = pipe.execute()
        if raw is None:
            return None
        found = json.loads(as_text(raw))
        return Attempt(found["verifier"], found["nonce"], found["next"])
