"""Plain batches: the usual request, checked as a whole at C speed with the same verdicts.

Nearly every request is a batch an SDK built: well-formed JSON, known metric versions,
valid payloads. :func:`decode` reads such a body straight into typed structs (msgspec,
the report fields' rules as constraints) and :func:`validate` checks each metric
version's payloads with one typed decode; both answer None at the first thing that is not
plainly valid, and the request then takes the report-by-report path
(:func:`collector.body.parse_json`, :func:`collector.ingest.validate`), which gives every
message. So a request's answer and what is stored are the same on both paths
(``tests/collector/test_plain.py`` checks it mechanism by mechanism).

In full: ``docs/architecture/pipeline.md`` ("Plain batches").
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from client_sdk.mechanisms.base import FrequencyOracle
from client_sdk.mechanisms.hadamard import HadamardResponse
from client_sdk.mechanisms.hashing import LocalHashing
from client_sdk.mechanisms.pram import PostRandomization
from client_sdk.mechanisms.rr import GeneralizedRR
from client_sdk.mechanisms.strings import StringSketch
from client_sdk.mechanisms.subset import SubsetSelection
from client_sdk.mechanisms.unary import UnaryEncoding
from client_sdk.wire import MetricDefinition
from client_sdk.wire.fields import MAX_NAME_LENGTH

__all__ = ["PlainBatch", "decode", "validate"]

_HEX = "0123456789abcdef"


class _Report(msgspec.Struct, forbid_unknown_fields=True):
    """A report without dimensions; its payload is decoded once its metric is known."""

    metric: Annotated[str, Meta(min_length=1, max_length=MAX_NAME_LENGTH)]
    version: Annotated[int, Meta(ge=1)]
    id: Annotated[str, Meta(min_length=32, max_length=32)]
    payload: msgspec.Raw


class _Body(msgspec.Struct, forbid_unknown_fields=True):
    reports: list[_Report]


_DECODE_BODY = msgspec.json.Decoder(_Body).decode


@dataclass(frozen=True, slots=True)
class PlainBatch:
    """A request body :func:`decode` read (``raw``: the body, for the other path)."""

    raw: bytes
    reports: list[_Report]


def decode(raw: bytes, max_reports: int) -> PlainBatch | None:
    """``raw`` as a plain batch of 1 to ``max_reports`` reports, or None (parse it strictly).

    A plain batch is ``{"reports": [...]}`` whose reports have exactly the fields
    ``metric`` (1 to 64 characters), ``version`` (≥ 1), ``id`` (32 characters) and
    ``payload``. msgspec refuses what the strict parse refuses (and lone surrogates); of
    two equal keys it keeps the last, which :func:`validate` rules out by counting colons.
    """
    try:
        body = _DECODE_BODY(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    if not 0 < len(body.reports) <= max_reports:
        return None
    return PlainBatch(raw, body.reports)


Item = tuple[bytes, bytes]


@dataclass(frozen=True, slots=True)
class _Plan:
    """How one metric version's payloads are checked and stored on this path."""

    decode: Callable[[bytes], list[Any]]
    """The payloads of a group, as one JSON array, into structs (constraints checked)."""
    fields: int
    """Members of every payload (each has one colon)."""
    accept: Callable[[list[Any]], bool] | None
    """The checks left after the decode (None: none); False sends the batch the other way."""


def validate(
    batch: PlainBatch,
    lookup: Callable[[str, int], MetricDefinition | None],
    retired: Callable[[str], float | None],
    max_versions: int,
) -> tuple[dict[tuple[str, int], list[Item]], dict[tuple[str, int], int]] | None:
    """Every report of ``batch`` valid and plausible: the items by (metric, version) and
    each version's shards, as :func:`collector.ingest.validate` gives them; else None.

    None when a report names an unknown or retired metric version, one with dimensions or
    a mechanism this path does not know, a payload or id is not valid, a report is
    implausible, an object repeats a key or a string holds a colon, or the reports name
    more than ``max_versions`` versions.
    """
    reports = batch.reports
    ids = "".join([r.id for r in reports])
    if ids.strip(_HEX):  # every id 32 lowercase hex digits: nothing left once stripped
        return None
    pairs = [(r.metric, r.version) for r in reports]
    named = dict.fromkeys(pairs)  # each version once, in order of appearance
    if len(named) > max_versions:
        return None
    plans = _plans(named, lookup, retired)
    if plans is None:
        return None
    groups = _groups(named, pairs)
    colons = 1 + 4 * len(reports)  # the body's member, each report's four
    for pair, positions in groups.items():
        colons += plans[pair][1].fields * len(positions)
    if batch.raw.count(b":") != colons:
        return None
    return _decoded(reports, bytes.fromhex(ids), groups, plans)


