"""Stream replies become payload batches: the worker's parsing, apart from its loop.

A :class:`Delivery` is a batch of entries as Redis answered it, packed (ids, sizes and
payloads joined by commas) so that thousands of entries cost a few Python objects.
:func:`decode_json` parses every payload exactly as ``json.loads`` of that payload alone
would — all at once when :func:`bulk_json` can prove that equal — and
:func:`parse_payloads` hands the objects to the metric's codec, separating the payloads it
rejects (which the worker dead-letters with the reason).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis

from aggregator.stats.batch import Batch, Codec
from client_sdk.mechanisms import PayloadError
from client_sdk.wire import MetricDefinition
from ldp_store.connection import as_text
from ldp_store.schema import SEGMENT_KEY

__all__ = [
    "BAD_BATCH",
    "SEGMENT_COLUMN",
    "Delivery",
    "bulk_json",
    "decode_json",
    "entry_ms",
    "parse_payloads",
    "raw_reader",
    "split_segments",
    "stream_entries",
]

SEGMENT_COLUMN = "_segment"
"""The batch column holding each row's segment (a metric with public dimensions): the
worker counts each segment's rows apart as well as all of them."""


@dataclass
class Delivery:
    """A batch as the read script returns it: packed, not yet decoded, a row per report.

    A batch entry (``s``/``b`` fields, :data:`ldp_store.scripts.APPEND`) gives as many
    rows as it holds reports, each with the entry's id and delivery count; an entry
    written before batch entries (``p``) gives one row."""

    ids: list[bytes]
    """Each row's entry id (a batch entry's rows repeat it)."""
    sizes: list[int]
    blob: bytes
    """The payloads, comma-joined (sizes say where each is)."""
    deliveries: list[int] | None
    cursor: str = ""
    joined_ids: bytes = b""
    """The entry ids comma-joined, each once, as the commit script takes them."""
    fence: bytes = b""
    """The fast-path token of a fresh (``>``) read, ``b"<fence>:<own pending>"``; empty for
    any other delivery, whose commit must check its ids one by one."""
    widest: int = 1
    """The most reports one of its entries holds."""

    @classmethod
    def from_reply(cls, reply: Sequence[bytes]) -> Delivery:
        """From the read script's packed reply (own pending entries, claimed entries)."""
        cursor, ids, sizes, blob, deliveries, _fence, counts = reply
        if not ids:
            return cls([], [], b"", None, cursor.decode())
        entries = ids.split(b",")
        times = list(map(int, deliveries.split(b","))) if deliveries else None
        widest = 1
        if counts:  # some batch entries: a row per report
            per = list(map(int, counts.split(b",")))
            rows = [entry for entry, n in zip(entries, per, strict=True) for _ in range(n)]
            if times is not None:
                times = [t for t, n in zip(times, per, strict=True) for _ in range(n)]
            entries, widest = rows, max(per)
        return cls(
            ids=entries,
            sizes=list(map(int, sizes.split(b","))),
            blob=blob,
            deliveries=times,
            cursor=cursor.decode(),
            joined_ids=ids,
            widest=widest,
        )

    @classmethod
    def from_entries(cls, entries: Sequence[Sequence[Any]], fence: bytes = b"") -> Delivery:
        """From XREADGROUP entries (fresh entries, never delivered before).

        Args:
            entries: ``[id, fields]`` pairs, the fields a flat ``[name, value, …]`` list
                (the raw reply) or a dict (redis-py's parsed reply), None if deleted.
            fence: the fast-path token read with them, if they are a fresh read.
        """
        ids = [entry[0] for entry in entries]
        joined = b",".join(ids)
        fields = [entry[1] for entry in entries]
        usual = _usual_rows(ids, fields)
        if usual is not None:
            return cls(*usual[:3], None, joined_ids=joined, fence=fence, widest=usual[3])
        row_ids: list[bytes] = []
        row_sizes: list[int] = []
        parts: list[bytes] = []
        widest = 1
        for entry_id, entry_fields in zip(ids, fields, strict=True):
            more_ids, more_sizes, part, wide = _entry_rows(entry_id, entry_fields)
            row_ids += more_ids
            row_sizes += more_sizes
            parts.append(part)
            widest = max(widest, wide)
        blob = b",".join(parts)
        return cls(row_ids, row_sizes, blob, None, joined_ids=joined, fence=fence, widest=widest)

    def raw(self) -> Iterator[bytes]:
        """Each row's payload bytes (empty for a deleted entry or one without a payload)."""
        offset = 0
        for size in self.sizes:
            length = max(size, 0)
            yield self.blob[offset : offset + length]
            offset += length + 1


BAD_BATCH = -3
"""A row's size when its batch entry's sizes do not add up to its payloads (read by hand
into the stream: the collector never writes one); dead-lettered whole."""


def _named(entry_fields: Any) -> dict[bytes, bytes] | None:
    """An entry's fields by name (None: the entry was deleted)."""
    if entry_fields is None:
        return None
    if isinstance(entry_fields, dict):
        return entry_fields
    return dict(zip(entry_fields[::2], entry_fields[1::2], strict=True))


