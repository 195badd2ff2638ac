"""The Oblivious HTTP gateway's keys: a rotation schedule kept in one Redis hash.

Keys live in ``ldp:ohttp:keys`` (field: key id; value: JSON with the raw X25519 private
key and its dates), apart from report data: no metric's hash tag matches it, so export,
retention and ``ldp metrics delete`` never touch it, and every collector replica (and
``ldp keys``) sees the same keys without a shared file system. Each key is *current* (the
first one published) for ``lifetime`` seconds; then a new key is made and the old one is
still accepted for ``overlap`` seconds: two keys are live during the overlap.

In full: ``docs/reference/ohttp.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import redis

from client_sdk.ohttp.encapsulation import generate_private_key, public_key_of
from client_sdk.ohttp.keys import KEM_X25519_HKDF_SHA256, SUPPORTED, KeyConfig
from ldp_store.keys import PREFIX

__all__ = [
    "DEFAULT_LIFETIME",
    "DEFAULT_OVERLAP",
    "KEYS_KEY",
    "GatewayKeys",
    "LiveKey",
]

KEYS_KEY = f"{PREFIX}:ohttp:keys"
"""The hash of every live gateway key (no hash tag: one slot of its own)."""

DEFAULT_LIFETIME = 7 * 24 * 3600
"""Seconds a key is the current one: a week, as Cloudflare's and Fastly's relays rotate
theirs. Shorter limits what a stolen key opens; each rotation costs every device one
extra key fetch."""

DEFAULT_OVERLAP = 24 * 3600
"""Seconds the previous key is still accepted after a rotation: a device caches the key
configuration for at most :data:`client_sdk.ohttp.transport.KEYS_TTL` (an hour) and an
offline one re-fetches on the unknown-key error, so a day loses nothing."""

TRIES = 5
"""Optimistic-transaction attempts of one rotation (another process rotating at the same
moment makes the first attempt retry, and then find the new key)."""


@dataclass(frozen=True)
class LiveKey:
    """One gateway key: its published configuration, its private key and its dates."""

    config: KeyConfig
    private_key: bytes
    created: float
    expires: float | None
    """Unix seconds after which it is no longer accepted; None while it is current."""

    def to_json(self) -> str:
        """The stored form."""
        return json.dumps(
            {
                "id": self.config.key_id,
                "private": self.private_key.hex(),
                "created": self.created,
                "expires": self.expires,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> LiveKey:
        """Read the stored form."""
        data = json.loads(text)
        private = bytes.fromhex(data["private"])
        config = KeyConfig(data["id"], KEM_X25519_HKDF_SHA256, public_key_of(private), SUPPORTED)
        return cls(config, private, float(data["created"]), data["expires"])

    def accepted_at(self, when: float) -> bool:
        """Whether the key is still accepted at Unix time ``when``."""
        return self.expires is None or self.expires > when


class GatewayKeys:
    """The rotation schedule of the gateway's keys, in Redis.

    Args:
        client: the Redis client.
        lifetime: seconds a key is current (:data:`DEFAULT_LIFETIME`).
        overlap: seconds the previous key stays accepted (:data:`DEFAULT_OVERLAP`).
        clock: Unix time (tests).
    """

    def __init__(
        self,
        client: redis.Redis,
        lifetime: float = DEFAULT_LIFETIME,
        overlap: float = DEFAULT_OVERLAP,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if lifetime <= 0 or overlap < 0:
            raise ValueError("the key lifetime must be > 0 and the overlap >= 0")
        self.client = client
        self.lifetime = float(lifetime)
        self.overlap = float(overlap)
        self._time = clock

    def _stored(self) -> list[LiveKey]:
        return [LiveKey.from_json(v) for v in self.client.hvals(KEYS_KEY)]

    def live(self) -> list[LiveKey]:
        """The live keys, the current one first, as stored (no rotation)."""
        now = self._time()
        return _ordered([k for k in self._stored() if k.accepted_at(now)])

    def ensure(self) -> list[LiveKey]:
        """The live keys after following the schedule: the first key is made, a current
        key past its lifetime is replaced, expired keys are dropped."""
        stored = self._stored()
        now = self._time()
        if not self._due(_current(stored), now) and all(k.accepted_at(now) for k in stored):
            return _ordered(stored)
        return self._rotate(force=False)

    def _due(self, current: list[LiveKey], now: float) -> bool:
        """Whether a new key is due: no current key, or one past its lifetime."""
        return not current or any(k.created + self.lifetime <= now for k in current)

    def rotate(self) -> list[LiveKey]:
        """Make a new current key now; the previous ones stay accepted for ``overlap``."""
        return self._rotate(force=True)

    def _rotate(self, force: bool) -> list[LiveKey]:
        for _ in range(TRIES):
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(KEYS_KEY)
                    now = self._time()
                    stored = {
                        int(f): LiveKey.from_json(v) for f, v in pipe.hgetall(KEYS_KEY).items()
                    }
                    live = {i: k for i, k in stored.items() if k.accepted_at(now)}
                    current = _current(live.values())
                    pipe.multi()
                    if expired := stored.keys() - live.keys():
                        pipe.hdel(KEYS_KEY, *map(str, sorted(expired)))
                    if force or self._due(current, now):
                        self._replace_current(pipe, live, current, now)
                    pipe.execute()
                except redis.WatchError:
                    continue
            return self.live()
        raise redis.exceptions.ConnectionError("the gateway keys kept changing; try again")

    def _replace_current(
        self,
        pipe: redis.client.Pipeline,
        live: dict[int, LiveKey],
        current: list[LiveKey],
        now: float,
    ) -> None:
        """Queue on ``pipe`` a new current key, made now, and the retirement of every live
        key still accepted ``overlap`` from now (it is accepted until then)."""
        retires = now + self.overlap
        for i, k in live.items():
            if k.accepted_at(retires):
                retired = LiveKey(k.config, k.private_key, k.created, retires)
                pipe.hset(KEYS_KEY, str(i), retired.to_json())
        new_id = _free_id(live, current)
        private = generate_private_key()
        config = KeyConfig(new_id, KEM_X25519_HKDF_SHA256, public_key_of(private), SUPPORTED)
        pipe.hset(KEYS_KEY, str(new_id), LiveKey(config, private, now, None).to_json())


def _current(keys: Iterable[LiveKey]) -> list[LiveKey]:
    """The current keys among ``keys``: those not retiring (no expiry set)."""
    return [k for k in keys if k.expires is None]


def _ordered(keys: list[LiveKey]) -> list[LiveKey]:
    """Current key first, then the retiring ones, newest first."""
    return sorted(keys, key=lambda k: (k.expires is not None, -k.created))


def _free_id(live: dict[int, LiveKey], current: list[LiveKey]) -> int:
    """The next key id after the newest current one that no live key uses."""
    start = (max((k.config.key_id for k in current), default=-1) + 1) % 256
    for step in range(256):
        candidate = (start + step) % 256
        if candidate not in live:
            return candidate
    raise RuntimeError("256 live gateway keys: shorten the overlap")
