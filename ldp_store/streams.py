"""Read a stream's reports as reports, whatever entries hold them (operators, tests).

The collector writes batch entries (``s`` sizes, ``b`` payloads comma-joined; a lone
report ``p``) and earlier collectors one ``p`` entry per report; these functions give a
report per item either way. Layout: ``docs/architecture/storage.md``.
"""

from __future__ import annotations

from typing import Any, cast

import redis

from ldp_store import keys

__all__ = ["held", "length", "payloads", "reports"]


def payloads(fields: dict[bytes, bytes]) -> list[bytes]:
    """The payloads one entry holds (none if it holds neither form)."""
    if b"p" in fields:
        return [fields[b"p"]]
    sizes, blob = fields.get(b"s"), fields.get(b"b")
    if sizes is None or blob is None:
        return []
    found, offset = [], 0
    for size in map(int, sizes.split(b",")):
        found.append(blob[offset : offset + size])
        offset += size + 1
    return found


def reports(
    client: redis.Redis, stream: str, count: int | None = None
) -> list[tuple[bytes, bytes]]:
    """(entry id, payload) of every report of ``stream``'s first ``count`` entries (all)."""
    entries = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(stream, count=count))
    return [(entry_id, p) for entry_id, fields in entries for p in payloads(fields)]


def held(client: Any, name: str, version: int, shard: int = 0) -> int:
    """The reports a version's stream holds: ``XLEN`` plus what batch entries hold beyond
    one each (what the backlog limit counts)."""
    return length(client, keys.stream_key(name, version, shard))


def length(client: Any, stream: str) -> int:
    """The reports the stream with key ``stream`` holds (as :func:`held`)."""
    extra = client.get(stream.rsplit(":", 1)[0] + ":batched")
    return int(client.xlen(stream)) + int(extra or 0)
