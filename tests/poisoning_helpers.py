"""Honest past hours for the poisoning tests: windows are their entries' arrival hours,
and a test cannot wait hours, so the past is appended with entry ids in those hours (in
batch entries, as the collector writes them)."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from aggregator.stats.kinds import codec_for
from client_sdk.wire import MetricDefinition
from ldp_store import keys, schema


def zipf_population(k: int) -> np.ndarray:
    """Value shares ∝ 1/rank over k values."""
    f = 1.0 / np.arange(1, k + 1)
    return f / f.sum()


def append_entries(
    client: Any, definition: MetricDefinition, ms: int, seq: int, payloads: list[Any]
) -> None:
    """``payloads`` into the version's stream as the collector writes them: batch entries
    of up to :data:`ldp_store.keys.ENTRY_REPORTS` reports (``s`` their sizes, ``b`` their
    JSON comma-joined; the stream's batched count raised by the reports beyond one an
    entry), with entry ids ``ms-seq``, ``ms-(seq + 1)``, … (their window: ``ms``'s)."""
    stream = keys.stream_key(definition.name, definition.version)
    per = keys.ENTRY_REPORTS
    texts = [json.dumps(p, separators=(",", ":")) for p in payloads]
    with client.pipeline(transaction=False) as pipe:
        for n, at in enumerate(range(0, len(texts), per)):
            part = texts[at : at + per]
            sizes = ",".join(str(len(t.encode())) for t in part)
            pipe.xadd(stream, {"s": sizes, "b": ",".join(part)}, id=f"{ms}-{seq + n}")
        beyond = len(texts) - -(-len(texts) // per)
        if beyond:
            pipe.incrby(keys.batched_key(definition.name, definition.version), beyond)
        pipe.execute()


def append_past_hours(
    client: Any, definition: MetricDefinition, seed: int, reports: int, hours: int
) -> None:
    """``hours`` honest hours of ``reports`` reports each (the real codec's encoding of a
    Zipf population), with entry ids in those hours, straight into the stream."""
    gen = np.random.default_rng(seed)
    k = definition.k
    codec = codec_for(definition.oracle)
    this_hour = int(time.time() * 1000) // schema.HOUR_MS * schema.HOUR_MS
    for back in range(hours, 0, -1):
        start = this_hour - back * schema.HOUR_MS
        values = gen.choice(k, size=reports, p=zipf_population(k))
        append_entries(client, definition, start, 1, codec.to_payloads(codec.encode(values, gen)))


def append_this_hour(client: Any, definition: MetricDefinition, payloads: list[Any]) -> None:
    """Honest payloads straight into the stream, with entry ids at the start of the current
    hour (a test's bulk of honest reports, faster than the collector; the window is the
    same)."""
    start = int(time.time() * 1000) // schema.HOUR_MS * schema.HOUR_MS
    append_entries(client, definition, start, 1, payloads)


def append_beside_last(client: Any, definition: MetricDefinition, payloads: list[Any]) -> str:
    """Honest payloads straight into the stream, with entry ids in the millisecond of its
    last entry (reports that just came through the collector): the same window as theirs,
    whatever the time is now, so a test need not wait out an hour's end. Returns that
    window (hour).
    """
    stream = keys.stream_key(definition.name, definition.version)
    last = client.xinfo_stream(stream)["last-generated-id"]
    text = last.decode() if isinstance(last, bytes) else last
    ms, seq = (int(part) for part in text.split("-"))
    append_entries(client, definition, ms, seq + 1, payloads)
    return schema.window_names(ms)[0]


def counted(client: Any, definition: MetricDefinition) -> int:
    """The reports the aggregator has counted of a metric version (all windows, all
    shards): the counts hashes' ``n``, a cheap read to wait on (an estimate is not)."""
    return sum(
        int(client.hget(keys.counts_key(definition.name, definition.version, "all", s), "n") or 0)
        for s in range(definition.shards)
    )


def alarm_gauges(metrics: str) -> dict[tuple[str, str, str], float]:
    """The ``ldp_poisoning_alarm`` gauges of a ``/metrics`` page, by metric, kind and
    granularity."""
    return {
        (s.labels["metric"], s.labels["kind"], s.labels["granularity"]): s.value
        for family in text_string_to_metric_families(metrics)
        if family.name == "ldp_poisoning_alarm"
        for s in family.samples
    }