Pair = tuple[str, int]


def _plans(
    named: dict[Pair, None],
    lookup: Callable[[str, int], MetricDefinition | None],
    retired: Callable[[str], float | None],
) -> dict[Pair, tuple[MetricDefinition, _Plan]] | None:
    """Each named version's definition and plan; None if one is unknown, retired, has
    dimensions or a mechanism this path does not know."""
    plans: dict[Pair, tuple[MetricDefinition, _Plan]] = {}
    for pair in named:
        definition = lookup(*pair)
        if definition is None or definition.dimensions or retired(definition.name) is not None:
            return None
        plan = _plan_of(definition)
        if plan is None:
            return None
        plans[pair] = (definition, plan)
    return plans


def _groups(named: dict[Pair, None], pairs: list[Pair]) -> dict[Pair, list[int]]:
    """The positions of each version's reports, in order."""
    if len(named) == 1:
        return {pair: list(range(len(pairs))) for pair in named}
    groups: dict[Pair, list[int]] = {pair: [] for pair in named}
    for position, pair in enumerate(pairs):
        groups[pair].append(position)
    return groups


def _decoded(
    reports: list[_Report],
    raw_ids: bytes,
    groups: dict[Pair, list[int]],
    plans: dict[Pair, tuple[MetricDefinition, _Plan]],
) -> tuple[dict[Pair, list[Item]], dict[Pair, int]] | None:
    """Each version's payloads decoded as one array and checked: its items and shards;
    None at the first payload that is not valid."""
    items: dict[Pair, list[Item]] = {}
    shards: dict[Pair, int] = {}
    for pair, positions in groups.items():
        definition, plan = plans[pair]
        try:
            payloads = plan.decode(b"[%b]" % b",".join([reports[i].payload for i in positions]))
            if plan.accept is not None and not plan.accept(payloads):
                return None
        except (msgspec.DecodeError, ValueError):  # binascii.Error is a ValueError
            return None
        own_ids = [raw_ids[16 * i : 16 * i + 16] for i in positions]
        stored = (definition.name, definition.version)  # the name qualified by its project
        items[stored] = list(zip(own_ids, map(_ENCODE, payloads), strict=True))
        shards[stored] = definition.shards
    return items, shards


_ENCODE = msgspec.json.Encoder().encode
"""A payload struct as stored: compact JSON, its fields in the canonical order (as
``check_payload`` returns them), the bytes :func:`collector.ingest.validate` stores."""


def _int(lo: int, hi: int) -> Any:
    """An integer in range(lo, hi)."""
    return Annotated[int, Meta(ge=lo, lt=hi)]


Fields = tuple[list[tuple[str, Any]], Callable[..., bool] | None]


