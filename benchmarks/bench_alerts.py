"""Alerts that keep their word: false alarms over 1,000 looks, and the detection delay.

Run on purpose, not as a test::

    .venv/bin/python benchmarks/bench_alerts.py            # 10,000 streams x 1,000 looks
    .venv/bin/python benchmarks/bench_alerts.py --quick    # 2,000 streams

(a) False alerts: per rule kind (a share above its level, OUE ε = 1; a mean above its
level, Duchi ε = 1; a change against a 5,000-report baseline, GRR ε = 2, k = 4), null
streams watched at 1,000 looks (n geometric from 10 to 10⁶); the fraction of streams with
any alert, against α = 0.05 plus three simulation standard errors, and the same for the
naive rule that re-runs a fixed-n 95 % test at every look.

(b) Detection delay: a share rule at level 0.1 when the share is 0.2 (a 2× change), GRR
k = 4 at ε = 1 and ε = 4; the median reports until the first alert (looks every 1 % of n),
beside the delay the rule states (:func:`~aggregator.stats.alerting.expected_delay`) and
the naive rule's median delay (fast, because it fires on noise too).

(c) Notification latency (``--latency``): a real Redis, a stream worker and a notifier
thread as ``ldp aggregate`` runs them (block 1 s, batches of 10,000), and a local HTTP
receiver: shifted reports are appended in batches of 200 every 20 ms after a share rule
was armed; the latency is from the append of the batch that tipped the rule (the one
holding its n-th report) to the webhook's arrival. Repeated after each resolve.

Streams are simulated with numpy's generator (seeded): support counts grow by binomial
increments between looks. Every figure is deterministic for a seed; only the timing line
depends on the machine's load, printed before and after.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from typing import Any

import numpy as np

from aggregator.stats.alerting import (
    Observable,
    change_fires,
    expected_delay,
    level_fires,
)
from aggregator.stats.anytime import cs_bounded_mean
from client_sdk import mechanisms
from client_sdk.mechanisms.numeric import create_numeric

ALPHA = 0.05
Z = 1.959964
CHUNK = 1000


def looks(count: int, first: float = 10, last: float = 1e6) -> np.ndarray:
    return np.unique(np.geomspace(first, last, count).astype(np.int64))


def paths(rng: np.random.Generator, n: np.ndarray, mu: float, streams: int) -> np.ndarray:
    steps = np.diff(np.concatenate([[0], n]))
    return np.cumsum(rng.binomial(steps, mu, size=(streams, len(n))), axis=1).astype(float)


def naive_above(n: np.ndarray, total: np.ndarray, mu0: float, low: float, high: float) -> Any:
    m = (total / n - low) / (high - low)
    z0 = (mu0 - low) / (high - low)
    return m - Z * np.sqrt(np.maximum(m * (1 - m), 1e-12) / n) > z0


def false_alerts(streams: int, n: np.ndarray, seed: int) -> None:
    bound = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / streams)
    print(f"(a) false alerts: {streams:,} null streams x {len(n):,} looks, n = {n[0]}..{n[-1]:,}")
    print(f"    bound: alpha + 3 SE = {bound:.4f}")
    rng = np.random.default_rng(seed)

    oue = mechanisms.create("oue", epsilon=1.0, domain_size=8)
    obs = Observable.of_share(oue)
    mu = oue.q + 0.1 * (oue.p - oue.q)
    duchi = create_numeric("duchi", epsilon=1.0)
    mobs = Observable.of_mean(duchi, (0.0, 100.0))
    c = duchi.bound
    x = (70.0 - 50.0) / 50.0
    grr = mechanisms.create("grr", epsilon=2.0, domain_size=4)
    gobs = Observable.of_share(grr)
    gmu = grr.q + 0.3 * (grr.p - grr.q)
    counts = {k: [0, 0] for k in ("share_above", "mean_above", "change")}
    t0 = time.perf_counter()
    for start in range(0, streams, CHUNK):
        size = min(CHUNK, streams - start)
        s = paths(rng, n, mu, size)
        counts["share_above"][0] += int(level_fires(obs, n, s, s, 0.1, True, ALPHA).any(1).sum())
        counts["share_above"][1] += int(naive_above(n, s, mu, 0.0, 1.0).any(1).sum())
        plus = paths(rng, n, (1 + x / c) / 2, size)
        total, total_sq = c * (2 * plus - n), c * c * n * np.ones_like(plus)
        fired = level_fires(mobs, n, total, total_sq, 70.0, True, ALPHA)
        counts["mean_above"][0] += int(fired.any(1).sum())
        counts["mean_above"][1] += int(naive_above(n, total, x, -c, c).any(1).sum())
        base_n = 5000
        base = rng.binomial(base_n, gmu, size=size).astype(float)
        b_lo, b_hi = cs_bounded_mean(base_n, base, base, 0.0, 1.0, ALPHA / 2)
        g = paths(rng, n, gmu, size)
        fired = change_fires(gobs, (n, g, g), (b_lo[:, None], b_hi[:, None]), 0.0, ALPHA)
        counts["change"][0] += int(fired.any(1).sum())
        m, b = g / n, base[:, None] / base_n
        z = 2.241403  # 97.5 % two-sided each, as the union bound's alpha/2
        gap = z * (np.sqrt(m * (1 - m) / n) + np.sqrt(b * (1 - b) / base_n))
        counts["change"][1] += int((np.abs(m - b) > gap).any(1).sum())
    took = time.perf_counter() - t0
    for kind, (ours, naive) in counts.items():
        print(
            f"    {kind:12s} anytime: {ours / streams:.4f} "
            f"({'within' if ours / streams <= bound else 'ABOVE'} the bound)   "
            f"fixed-n re-tested: {naive / streams:.4f}"
        )
    print(f"    simulation took {took:.1f} s")


def delays(streams: int, seed: int) -> None:
    print(
        f"(b) detection delay: share rule at 0.1, true share 0.2 (2x), GRR k=4, {streams:,} streams"
    )
    rng = np.random.default_rng(seed)
    for eps in (1.0, 4.0):
        m = mechanisms.create("grr", epsilon=eps, domain_size=4)
        obs = Observable.of_share(m)
        stated = expected_delay(obs, 0.2, 0.1, ALPHA)
        assert stated is not None
        n = np.unique(np.concatenate([np.arange(10, 100, 5), looks(600, 100, 40 * stated)]))
        mu = m.q + 0.2 * (m.p - m.q)
        first, naive_first = [], []
        for start in range(0, streams, CHUNK):
            size = min(CHUNK, streams - start)
            s = paths(rng, n, mu, size)
            fired = level_fires(obs, n, s, s, 0.1, True, ALPHA)
            first.append(np.where(fired.any(1), n[np.argmax(fired, 1)], np.inf))
            naive = naive_above(n, s, m.q + 0.1 * (m.p - m.q), 0.0, 1.0)
            naive_first.append(np.where(naive.any(1), n[np.argmax(naive, 1)], np.inf))
        ours, theirs = np.concatenate(first), np.concatenate(naive_first)
        print(
            f"    eps={eps:g}: median reports to alert {np.median(ours):,.0f} "
            f"(stated {stated:,}; 90th pct {np.quantile(ours, 0.9):,.0f}); "
            f"fixed-n re-tested: median {np.median(theirs):,.0f} "
            f"(a fixed-n test at one pre-planned n needs ~{_fixed_n(m):,.0f})"
        )


def _fixed_n(m: mechanisms.FrequencyOracle) -> float:
    """n at which a single fixed-n one-sided 95 % test at the level has 50 % power."""
    mu0, mu1 = m.q + 0.1 * (m.p - m.q), m.q + 0.2 * (m.p - m.q)
    return (1.644854 * math.sqrt(mu0 * (1 - mu0)) / (mu1 - mu0)) ** 2


def latency(rounds: int) -> None:
    import json
    import random
    import tempfile
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from aggregator.alerts.evaluate import Alerts
    from aggregator.alerts.notify import Notifier
    from aggregator.alerts.rules import AlertSpec
    from aggregator.stream.worker import Worker
    from ldp_store import keys
    from ldp_store.embedded import EmbeddedRedis
    from ldp_store.registry import Registry

    arrived: list[float] = []
    got = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            arrived.append(time.perf_counter())
            self.send_response(200)
            self.end_headers()
            got.set()

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    server = EmbeddedRedis(tempfile.mkdtemp(prefix="bench-alerts-"))
    server.start()
    try:
        client = server.client()
        spec = {"domain": ["a", "b", "c", "d"], "epsilon": 2.0, "mechanism": "grr"}
        d = Registry(client).put("bench.alerts", spec).definition
        rng = random.Random(40)
        stream = keys.stream_key(d.name, d.version)
        alerts = Alerts(client)
        worker = Worker(client, handle_signals=False, on_counted=alerts.evaluate)
        notifier = Notifier(client, "bench-notifier").start()
        threading.Thread(target=worker.run, daemon=True).start()

        def append(share: float, n: int) -> None:
            values = rng.choices(range(4), [1 - share, share, 0, 0], k=n)
            with client.pipeline(transaction=False) as pipe:
                for v in values:
                    pipe.xadd(stream, {"p": json.dumps(d.mechanism.perturb(v, rng=rng))})
                pipe.execute()

        append(0.1, 2000)
        time.sleep(2)
        url = f"http://127.0.0.1:{http.server_port}/hook"
        rule = alerts.create(
            AlertSpec(metric=d.name, kind="share_above", value="b", level=0.2, webhook=url)
        )
        out = []
        for _ in range(rounds):
            got.clear()
            sent: list[tuple[int, float]] = []
            total = 0
            while not got.wait(0.02):
                append(0.6, 200)
                total += 200
                sent.append((total, time.perf_counter()))
            tipped = store_firing(client, rule["id"])["n"]
            t0 = next(t for count, t in sent if count >= tipped)
            out.append(arrived[-1] - t0)
            time.sleep(1.5)  # let the batch in flight settle before re-arming
            alerts.resolve(rule["id"])
        worker.stop()
        notifier.stop()
        ms = np.asarray(out) * 1000
        print(
            f"(c) notification latency, tipping batch appended -> webhook received, {rounds} "
            f"firings: median {np.median(ms):.0f} ms, 90th pct {np.quantile(ms, 0.9):.0f} ms, "
            f"max {ms.max():.0f} ms"
        )
    finally:
        http.shutdown()
        server.stop()


def store_firing(client: Any, rule_id: str) -> dict[str, Any]:
    from ldp_store import alerts as store

    return store.firings(client)[rule_id]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--looks", type=int, default=1_000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--latency", type=int, default=0, help="only (c), this many firings")
    args = parser.parse_args()
    if args.latency:
        print(f"load average before: {os.getloadavg()}")
        latency(args.latency)
        print(f"load average after: {os.getloadavg()}")
        return
    streams = 2000 if args.quick else args.streams
    print(f"load average before: {os.getloadavg()}")
    n = looks(int(args.looks * 1.15))  # integer looks: a few coincide at small n
    false_alerts(streams, n, args.seed)
    delays(min(streams, 2000), args.seed + 1)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