def _batch_rows(
    ids: list[bytes], sizes: list[bytes], blobs: list[bytes]
) -> tuple[list[bytes], list[int], bytes, int] | None:
    """Batch entries' rows: (each report's entry id, its size, the payloads comma-joined,
    the most reports an entry holds), or None if some entry's sizes do not add up."""
    row_ids: list[bytes] = []
    row_sizes: list[int] = []
    widest = 1
    for entry_id, text, blob in zip(ids, sizes, blobs, strict=True):
        parts = text.split(b",")
        if not all(part.isdigit() and len(part) <= 15 for part in parts):
            return None
        each = list(map(int, parts))
        if sum(each) + len(each) - 1 != len(blob):
            return None
        row_ids += [entry_id] * len(each)
        row_sizes += each
        widest = max(widest, len(each))
    return row_ids, row_sizes, b",".join(blobs), widest


_DECODER = json.JSONDecoder()
_UNREADABLE = {
    -1: "entry deleted from the stream",
    -2: "no field 'p'",
    BAD_BATCH: "batch entry whose sizes do not add up to its payloads",
}


def raw_reader(client: Any) -> Any:
    """A client on ``client``'s connections whose XREADGROUP replies stay as parsed by hiredis.

    redis-py turns every entry into a tuple and a dict in Python, about 2 µs per entry,
    as much as the rest of the worker's work; :meth:`Delivery.from_entries` reads the raw
    lists directly. A cluster client keeps its own callbacks (its replies are parsed).
    """
    if not isinstance(client, redis.Redis):
        return client
    raw = redis.Redis(connection_pool=client.connection_pool)
    raw.set_response_callback("XREADGROUP", lambda response, **options: response)
    return raw


def stream_entries(reply: Any, key: str) -> list[Sequence[Any]]:
    """One stream's entries in an XREAD(GROUP) reply, whatever its shape.

    Raw RESP3 and redis-py's parsed reply are ``{stream: entries}``; RESP2 and redis-py's
    legacy form are ``[[stream, entries]]``.
    """
    pairs = reply.items() if isinstance(reply, dict) else (reply or [])
    for name, entries in pairs:
        if as_text(name) == key:
            return list(entries)
    return []


def entry_ms(entry_id: bytes) -> int:
    """An entry id's first part: the arrival time in milliseconds since the epoch."""
    return int(entry_id.split(b"-", 1)[0])


_BRACKETS = np.zeros(256, dtype=np.int8)
_BRACKETS[[ord("{"), ord("[")]] = 1
_BRACKETS[[ord("}"), ord("]")]] = -1


def bulk_json(blob: bytes, sizes: list[int]) -> list[Any] | None:
    """Every payload in one ``json.loads``, when that provably equals parsing each alone.

    ``blob`` is the payloads joined by commas, so ``[blob]`` parses as one array. That is
    the per-entry parse only if every joining comma separates top-level elements; a crafted
    pair such as ``{"v":[1`` and ``2]}`` would otherwise merge into one valid payload.
    Without backslashes, a byte lies outside every string exactly when an even number of
    quotes precede it, so numpy checks, from the positions of quotes and brackets only,
    that each joining comma is outside any string at bracket depth 0. Then the n − 1
    joining commas are top-level separators; an array of exactly n elements has no others,
    so element i is entry i's text, which ``json.loads`` alone would accept with the same
    value.

    Returns:
        The n objects, or None: use the per-entry parse.
    """
    if b"\\" in blob:
        return None
    try:
        objects = json.loads(b"[" + blob + b"]")
    except ValueError:
        return None
    if len(objects) != len(sizes):
        return None
    if len(sizes) > 1:
        buf = np.frombuffer(blob, dtype=np.uint8)
        quotes = np.flatnonzero(buf == ord('"'))
        kinds = _BRACKETS[buf]
        where = np.flatnonzero(kinds)
        outside = (np.searchsorted(quotes, where) & 1) == 0
        depth = np.concatenate(([0], np.cumsum(kinds[where] * outside, dtype=np.int64)))
        commas = np.cumsum(np.asarray(sizes[:-1], dtype=np.int64) + 1) - 1
        if depth[np.searchsorted(where, commas)].any():
            return None
        if (np.searchsorted(quotes, commas) & 1).any():
            return None
    return objects


