"""Which reads are expensive, so that a cheap read never waits behind one.

``ldp serve`` runs its read workers in two lanes (:mod:`ldp_server.forward`): a read
:func:`heavy_read` calls expensive goes to a lane of its own (one process, at a lower CPU
priority), every other read to the light lane. A read's cost is the rows its answer
builds (about 16 µs each): the values (cells) shown of a categorical estimate, of each group of a
breakdown, of a joint metric's marginals (:mod:`aggregator.query.paging`), and a trend's
windows × values; a string discovery and an
export are expensive whatever they hold. In the heavy lane a read that waited longer
than :data:`HEAVY_WAIT_SECONDS` is answered 503 with ``Retry-After`` instead of being
computed for a client that gave up (:func:`install`). In full:
docs/architecture/read-side.md.
"""

from __future__ import annotations

import math
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from flask import Flask, request
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import ServiceUnavailable

from aggregator.query.answers import TREND_VALUES
from aggregator.query.paging import ALL, Rows
from client_sdk.wire import MetricDefinition
from ldp_api.context import shared

__all__ = [
    "HEAVY_ROWS",
    "HEAVY_WAIT_SECONDS",
    "SENT_AT_HEADER",
    "heavy_read",
    "install",
    "rows_of",
]

HEAVY_ROWS = 2048
"""Rows above which a read is expensive: about 30 ms of CPU (16 µs a row), twice the
cost of a small estimate's whole answer; a dashboard page's reads stay below it."""

HEAVY_WAIT_SECONDS = 20.0
"""How long a read may wait in the heavy lane before it is refused (503): a client's
patience (the SDK and browsers wait about this long), under the 40 s the ingest workers
wait for an answer."""

RETRY_AFTER_SECONDS = 5
"""``Retry-After`` of a heavy read refused for waiting too long: a few heavy reads' time."""

SENT_AT_HEADER = "X-Ldp-Sent-At"
"""The Unix time the ingest workers sent a read to the heavy lane."""

ALWAYS_HEAVY = frozenset(["export.get_export_rows"])
"""Endpoints expensive whatever they are asked: an export's rows of a window."""


def _asked(args: MultiDict[str, str]) -> Rows | None:
    """The rows the query asks for; None if it cannot (the view answers a 400)."""
    try:
        return Rows.parse(args)
    except ValueError:
        return None


def rows_of(definition: MetricDefinition, endpoint: str, args: MultiDict[str, str]) -> int:
    """The rows the answer to ``endpoint`` with query ``args`` builds for ``definition``
    (a string metric's discovery counts as :data:`HEAVY_ROWS` + 1)."""
    if definition.kind == "string":
        return HEAVY_ROWS + 1
    if endpoint == "estimates.get_trend" and definition.kind == "distribution":
        return HEAVY_ROWS + 1  # a simultaneous band per window: seconds of CPU
    if endpoint == "estimates.get_trend":  # the values shown in every window kept
        return _trend_values(definition, args) * TREND_WINDOWS
    if definition.kind == "numeric":
        return 1
    asked = _asked(args)
    if asked is None:
        return 0  # a 400 to come
    if args.get("format") == "csv" and asked == Rows():
        asked = Rows(every=True)
    parts = _parts(definition, args)
    return _shown(asked.resolve(sum(parts), len(parts)), parts)


def _parts(definition: MetricDefinition, args: MultiDict[str, str]) -> list[int]:
    """The rows of each table the answer shows: a joint metric's tables
    (:func:`_joint_parts`), else one table of k values per group of ``by`` (or one)."""
    if definition.kind == "joint":
        return _joint_parts(definition, args)
    groups = dict(definition.dimensions).get(args.get("by") or "")
    return [definition.k] * (len(groups) if groups is not None else 1)


def _joint_parts(definition: MetricDefinition, args: MultiDict[str, str]) -> list[int]:
    """The cells of each table a joint estimate shows: the marginal named (``by``,
    ``marginal``), else each attribute's."""
    sizes = {name: len(domain) for name, domain in definition.attributes}
    named = [
        part.strip()
        for key in ("by", "marginal")
        for part in (args.get(key) or "").split(",")
        if part.strip()
    ]
    return [math.prod(sizes.get(name, 1) for name in named)] if named else list(sizes.values())


def _shown(rows: Rows, parts: list[int]) -> int:
    """The rows ``rows`` shows of tables of ``parts`` cells each."""
    if rows.every:
        return sum(parts)
    if rows.top:
        return sum(min(rows.top, part) for part in parts)
    if rows.values is not None:
        return len(rows.values) * len(parts)
    return sum(min(rows.limit or 0, part) for part in parts)


TREND_WINDOWS = 400
"""Windows a trend is costed at: the most the default retention keeps (400 days of day
windows; 336 hours). A trend builds rows only for the values it shows."""


def _trend_values(definition: MetricDefinition, args: MultiDict[str, str]) -> int:
    if definition.kind == "numeric":
        return 1
    asked = _asked(args)
    if asked is None:
        return 0  # a 400 to come
    if asked.how == ALL and not asked.every:  # nothing asked: the trend's default
        return min(TREND_VALUES, definition.k)
    return _shown(asked, [definition.k])


def heavy_read(
    app: Flask, endpoint: str, arguments: Mapping[str, Any], env: dict[str, Any]
) -> bool:
    """Whether the read of ``endpoint`` (its URL ``arguments``, WSGI ``env``) is expensive.

    Reads of a metric that does not exist (a 404 to come) are cheap.
    """
    if endpoint in ALWAYS_HEAVY:
        return True
    if endpoint not in ("estimates.get_estimates", "estimates.get_trend"):
        return False
    args = MultiDict(urllib.parse.parse_qsl(env.get("QUERY_STRING", "")))
    version = args.get("version", "")
    try:
        definition = shared(app=app).registry.get(
            str(arguments.get("name", "")), int(version) if version.isdigit() else None
        )
    except Exception:  # noqa: BLE001  # Redis away: the read itself will say so
        return False
    if definition is None:
        return False
    return rows_of(definition, endpoint, args) > HEAVY_ROWS


def _refuse_stale() -> None:
    """503 a read that waited in the heavy lane longer than :data:`HEAVY_WAIT_SECONDS`."""
    raw = request.headers.get(SENT_AT_HEADER)
    if raw is None:
        return
    try:
        waited = time.time() - float(raw)
    except ValueError:
        return
    if waited > HEAVY_WAIT_SECONDS:
        raise ServiceUnavailable(
            f"the expensive reads ahead of this one took {waited:.0f} s; retry after "
            f"{RETRY_AFTER_SECONDS} s (an answer of fewer values, ?top=, is cheap)",
            retry_after=RETRY_AFTER_SECONDS,
        )


def install(app: Flask) -> None:
    """Refuse, in ``app``, heavy-lane reads that waited too long."""
    app.before_request(_refuse_stale)
