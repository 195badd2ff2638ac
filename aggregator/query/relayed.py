"""Reports that came through an Oblivious HTTP relay, as the read side sees them: what
still waits in a version's shuffle pools and until when (:func:`relayed_waiting`), and
the ε_c towards the collector of what was released (:func:`relayed_guarantee`: from the
smallest batch released so far, a device's reports per batch bounded by the periods a
pool can span). In full: ``docs/security/threat-model.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import redis

from aggregator.query.answers import RelayedWaiting, ShuffledEpsilon
from aggregator.stats.accounting import reports_per_batch
from aggregator.stats.shuffling import relayed_view
from client_sdk.wire import MetricDefinition
from ldp_store import shuffle

__all__ = ["relayed_epsilon", "relayed_guarantee", "relayed_waiting", "relayed_waiting_many"]


def _utc(when: float) -> str:
    return datetime.fromtimestamp(round(when), UTC).isoformat().replace("+00:00", "Z")


def relayed_waiting(client: redis.Redis, definition: MetricDefinition) -> RelayedWaiting | None:
    """The relayed reports of a version acknowledged but not yet in its stream; None if
    none wait."""
    return relayed_waiting_many(client, [definition])[0]


def relayed_waiting_many(
    client: redis.Redis, definitions: Sequence[MetricDefinition]
) -> list[RelayedWaiting | None]:
    """:func:`relayed_waiting` of each definition, their pools read in one pipeline."""
    versions = [(d.name, d.version, d.shards) for d in definitions]
    return [_waiting(found) for found in shuffle.waiting_many(client, versions)]


def _waiting(found: shuffle.Waiting | None) -> RelayedWaiting | None:
    if found is None:
        return None
    by = _utc(found.released_by)
    return RelayedWaiting(
        reports=found.reports,
        released_by=by,
        note=(
            f"{found.reports:,} report{'s' if found.reports != 1 else ''} sent through a "
            f"relay wait{'s' if found.reports == 1 else ''} in the shuffle pool for a batch "
            f"and {'is' if found.reports == 1 else 'are'} not in n yet: counted by {by} at "
            "the latest (LDP_SHUFFLE_MAX_DELAY after the oldest arrived), sooner if the pool "
            "fills (LDP_SHUFFLE_MIN_BATCH)"
        ),
    )


def relayed_guarantee(
    client: redis.Redis, definition: MetricDefinition, min_batch: int, max_delay: float
) -> tuple[ShuffledEpsilon | None, int, bool]:
    """ε_c towards the collector of a version's relayed reports, with the batch it is
    computed for and whether that batch was released (else it is B: none was yet).

    The smallest batch released so far bounds every batch's ε_c (ε_c falls as a batch
    grows); a device's reports in a batch are bounded by the budget over the periods the
    longest-waiting pool can span: the configured bound or a longer one a collector
    recorded for these pools.

    Args:
        client: Redis.
        definition: the metric version.
        min_batch: B (``LDP_SHUFFLE_MIN_BATCH``).
        max_delay: the configured release bound (``LDP_SHUFFLE_MAX_DELAY``).
    """
    releases = shuffle.released(client, definition.name, definition.version, definition.shards)
    delay = max(max_delay, releases.delay or 0.0)
    per_batch = reports_per_batch(definition.budget, delay)
    released = releases.smallest is not None
    batch = releases.smallest if releases.smallest is not None else min_batch
    epsilon = definition.oracle.epsilon
    return relayed_epsilon(epsilon, batch, per_batch, min_batch, released), batch, released


def relayed_epsilon(
    epsilon: float, batch: int, budgeted: int | None, min_batch: int, released: bool
) -> ShuffledEpsilon | None:
    """The metric page's ε towards the collector's operator behind an Oblivious HTTP relay
    (:func:`aggregator.stats.shuffling.relayed_view`)."""
    return ShuffledEpsilon.of(relayed_view(epsilon, batch, budgeted, min_batch, released))