def _fields(mechanism: object) -> Fields | None:
    """A frequency oracle's payload fields as msgspec types, in the canonical order, and
    the check left for Python (a function of the decoded structs); None if unknown.

    Only a mechanism whose ``check_payload`` and ``implausible`` are those of a class
    below is known (a subclass that overrides either is not)."""
    kind = type(mechanism)
    check = getattr(kind, "check_payload", None)
    implausible = getattr(kind, "implausible", None)
    if isinstance(mechanism, StringSketch):
        if check is not StringSketch.check_payload or implausible is not StringSketch.implausible:
            return None
        return _sketch_fields(mechanism)
    if not isinstance(mechanism, FrequencyOracle):
        return None
    if check is UnaryEncoding.check_payload and implausible is UnaryEncoding.implausible:
        assert isinstance(mechanism, UnaryEncoding)
        size = 4 * ((mechanism.nbytes + 2) // 3)
        bits = Annotated[str, Meta(min_length=size, max_length=size)]
        return [("b", bits)], _unary_check(mechanism)
    if implausible is not FrequencyOracle.implausible:
        return None
    fields = _PLAIN_FIELDS.get(check)
    return None if fields is None else fields(mechanism)


def _sketch_fields(sketch: StringSketch) -> Fields | None:
    """A string sketch's level and row, then its inner oracle's fields."""
    inner = _fields(sketch.inner)
    if inner is None:
        return None
    levels = ("l", _int(0, sketch.max_length))
    rows = ("r", _int(0, sketch.rows))
    return [levels, rows, *inner[0]], inner[1]


def _value_fields(mechanism: Any) -> Fields:
    return [("v", _int(0, mechanism.domain_size))], None


def _hashing_fields(mechanism: Any) -> Fields:
    prime = mechanism.prime
    return [("a", _int(1, prime)), ("b", _int(0, prime)), ("y", _int(0, mechanism.g))], None


def _subset_fields(mechanism: Any) -> Fields:
    s, k = mechanism.s, mechanism.domain_size
    values = Annotated[list[Annotated[int, Meta(ge=0, lt=k)]], Meta(min_length=s, max_length=s)]
    return [("v", values)], _increasing


_PLAIN_FIELDS: dict[object, Callable[[Any], Fields]] = {
    GeneralizedRR.check_payload: _value_fields,
    PostRandomization.check_payload: _value_fields,
    HadamardResponse.check_payload: lambda m: ([("j", _int(0, m.order))], None),
    LocalHashing.check_payload: _hashing_fields,
    SubsetSelection.check_payload: _subset_fields,
}
"""The payload fields of each mechanism (by its ``check_payload``) whose only checks left
after the decode are the plain :meth:`FrequencyOracle.implausible` and, for subsets, the
order of the values."""


def _increasing(payloads: list[Any]) -> bool:
    """Each subset strictly increasing (distinct values, sorted)."""
    for payload in payloads:
        v = payload.v
        if any(a >= b for a, b in zip(v, v[1:], strict=False)):
            return False
    return True


def _unary_check(mechanism: UnaryEncoding) -> Callable[[list[Any]], bool]:
    """Unary payloads: strict base64 of exactly ``nbytes``, no bit set past the domain,
    and a plausible count of ones (:meth:`UnaryEncoding.implausible`)."""
    nbytes, lo, hi = mechanism.nbytes, *mechanism.plausible_ones()
    pad = 8 * nbytes - mechanism.domain_size
    # byte -> 0 unless it has a bit set among the last ``pad`` (the bits past the domain)
    stray = bytes(byte & ((1 << pad) - 1) for byte in range(256))
    decode, from_bytes = binascii.a2b_base64, int.from_bytes

    def accept(payloads: list[Any]) -> bool:
        raws = [decode(p.b, strict_mode=True) for p in payloads]
        if any(len(raw) != nbytes for raw in raws):
            return False
        if pad and b"".join(raws)[nbytes - 1 :: nbytes].translate(stray).strip(b"\0"):
            return False
        if lo == 0 and hi == mechanism.domain_size:
            return True
        ones = [from_bytes(raw, "big").bit_count() for raw in raws]
        return lo <= min(ones) and max(ones) <= hi

    return accept


_PLANS: dict[int, tuple[object, _Plan | None]] = {}
"""Each mechanism's plan, by identity (the mechanism kept beside it, so the id stays its
own); a registry holds a few thousand definitions at most."""

MAX_PLANS = 10_000


def _plan_of(definition: MetricDefinition) -> _Plan | None:
    mechanism = definition.mechanism
    known = _PLANS.get(id(mechanism))
    if known is not None and known[0] is mechanism:
        return known[1]
    found = _fields(mechanism)
    plan = None
    if found is not None:
        fields, accept = found
        struct = msgspec.defstruct("Payload", fields, forbid_unknown_fields=True)
        plan = _Plan(msgspec.json.Decoder(list[struct]).decode, len(fields), accept)  # type: ignore[valid-type]
    if len(_PLANS) >= MAX_PLANS:
        _PLANS.clear()
    _PLANS[id(mechanism)] = (mechanism, plan)
    return plan