def decode_json(
    delivery: Delivery, skip: dict[int, str]
) -> tuple[list[Any], list[int], list[tuple[int, str]]]:
    """Parse every payload exactly as ``json.loads`` of that payload alone would.

    Whole batches go through :func:`bulk_json`. Otherwise the packed payloads are decoded
    once and each is scanned in place from its offset; one whose scan does not end exactly
    at its length (whitespace around it, say) falls back to ``json.loads`` of its bytes.

    Args:
        delivery: the packed batch.
        skip: entries already rejected (index → reason), not parsed.

    Returns:
        (objects, their indices in the batch, [(index, reason)] of every bad entry).
    """
    sizes, blob = delivery.sizes, delivery.blob
    if not skip and sizes and min(sizes) >= 0:
        bulk = bulk_json(blob, sizes)
        if bulk is not None:
            return bulk, list(range(len(sizes))), []
    objects: list[Any] = []
    good: list[int] = []
    bad: list[tuple[int, str]] = list(skip.items())
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    fast = len(text) == len(blob)  # ASCII only: character offsets are byte offsets
    scan = _DECODER.scan_once  # type: ignore[attr-defined]  # the C scanner json.loads uses
    offset = 0
    for i, size in enumerate(sizes):
        start, offset = offset, offset + max(size, 0) + 1
        if i in skip:
            continue
        if size < 0:
            bad.append((i, _UNREADABLE.get(size, "no payload")))
            continue
        end = -1
        if fast:
            try:
                obj, end = scan(text, start)
            except (StopIteration, ValueError):
                end = -1
        if end != start + size:
            try:
                obj = json.loads(blob[start : start + size])
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
                bad.append((i, f"invalid JSON: {exc}"))
                continue
        objects.append(obj)
        good.append(i)
    return objects, good, bad


def parse_payloads(
    codec: Codec[Any], payloads: list[Any], index: list[int]
) -> tuple[Batch, list[int], list[tuple[int, str]]]:
    """``codec.parse``, separating the payloads it rejects.

    Returns:
        (the batch of good payloads, their batch indices, [(index, reason)] rejected).
    """
    try:
        return codec.parse(payloads), index, []
    except (PayloadError, AssertionError):
        pass
    bad: list[tuple[int, str]] = []
    kept: list[Any] = []
    kept_index: list[int] = []
    for payload, i in zip(payloads, index, strict=True):
        try:
            codec.m.check_payload(payload)
        except PayloadError as exc:
            bad.append((i, str(exc)))
            continue
        kept.append(payload)
        kept_index.append(i)
    try:
        return codec.parse(kept), kept_index, bad
    except (PayloadError, AssertionError):
        pass
    # The batch codec is stricter than the reference checker on some payload: one by one.
    final: list[Any] = []
    final_index: list[int] = []
    for payload, i in zip(kept, kept_index, strict=True):
        try:
            codec.parse([payload])
        except (PayloadError, AssertionError) as exc:
            bad.append((i, f"rejected by the decoder: {exc}"))
            continue
        final.append(payload)
        final_index.append(i)
    return codec.parse(final), final_index, bad


def split_segments(
    definition: MetricDefinition,
    payloads: list[Any],
    index: list[int],
    bad: list[tuple[int, str]],
) -> tuple[list[Any], list[int], list[int]]:
    """Take each entry's segment (:data:`ldp_store.schema.SEGMENT_KEY`) off its payload.

    An entry of a metric with dimensions but without a valid segment cannot be counted
    per segment: it joins ``bad`` (dead-lettered with the reason).

    Returns:
        (the payloads without the key, their batch indices, their segments).
    """
    kept: list[Any] = []
    kept_index: list[int] = []
    segments: list[int] = []
    count = definition.segments
    for payload, i in zip(payloads, index, strict=True):
        segment = payload.pop(SEGMENT_KEY, None) if isinstance(payload, dict) else None
        if type(segment) is not int or not 0 <= segment < count:
            bad.append((i, f"no segment in 0..{count - 1} (the metric declares dimensions)"))
            continue
        kept.append(payload)
        kept_index.append(i)
        segments.append(segment)
    return kept, kept_index, segments


def _usual_rows(
    ids: list[bytes], fields: list[Any]
) -> tuple[list[bytes], list[int], bytes, int] | None:
    """The rows of the usual raw entries, all ``[b"s", sizes, b"b", payloads]`` or all
    ``[b"p", payload]``: (ids, sizes, blob, widest); None for anything else (a deleted
    entry, parsed dicts, a mix, a batch whose sizes do not add up)."""
    try:
        shapes = set(map(len, fields))
        if shapes == {4} and all(f[0] == b"s" and f[2] == b"b" for f in fields):
            return _batch_rows(ids, [f[1] for f in fields], [f[3] for f in fields])
        if shapes == {2} and [f[0] for f in fields].count(b"p") == len(ids):
            payloads = [f[1] for f in fields]
            return ids, list(map(len, payloads)), b",".join(payloads), 1
    except (TypeError, KeyError):  # a deleted entry (None), or parsed dicts
        pass
    return None


def _entry_rows(entry_id: bytes, entry_fields: Any) -> tuple[list[bytes], list[int], bytes, int]:
    """One entry's rows, any shape: (ids, sizes, payloads joined, widest); a deleted
    entry's size is -1, one without a payload -2, a batch that does not add up
    :data:`BAD_BATCH`."""
    found = _named(entry_fields)
    payload = None if found is None else found.get(b"p")
    if found is not None and payload is None and b"s" in found and b"b" in found:
        rows = _batch_rows([entry_id], [found[b"s"]], [found[b"b"]])
        return ([entry_id], [BAD_BATCH], b"", 1) if rows is None else rows
    size = -1 if found is None else -2 if payload is None else len(payload)
    return [entry_id], [size], payload or b"", 1
