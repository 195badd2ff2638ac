"""The stream worker against real Redis servers: exact counts, whatever happens.

Every expected count is computed offline from exactly the payloads appended (each made
by the real SDK's ``perturb`` with a seeded generator) with the mechanism's reference
decoder ``m.support``. A count above it would be a double count, below it a loss.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from click.testing import CliRunner

from aggregator.query.window import lag, lag_details, list_windows, read_counts
from aggregator.stats.codecs import Counts
from aggregator.stats.frequency import estimate_from_counts
from aggregator.stats.kinds import codec_for
from aggregator.stream.entries import bulk_json
from aggregator.stream.worker import Worker, ensure_group
from client_sdk.wire import MAX_RETENTION_SECONDS, MetricDefinition
from ldp_server.cli import main
from ldp_store import keys
from ldp_store.connection import is_cluster
from ldp_store.registry import Registry
from ldp_store.retention import RetentionPolicy
from ldp_store.schema import window_names

ROOT = Path(__file__).resolve().parents[2]
GROUP = keys.GROUP

_LOADER = """
for i = 1, #ARGV do redis.call('XADD', KEYS[1], '*', 'p', ARGV[i]) end
if KEYS[2] then redis.call('XADD', KEYS[2], '*', 's', KEYS[1]) end
return #ARGV
"""
"""XADD each ARGV to KEYS[1] and, given KEYS[2], ring that doorbell as the collector does."""


# -- helpers -------------------------------------------------------------------------------


KEEP = RetentionPolicy(hour=MAX_RETENTION_SECONDS, day=MAX_RETENTION_SECONDS)
"""A retention that keeps the windows of 2024 these tests write."""


def make_metric(
    client: redis.Redis, name: str, mechanism: str, k: int = 16, epsilon: float = 1.0
) -> MetricDefinition:
    spec = {"domain": [f"v{i}" for i in range(k)], "epsilon": epsilon, "mechanism": mechanism}
    return Registry(client).put(name, spec).definition


def stream(d: MetricDefinition) -> str:
    return keys.stream_key(d.name, d.version)


def perturbed(d: MetricDefinition, values: Sequence[int], seed: int) -> list[str]:
    """SDK reports of these true values, as the compact JSON the collector appends."""
    rng = random.Random(seed)
    m = d.mechanism
    return [json.dumps(m.perturb(v, rng=rng), separators=(",", ":")) for v in values]


def pooled(d: MetricDefinition, reports: int, seed: int, pool: int = 2000) -> list[str]:
    """Many reports drawn from a pool of distinct SDK reports (cheap for big backlogs)."""
    rng = random.Random(seed)
    distinct = perturbed(d, [rng.randrange(d.k) for _ in range(pool)], seed)
    return rng.choices(distinct, k=reports)


def offline(d: MetricDefinition, payloads: Sequence[str]) -> Counts:
    """n and C(v) from the reference per-report decoder, independent of the worker."""
    support = np.zeros(d.k, dtype=np.int64)
    for payload, times in Counter(payloads).items():
        for v in d.mechanism.support(json.loads(payload)):
            support[v] += times
    return Counts(len(payloads), support)


def appended(
    client: redis.Redis,
    name: str,
    mechanism: str,
    k: int,
    reports: int,
    seed: int,
    pool: int = 2000,
) -> tuple[MetricDefinition, list[str]]:
    """A new metric and its stream holding ``reports`` of its :func:`pooled` payloads."""
    d = make_metric(client, name, mechanism, k=k)
    payloads = pooled(d, reports, seed=seed, pool=pool)
    append(client, d, payloads)
    return d, payloads


def append(
    client: redis.Redis, d: MetricDefinition, payloads: Sequence[str], *, ring: bool = True
) -> None:
    """XADD each payload as field ``p`` (in a script, 5,000 per call, for speed), and ring
    the doorbell as the collector's append does (on a single Redis, unless not ``ring``)."""
    loader = client.register_script(_LOADER)
    bell = [keys.DOORBELL] if ring and not is_cluster(client) else []
    for i in range(0, len(payloads), 5000):
        loader(keys=[stream(d), *bell], args=list(payloads[i : i + 5000]))


