"""The Redis contract of alert rules and their notifications.

Every key shares the hash tag ``{ldp:alerts}`` (one slot on a Redis Cluster):

* ``rules`` (hash: rule id → the rule as JSON, written by operators);
* ``firing`` (hash: rule id → the firing as JSON; ``HSETNX`` makes exactly one
  evaluator, of any number of workers, the one that fires a rule);
* ``acks``, ``silences``, ``last`` (hashes: rule id → JSON);
* ``events`` (stream: what happened, newest kept, for the dashboard and the API);
* ``outbox`` (stream, group :data:`OUTBOX_GROUP`): one entry per notification to send,
  acknowledged only once delivered, scheduled for a retry or dead-lettered, so a
  notification is delivered at least once across crashes;
* ``retry`` (sorted set: outbox payload → due time) and ``dead`` (list: payloads that
  failed every attempt, for operators);
* ``poisoned:<metric>:<version>:<window>:<kind>`` (``SET NX`` with a TTL): a poisoning
  alarm already notified.

In full: ``docs/guides/alerts.md``.
"""

from __future__ import annotations

import json
from typing import Any, cast

import redis

from ldp_store.connection import as_text

__all__ = [
    "DEAD_KEPT",
    "EVENTS_KEPT",
    "OUTBOX_GROUP",
    "ack_outbox",
    "add_event",
    "clear_firing",
    "dead_letter",
    "dead_letter_count",
    "dead_letters",
    "delete_rule",
    "due_retries",
    "enqueue",
    "ensure_outbox_group",
    "fire",
    "first_poisoning",
    "firings",
    "get_rule",
    "outbox_length",
    "read_outbox",
    "recent_events",
    "record_evaluation",
    "rules",
    "put_rule",
    "schedule_retry",
    "set_ack",
    "set_silence",
    "states",
]

TAG = "ldp:{ldp:alerts}"
OUTBOX_GROUP = "notifiers"
"""The consumer group of every process that sends notifications."""
EVENTS_KEPT = 1000
"""Events kept for the dashboard (approximately: ``XADD MAXLEN ~``). The events are a
history for people, not data: the oldest may go."""
DEAD_KEPT = 1000
"""Dead letters kept (the newest): enough to see a broken endpoint's failures, bounded so
a receiver that is down for a month cannot fill Redis."""


def _key(name: str) -> str:
    return f"{TAG}:{name}"


def _load(raw: bytes | str | None) -> dict[str, Any] | None:
    return None if raw is None else cast(dict[str, Any], json.loads(raw))


def _all(client: redis.Redis, name: str) -> dict[str, dict[str, Any]]:
    raw = client.hgetall(_key(name))
    return {as_text(k): cast(dict[str, Any], json.loads(v)) for k, v in raw.items()}


# -- rules (operators) --------------------------------------------------------------------
def put_rule(client: redis.Redis, rule_id: str, rule: dict[str, Any]) -> None:
    """Create or replace a rule."""
    client.hset(_key("rules"), rule_id, json.dumps(rule, sort_keys=True))


def get_rule(client: redis.Redis, rule_id: str) -> dict[str, Any] | None:
    """One rule, or None."""
    return _load(cast(bytes | None, client.hget(_key("rules"), rule_id)))


def rules(client: redis.Redis) -> dict[str, dict[str, Any]]:
    """Every rule by id."""
    return _all(client, "rules")


def delete_rule(client: redis.Redis, rule_id: str) -> bool:
    """Forget a rule and its state; whether it existed."""
    with client.pipeline(transaction=True) as pipe:
        pipe.hdel(_key("rules"), rule_id)
        for name in ("firing", "acks", "silences", "last"):
            pipe.hdel(_key(name), rule_id)
        return bool(pipe.execute()[0])


# -- state (evaluators and operators) -----------------------------------------------------
def fire(client: redis.Redis, rule_id: str, firing: dict[str, Any]) -> bool:
    """Mark a rule firing unless it already is; True for the one caller that did."""
    return bool(client.hsetnx(_key("firing"), rule_id, json.dumps(firing, sort_keys=True)))


def clear_firing(client: redis.Redis, rule_id: str) -> None:
    """End a firing (resolved) and its acknowledgement."""
    with client.pipeline(transaction=True) as pipe:
        pipe.hdel(_key("firing"), rule_id)
        pipe.hdel(_key("acks"), rule_id)
        pipe.execute()


def firings(client: redis.Redis) -> dict[str, dict[str, Any]]:
    """Every firing rule's firing, by rule id."""
    return _all(client, "firing")


def set_ack(client: redis.Redis, rule_id: str, ack: dict[str, Any]) -> None:
    """Acknowledge a firing."""
    client.hset(_key("acks"), rule_id, json.dumps(ack, sort_keys=True))


def set_silence(client: redis.Redis, rule_id: str, until: float | None) -> None:
    """Silence a rule's notifications until a Unix time (None: unsilence)."""
    if until is None:
        client.hdel(_key("silences"), rule_id)
    else:
        client.hset(_key("silences"), rule_id, json.dumps({"until": until}))


def record_evaluation(client: redis.Redis, evaluations: dict[str, dict[str, Any]]) -> None:
    """Keep each rule's latest evaluation (what the dashboard shows)."""
    if evaluations:
        client.hset(
            _key("last"),
            mapping={k: json.dumps(v, sort_keys=True) for k, v in evaluations.items()},
        )