def append_ids(client: redis.Redis, d: MetricDefinition, payloads: Sequence[str]) -> list[bytes]:
    """XADD each payload, returning the entry ids."""
    pipe = client.pipeline(transaction=False)
    for payload in payloads:
        pipe.xadd(stream(d), {"p": payload})
    return list(pipe.execute())


def assert_counts(client: redis.Redis, d: MetricDefinition, want: Counts) -> None:
    got = read_counts(client, d)
    assert got.n == want.n
    assert got.support.tolist() == want.support.tolist()


def assert_drained(client: redis.Redis, d: MetricDefinition) -> None:
    """Nothing pending, nothing dead-lettered, the stream trimmed to nothing."""
    assert lag_details(client, d).pending == 0
    assert client.xlen(keys.dead_key(d.name, d.version)) == 0
    assert client.xlen(stream(d)) == 0
    assert not client.exists(keys.batched_key(d.name, d.version))  # no report left over


def worker(client: redis.Redis, **kwargs: Any) -> Worker:
    kwargs.setdefault("handle_signals", False)
    return Worker(client, **kwargs)


def counted(client: redis.Redis, d: MetricDefinition) -> int:
    return int(client.hget(keys.counts_key(d.name, d.version), "n") or 0)  # type: ignore[arg-type]


def start_worker(url: str, name: str, log: Path, *options: str) -> subprocess.Popen[bytes]:
    """``ldp aggregate`` as a real process, as production runs it."""
    cmd = [sys.executable, "-m", "ldp_server", "aggregate", "--redis-url", url, "--name", name]
    with log.open("ab") as out:
        return subprocess.Popen([*cmd, *options], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def kill_a_of_two(
    url: str,
    tmp_path: Path,
    processes: list[subprocess.Popen[bytes]],
    under_way: Callable[[], bool],
    *options: str,
) -> subprocess.Popen[bytes]:
    """Workers ``a`` and ``b`` started with ``options`` (logs in ``tmp_path``); once
    ``under_way()``, ``a`` killed with SIGKILL. ``b``, still running."""
    a = start_worker(url, "a", tmp_path / "a.log", *options)
    b = start_worker(url, "b", tmp_path / "b.log", *options)
    processes += [a, b]
    wait_until(under_way, 60, "both workers under way")
    a.send_signal(signal.SIGKILL)
    a.wait()
    return b


def restart_once(url: str, name: str) -> None:
    """Restart a killed worker in burst mode, as a real process: it must drain cleanly."""
    restart = subprocess.run(
        [sys.executable, "-m", "ldp_server", "aggregate", "--once"]
        + ["--redis-url", url, "--name", name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert restart.returncode == 0, restart.stdout + restart.stderr
    assert "dead_lettered=0" in restart.stdout


def wait_until(condition: Any, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


# -- (1) burst mode: exact counts for every mechanism, on Redis 7 and 6.2 -----------------


def test_burst_mode_counts_exactly_every_mechanism(any_redis: Any) -> None:
    client = any_redis.client()
    expected: dict[str, tuple[MetricDefinition, Counts, list[bytes]]] = {}
    for seed, mech in enumerate(["grr", "oue", "olh", "hr", "ss"]):
        d = make_metric(client, f"app.{mech}", mech, k=16)
        rng = random.Random(seed)
        payloads = perturbed(d, [rng.randrange(16) for _ in range(1500)], seed)
        ids = append_ids(client, d, payloads)
        expected[mech] = (d, offline(d, payloads), ids)
    stats = worker(client, batch_size=700).run(once=True)
    assert stats.counted == 5 * 1500 and stats.dead_lettered == 0 and stats.streams == 5
    for d, want, ids in expected.values():
        assert_counts(client, d, want)
        assert_drained(client, d)
        hours = Counter(window_names(int(i.split(b"-")[0]))[0] for i in ids)
        days = Counter(window_names(int(i.split(b"-")[0]))[2] for i in ids)
        for window, n in (hours + days).items():
            assert read_counts(client, d, window).n == n
        assert set(list_windows(client, d)) == {"all", *hours, *days}
        assert list_windows(client, d)[-1] == "all"


def test_batches_spanning_an_hour_are_split_by_window(redis_db: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.hours", "grr", k=4)
    payloads = perturbed(d, [0, 1, 2, 3, 0, 1], seed=5)
    # 2024-01-01T23:59:59.998 … 2024-01-02T00:00:00.001 and 01:00: two days, three hours
    start = 1704153599998
    for i, ms in enumerate([start, start + 1, start + 2, start + 3, start + 3, start + 3600002]):
        client.xadd(stream(d), {"p": payloads[i]}, id=f"{ms}-{i}")
    # windows of 2024 are kept (else past the default retention, they are not written)
    worker(client, retention=KEEP).run(once=True)
    assert_counts(client, d, offline(d, payloads))
    assert read_counts(client, d, "hour:2024-01-01T23").n == 2
    assert read_counts(client, d, "hour:2024-01-02T00").n == 3
    assert read_counts(client, d, "hour:2024-01-02T01").n == 1
    assert read_counts(client, d, "day:2024-01-01").n == 2
    assert read_counts(client, d, "day:2024-01-02").n == 4
    for window, part in (("hour:2024-01-01T23", payloads[:2]), ("day:2024-01-02", payloads[2:])):
        assert read_counts(client, d, window).support.tolist() == offline(d, part).support.tolist()
    assert list_windows(client, d) == [
        "hour:2024-01-02T01",
        "day:2024-01-02",
        "hour:2024-01-02T00",
        "hour:2024-01-01T23",
        "day:2024-01-01",
        "all",
    ]
    assert window_names(start) == ("hour:2024-01-01T23", 1704150000, "day:2024-01-01", 1704067200)


def test_every_version_is_counted_separately(redis_db: Any) -> None:
    client = redis_db.client()
    v1 = make_metric(client, "app.theme", "oue", k=8, epsilon=1.0)
    p1 = perturbed(v1, [1] * 300, seed=1)
    append(client, v1, p1)
    v2 = make_metric(client, "app.theme", "oue", k=8, epsilon=2.0)
    assert v2.version == 2
    p2 = perturbed(v2, [2] * 200, seed=2)
    append(client, v2, p2)
    worker(client).run(once=True)
    assert_counts(client, v1, offline(v1, p1))
    assert_counts(client, v2, offline(v2, p2))


# -- (4) distinct entries count separately; the commit script is idempotent ----------------


def test_the_same_payload_twice_is_two_reports(redis_db: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.twice", "grr", k=4)
    payload = perturbed(d, [3], seed=1)[0]
    append(client, d, [payload, payload])
    worker(client).run(once=True)
    assert_counts(client, d, offline(d, [payload, payload]))
    assert read_counts(client, d).n == 2


def test_the_commit_script_counts_each_entry_once(any_redis: Any) -> None:
    client = any_redis.client()
    d = make_metric(client, "app.idem", "oue", k=8)
    payloads = perturbed(d, [0, 1, 2, 3, 4], seed=3)
    append(client, d, payloads)
    w = worker(client, name="w")
    ensure_group(client, stream(d))
    entries = client.xreadgroup(GROUP, "w", {stream(d): ">"}, count=10)[0][1]
    ids = [entry_id for entry_id, _ in entries]
    codec = codec_for(d.mechanism)
    batch = codec.parse([json.loads(fields[b"p"]) for _, fields in entries])

    # Another worker acknowledged (and counted) the first entry: nothing is counted and
    # the other four are reported, still pending, now owned by us.
    client.xack(stream(d), GROUP, ids[0])
    rows = np.arange(1, 5)
    assert w.commit(d, ids, batch) == (0, ids[1:])
    assert read_counts(client, d).n == 0
    assert client.xpending(stream(d), GROUP)["pending"] == 4
    assert {c["name"]: c["pending"] for c in client.xpending(stream(d), GROUP)["consumers"]} == {
        b"w": 4
    }
    assert w.commit(d, ids[1:], batch.take(rows)) == (4, [])
    assert_counts(client, d, offline(d, payloads[1:]))
    before = client.hgetall(keys.counts_key(d.name, d.version))
    # Re-running the script for entries already acked changes nothing, however often.
    for _ in range(3):
        assert w.commit(d, ids[1:], batch.take(rows)) == (0, [])
    assert client.hgetall(keys.counts_key(d.name, d.version)) == before
    assert client.xlen(stream(d)) == 0  # all acked: trimmed


# -- (5) dead letters ----------------------------------------------------------------------


def test_undecodable_entries_are_dead_lettered_and_the_rest_counted(any_redis: Any) -> None:
    client = any_redis.client()
    oue = make_metric(client, "app.bits", "oue", k=32)
    ss = make_metric(client, "app.subset", "ss", k=16)
    good_oue = perturbed(oue, list(range(32)) * 5, seed=1)
    good_ss = perturbed(ss, list(range(16)) * 5, seed=2)
    s = ss.mechanism.s  # type: ignore[attr-defined]
    whole = list(range(s))
    half = s // 2
    merged_pair = [  # two halves that a naive bulk parse would merge into one valid payload
        '{"v":[' + ",".join(map(str, whole[:half])),
        ",".join(map(str, whole[half:])) + "]}",
    ]
    doubled = json.dumps({"v": whole}, separators=(",", ":"))
    bad_oue = [
        "{not json",
        json.dumps({"b": "AAAA"}),  # wrong bit length
        json.dumps({"b": "AAAAAAA="}, separators=(",", ":")) + " ",  # 5 bytes: still wrong
        json.dumps({"v": 3}),  # another mechanism's payload
        "[]",
    ]
    append(client, oue, good_oue[:60] + bad_oue + good_oue[60:])
    client.xadd(stream(oue), {"x": "no p field"})
    append(client, ss, good_ss[:10] + merged_pair + [doubled + "," + doubled] + good_ss[10:])

    # An entry delivered too often (a poison pill); a dead worker holding every other
    # entry of the stream (reclaimed with XAUTOCLAIM), one of which was deleted meanwhile.
    ensure_group(client, stream(oue))
    client.xreadgroup(GROUP, "w", {stream(oue): ">"}, count=1)  # delivers good_oue[0]
    first = client.xrange(stream(oue), count=1)[0][0]
    client.xclaim(stream(oue), GROUP, "w", 0, [first], retrycount=50)
    deleted = append_ids(client, oue, perturbed(oue, [7], seed=9))[0]
    client.xreadgroup(GROUP, "ghost", {stream(oue): ">"}, count=10_000)
    client.xdel(stream(oue), deleted)

    stats = worker(client, name="w", claim_idle_ms=0, batch_size=50).run(once=True)

    assert_counts(client, oue, offline(oue, good_oue[1:]))
    assert_counts(client, ss, offline(ss, good_ss))
    dead_oue = client.xrange(keys.dead_key(oue.name, oue.version))
    dead_ss = client.xrange(keys.dead_key(ss.name, ss.version))
    for _, fields in dead_oue + dead_ss:
        assert set(fields) == {b"p", b"reason"}  # the payload and the reason, nothing else
    reasons = {f[b"p"].decode(): f[b"reason"].decode() for _, f in dead_oue + dead_ss if f[b"p"]}
    assert reasons["{not json"].startswith("invalid JSON")
    assert "8 base64 characters" in reasons[bad_oue[1]]
    assert "5 bytes" in reasons[bad_oue[2]]
    assert all(p in reasons for p in bad_oue)
    assert all(p in reasons for p in merged_pair) and doubled + "," + doubled in reasons
    assert reasons[good_oue[0]].startswith("delivered 51 times")
    empty = sorted(f[b"reason"].decode() for _, f in dead_oue if not f[b"p"])
    assert empty in (["no field 'p'"], ["entry deleted from the stream", "no field 'p'"])
    # Redis 6.2 hands the deleted entry to XAUTOCLAIM (dead-lettered), 7.0 drops it itself.
    assert len(dead_oue) in (len(bad_oue) + 2, len(bad_oue) + 3)
    assert len(dead_ss) == 3
    assert stats.dead_lettered == len(dead_oue) + len(dead_ss)
    assert lag_details(client, oue).pending == 0 and lag_details(client, ss).pending == 0
    assert client.xlen(stream(oue)) == 0 and client.xlen(stream(ss)) == 0
    # A second run finds nothing to do: no loop, no second dead letter.
    again = worker(client, name="w", claim_idle_ms=0).run(once=True)
    assert again.counted == again.dead_lettered == 0


def test_bulk_parse_is_exactly_the_per_entry_parse() -> None:
    pair = ['{"v":[1', "2]}", '{"v":3},{"v":4}']
    blob = ",".join(pair).encode()
    assert json.loads(b"[" + blob + b"]") == [{"v": [1, 2]}, {"v": 3}, {"v": 4}]  # fooled
    assert bulk_json(blob, [len(p) for p in pair]) is None  # not us
    ok = ['{"b":"x,{]"}', '{"v":[1,2]}', " 3 "]
    assert bulk_json(",".join(ok).encode(), [len(p) for p in ok]) == [json.loads(p) for p in ok]
    assert bulk_json(b'{"a":"\\""}', [10]) is None  # backslashes: per-entry parse


def test_bulk_parse_never_merges_entries_fuzz() -> None:
    """Valid JSON cut at random places: whatever the bulk parse accepts, each entry parses
    alone to the same value (thousands of these cuts fool a naive bulk parse)."""
    rng = random.Random(1)

    def value(depth: int = 0) -> Any:
        r = rng.random()
        if depth > 2 or r < 0.3:
            return rng.choice([1, 23, "a", "{", "]", "x,y", None, True])
        if r < 0.65:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice("abc{}[],"): value(depth + 1) for _ in range(rng.randint(0, 3))}

    accepted = 0
    for _ in range(20_000):
        text = json.dumps([value() for _ in range(rng.randint(1, 4))], separators=(",", ":"))
        text = text[1:-1]
        if len(text) < 2:
            continue
        cuts = sorted(rng.sample(range(1, len(text)), min(rng.randint(1, 4), len(text) - 1)))
        parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        parts = [p[1:] if i and p.startswith(",") else p for i, p in enumerate(parts)]
        if not all(parts):
            continue
        out = bulk_json(",".join(parts).encode(), [len(p) for p in parts])
        if out is not None:
            accepted += 1
            assert out == [json.loads(p) for p in parts], parts
    assert accepted > 100


# -- (6) trimming --------------------------------------------------------------------------


def test_trimming_keeps_exactly_what_some_group_still_needs(any_redis: Any) -> None:
    client = any_redis.client()
    d, payloads = appended(client, "app.trim", "grr", 4, 1000, seed=4, pool=50)
    ensure_group(client, stream(d))
    # A live consumer holds entries 100..149 (delivered, not yet acked).
    client.xreadgroup(GROUP, "other", {stream(d): ">"}, count=100)
    client.xack(stream(d), GROUP, *[i for i, _ in client.xrange(stream(d), count=100)])
    held = client.xreadgroup(GROUP, "other", {stream(d): ">"}, count=50)[0][1]
    held_ids = [entry_id for entry_id, _ in held]
    worker(client, claim_idle_ms=3_600_000).run(once=True)
    assert read_counts(client, d).n == 850
    remaining = [entry_id for entry_id, _ in client.xrange(stream(d))]
    assert remaining[: len(held_ids)] == held_ids  # the oldest pending entry is the floor
    assert len(remaining) == 900  # everything from it on: acked entries above it wait
    # The other consumer commits (here: acks) and the next commit trims the rest.
    client.xack(stream(d), GROUP, *held_ids)
    append(client, d, payloads[:1])
    worker(client).run(once=True)
    assert client.xlen(stream(d)) == 0
    # A second group that has read nothing keeps every entry.
    client.xgroup_create(stream(d), "audit", id="0")
    append(client, d, payloads[:10])
    worker(client).run(once=True)
    assert client.xlen(stream(d)) == 10 and read_counts(client, d).n == 861
    assert lag(client, d) == 10


# -- reclaiming a dead consumer's entries, continuous mode, discovery ----------------------


def test_a_dead_consumers_entries_are_reclaimed(any_redis: Any) -> None:
    client = any_redis.client()
    d, payloads = appended(client, "app.claim", "hr", 16, 3000, seed=6, pool=300)
    ensure_group(client, stream(d))
    client.xreadgroup(GROUP, "dead-worker", {stream(d): ">"}, count=1200)
    stats = worker(client, claim_idle_ms=0, batch_size=500).run(once=True)
    assert stats.claimed == 1200
    assert_counts(client, d, offline(d, payloads))
    assert_drained(client, d)


def test_continuous_mode_discovers_new_metrics_and_stops_on_request(redis_db: Any) -> None:
    client = redis_db.client()
    first = make_metric(client, "app.first", "grr", k=8)
    w = worker(client, block_ms=50, discover_interval=0.1)
    thread = threading.Thread(target=w.run)
    thread.start()
    try:
        p1 = perturbed(first, [1, 2, 3] * 10, seed=1)
        append(client, first, p1)
        later = make_metric(client, "app.later", "ss", k=8)
        p2 = perturbed(later, [4, 5] * 10, seed=2)
        append_ids(client, later, p2)  # one by one: the blocking read sees single entries
        wait_until(lambda: read_counts(client, later).n == 20, 20, "the new metric counted")
        wait_until(lambda: read_counts(client, first).n == 30, 20, "the first metric counted")
    finally:
        w.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert_counts(client, first, offline(first, p1))
    assert_counts(client, later, offline(later, p2))


# -- (8) end to end: the estimates cover the truth ----------------------------------------


def test_counts_give_estimates_that_cover_the_truth(redis_db: Any) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.pop", "oue", k=8, epsilon=2.0)
    truth = [0.4, 0.25, 0.15, 0.1, 0.05, 0.05, 0.0, 0.0]
    rng = random.Random(11)
    values = rng.choices(range(8), weights=truth, k=20_000)
    append(client, d, perturbed(d, values, seed=12))
    worker(client).run(once=True)
    est = estimate_from_counts(d.mechanism, read_counts(client, d), 0.99, simultaneous=True)
    actual = np.bincount(values, minlength=8) / len(values)
    assert est.n == 20_000
    assert np.all((est.ci_low <= actual) & (actual <= est.ci_high)), (est.frequencies, actual)
    assert np.max(est.ci_high - est.ci_low) < 0.06


# -- processes: crash, race, signals, the CLI ----------------------------------------------


def test_kill_9_midway_then_restart_counts_exactly(
    redis_db: Any, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    client = redis_db.client()
    oue = make_metric(client, "app.crash", "oue", k=32)
    grr = make_metric(client, "app.crash2", "grr", k=8)
    p_oue = pooled(oue, 150_000, seed=21)
    p_grr = pooled(grr, 50_000, seed=22)
    append(client, oue, p_oue)
    append(client, grr, p_grr)
    total = len(p_oue) + len(p_grr)
    log = tmp_path / "worker.log"
    for fraction in (0.15, 0.5):  # kill -9 twice, at different points
        proc = start_worker(redis_db.url, "w1", log, "--batch-size", "2000", "--block-ms", "100")
        processes.append(proc)
        wait_until(
            lambda f=fraction: counted(client, oue) + counted(client, grr) >= f * total,
            60,
            "some reports counted",
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = counted(client, oue) + counted(client, grr)
        assert 0 < done < total, "killed too late to test anything"
    restart_once(redis_db.url, "w1")
    assert_counts(client, oue, offline(oue, p_oue))
    assert_counts(client, grr, offline(grr, p_grr))
    assert_drained(client, oue)
    assert_drained(client, grr)


def test_racing_workers_and_a_kill_count_exactly(
    redis_db: Any, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """Two workers stealing each other's in-flight batches (claim idle 0), one killed.

    With a claim idle time of 0 every claim pass takes over whatever the other worker
    is decoding, so both commit the same entries all the time: the commit script must
    let exactly one of them count each entry. Entries stolen back and forth more than
    MAX_DELIVERIES times are dead-lettered instead; each report is then either counted
    once or dead-lettered once.
    """
    client = redis_db.client()
    d, payloads = appended(client, "app.race", "olh", 32, 60_000, seed=31)
    dead_key = keys.dead_key(d.name, d.version)
    # A dead consumer holds 5,000 entries: someone must take them over, whatever the timing.
    client.xgroup_create(stream(d), keys.GROUP, id="0", mkstream=True)
    client.xreadgroup(keys.GROUP, "ghost", {stream(d): ">"}, count=5_000)
    assert lag_details(client, d).pending == 5_000

    def done() -> int:
        return counted(client, d) + int(client.xlen(dead_key))

    options = ("--batch-size", "500", "--block-ms", "50", "--claim-idle-ms", "0")
    b = kill_a_of_two(redis_db.url, tmp_path, processes, lambda: done() >= 20_000, *options)
    wait_until(
        lambda: done() >= len(payloads) and lag_details(client, d).pending == 0,
        60,
        "b to finish a's work too",
    )
    b.send_signal(signal.SIGTERM)
    assert b.wait(20) == 0
    summary = (tmp_path / "b.log").read_text().split("aggregate b: ")[1]
    stats = {k: int(v) for k, v in (x.split("=") for x in summary.split())}
    assert stats["counted"] > 0  # b counted, and the ghost's entries were taken over:
    ghost = [c for c in client.xinfo_consumers(stream(d), keys.GROUP) if c["name"] == b"ghost"]
    assert not ghost or ghost[0]["pending"] == 0
    dead = client.xrange(dead_key)
    assert all(f[b"reason"].startswith(b"delivered ") for _, f in dead)
    kept = Counter(payloads) - Counter(f[b"p"].decode() for _, f in dead)
    assert_counts(client, d, offline(d, list(kept.elements())))
    assert lag_details(client, d).pending == 0 and client.xlen(stream(d)) == 0


def test_sigterm_finishes_the_batch_and_exits_0(
    redis_db: Any, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    client = redis_db.client()
    d, payloads = appended(client, "app.term", "grr", 8, 60_000, seed=41)
    log = tmp_path / "term.log"
    proc = start_worker(redis_db.url, "t", log, "--batch-size", "1000")
    processes.append(proc)
    wait_until(lambda: counted(client, d) > 0, 60, "a first batch counted")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert client.xpending(stream(d), GROUP)["pending"] == 0  # the batch in hand finished
    assert counted(client, d) % 1000 == 0
    assert f"counted={counted(client, d)}" in log.read_text()
    # Idle: a worker blocked waiting for entries also leaves at once.
    proc = start_worker(redis_db.url, "t", log, "--block-ms", "60000", "--once")
    proc.wait(60)
    idle = start_worker(redis_db.url, "t", log, "--block-ms", "60000")
    processes.append(idle)
    wait_until(lambda: client.xlen(stream(d)) == 0, 30, "the backlog drained")
    wait_until(
        lambda: any(c["cmd"] == "xreadgroup" and "b" in c["flags"] for c in client.client_list()),
        30,
        "the worker blocked on its read",
    )
    started = time.monotonic()
    idle.send_signal(signal.SIGINT)
    assert idle.wait(10) == 0 and time.monotonic() - started < 5
    assert_counts(client, d, offline(d, payloads))


def test_cli_needs_a_redis_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("LDP_REDIS_URL", raising=False)
    result = CliRunner().invoke(main, ["aggregate", "--once"])
    assert result.exit_code == 2
    assert "REDIS_URL" in result.output


def test_cli_once_reads_redis_url_from_the_environment(
    redis_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = redis_db.client()
    d = make_metric(client, "app.cli", "grr", k=4)
    payloads = perturbed(d, [0, 1, 2, 3], seed=1)
    append(client, d, payloads)
    monkeypatch.setenv("REDIS_URL", redis_db.url)
    result = CliRunner().invoke(main, ["aggregate", "--once", "--name", "cli"])
    assert result.exit_code == 0, result.output
    assert "counted=4 dead_lettered=0" in result.output
    assert_counts(client, d, offline(d, payloads))
    bad = CliRunner().invoke(main, ["aggregate", "--once", "--name", "has space"])
    assert bad.exit_code == 2 and "consumer name" in bad.output