def states(client: redis.Redis) -> dict[str, dict[str, dict[str, Any]]]:
    """``{"firing", "acks", "silences", "last"}`` → rule id → JSON, in one round trip."""
    names = ("firing", "acks", "silences", "last")
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hgetall(_key(name))
        replies = pipe.execute()
    return {
        name: {as_text(k): json.loads(v) for k, v in cast(dict[Any, Any], reply).items()}
        for name, reply in zip(names, replies, strict=True)
    }


POISONING_TTL_SECONDS = 8 * 86400
"""How long a poisoning alarm's "already notified" mark is kept: longer than the day
window it is about lives in the newest-window tests (after which it is not re-raised)."""


def first_poisoning(client: redis.Redis, alarm: str) -> bool:
    """Mark a poisoning alarm (``metric:version:window:kind``) notified; True for the one
    caller that marked it first."""
    return bool(client.set(_key(f"poisoned:{alarm}"), 1, nx=True, ex=POISONING_TTL_SECONDS))


# -- history -------------------------------------------------------------------------------
def add_event(client: redis.Redis, event: dict[str, Any]) -> str:
    """Append an event to the history; its id (the idempotency key of its notifications)."""
    entry = client.xadd(
        _key("events"),
        {"event": json.dumps(event, sort_keys=True)},
        maxlen=EVENTS_KEPT,
        approximate=True,
    )
    return as_text(entry)


def recent_events(client: redis.Redis, count: int = 100) -> list[dict[str, Any]]:
    """The newest events first, each with its ``id``."""
    entries = cast(list[Any], client.xrevrange(_key("events"), count=count))
    out = []
    for entry_id, fields in entries:
        event = json.loads(fields[b"event"] if b"event" in fields else fields["event"])
        event["id"] = as_text(entry_id)
        out.append(event)
    return out


# -- the outbox ----------------------------------------------------------------------------
def ensure_outbox_group(client: redis.Redis) -> None:
    """Create the notifiers' group (and the outbox) if missing."""
    try:
        client.xgroup_create(_key("outbox"), OUTBOX_GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def enqueue(client: redis.Redis, delivery: dict[str, Any]) -> str:
    """Add a notification to send (never trimmed: each is removed once handled)."""
    entry = client.xadd(_key("outbox"), {"d": json.dumps(delivery, sort_keys=True)})
    return as_text(entry)


def read_outbox(
    client: redis.Redis, consumer: str, count: int, block_ms: int | None, pending: bool = False
) -> list[tuple[str, dict[str, Any]]]:
    """Notifications for ``consumer``: its own unacknowledged ones (``pending``, what a
    restarted notifier finishes first) or new ones, waiting up to ``block_ms``."""
    reply = client.xreadgroup(
        OUTBOX_GROUP,
        consumer,
        {_key("outbox"): "0" if pending else ">"},
        count=count,
        block=None if pending else block_ms,
    )
    out = []
    for _, entries in cast(list[Any], reply or []):
        for entry_id, fields in entries:
            if not fields:  # deleted while pending
                client.xack(_key("outbox"), OUTBOX_GROUP, entry_id)
                continue
            raw = fields[b"d"] if b"d" in fields else fields["d"]
            out.append((as_text(entry_id), cast(dict[str, Any], json.loads(raw))))
    return out


def ack_outbox(client: redis.Redis, entry_id: str) -> None:
    """A notification handled (sent, rescheduled or dead-lettered): drop it."""
    with client.pipeline(transaction=True) as pipe:
        pipe.xack(_key("outbox"), OUTBOX_GROUP, entry_id)
        pipe.xdel(_key("outbox"), entry_id)
        pipe.execute()


def schedule_retry(client: redis.Redis, delivery: dict[str, Any], due: float) -> None:
    """Try a notification again at Unix time ``due``."""
    client.zadd(_key("retry"), {json.dumps(delivery, sort_keys=True): due})


def due_retries(client: redis.Redis, now: float, count: int = 100) -> list[dict[str, Any]]:
    """Move the retries due by ``now`` back into the outbox; returns them.

    Each is queued *before* it leaves the set (a crash in between sends it twice, never
    not at all); of two notifiers moving one retry, the one whose ``ZREM`` lost deletes
    its copy again.
    """
    members = cast(list[bytes], client.zrangebyscore(_key("retry"), "-inf", now, 0, count))
    moved = []
    for member in members:
        delivery = cast(dict[str, Any], json.loads(member))
        entry = enqueue(client, delivery)
        if client.zrem(_key("retry"), member):
            moved.append(delivery)
        else:
            client.xdel(_key("outbox"), entry)
    return moved


def dead_letter(client: redis.Redis, delivery: dict[str, Any]) -> None:
    """Keep a notification that failed every attempt, for operators to see."""
    with client.pipeline(transaction=True) as pipe:
        pipe.lpush(_key("dead"), json.dumps(delivery, sort_keys=True))
        pipe.ltrim(_key("dead"), 0, DEAD_KEPT - 1)
        pipe.execute()


def dead_letters(client: redis.Redis, count: int = 100) -> list[dict[str, Any]]:
    """The newest dead letters first."""
    raw = client.lrange(_key("dead"), 0, count - 1)
    return [cast(dict[str, Any], json.loads(r)) for r in raw]


def outbox_length(client: redis.Redis) -> int:
    """Notifications queued and not yet handled (for ``/metrics``)."""
    return int(client.xlen(_key("outbox")))


def dead_letter_count(client: redis.Redis) -> int:
    """How many dead letters are kept (for ``/metrics``)."""
    return int(client.llen(_key("dead")))
