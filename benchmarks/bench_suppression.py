"""What suppression across windows costs: the groups hidden in every served window of a
representative metric, by the single-window rule alone (before issue 35) and by the
rule across windows (``aggregator.stats.suppression``), and what each leaves solvable.

A metric with two public dimensions, platform (ios 55 %, android 40 %, web 5 %) and
app_version (1.0 10 %, 2.0 30 %, 2.1 40 %, 3.0 20 %), at 1,000, 5,000 and 50,000
reports a day over 30 days (+50 % growth, a day/night cycle), every hour of the last 14
days served (the default retention), the current day 9 h 20 min old (and, at 5,000 a
day, 5 min old: the newest day and hour nearly empty). Counts are Poisson
per segment and hour, seed 1. Minimum 50.

Printed per level (all time, days, hours): groups hidden before and after, out of all.
With ``--check``, each hidden group's range is solved for by linear programming from
every served figure (the totals and shown groups of every window; one dimension at a
time, which is exact: docs/statistics/suppression.md) on the last 3 days: groups
pinned, and small groups left open by fewer than the minimum. With ``--redis``, the time
of one breakdown's decision as the API takes it (read every live window's segment sizes
from a real Redis, decide one dimension), with 30 and 400 days of windows; yardstick:
the same breakdown's estimates once decided, in the same run. Prints the
load average before and after. Run: ``python benchmarks/bench_suppression.py --check
--redis``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from aggregator.stats.segments import suppress
from aggregator.stats.suppression import Window, hide_across_windows

SHARES = {
    "platform": {"ios": 0.55, "android": 0.40, "web": 0.05},
    "app_version": {"1.0": 0.10, "2.0": 0.30, "2.1": 0.40, "3.0": 0.20},
}
MINIMUM = 50
DAYS, HOUR_DAYS = 30, 14
NOWS = {"09:20": (9, 1 / 3), "00:05": (0, 1 / 12)}
"""The current day's age: its last hour and the part of that hour gone."""


def segments() -> list[dict[str, str]]:
    """Every segment (one value of each dimension)."""
    return [
        {"platform": p, "app_version": v} for p in SHARES["platform"] for v in SHARES["app_version"]
    ]


def counts(
    per_day: int, now: str = "09:20", days: int = DAYS, seed: int = 1
) -> dict[str, np.ndarray]:
    """Reports per segment of every served window: the hours of the last 14 days, the
    days, all time (the last day and hour partial, as now)."""
    rng = np.random.default_rng(seed)
    now_hour, now_fraction = NOWS[now]
    share = np.array(
        [
            SHARES["platform"][s["platform"]] * SHARES["app_version"][s["app_version"]]
            for s in segments()
        ]
    )
    out: dict[str, np.ndarray] = {}
    for d in range(days):
        growth = 1 + 0.5 * d / days
        day = np.zeros(len(share), dtype=np.int64)
        for h in range(24 if d < days - 1 else now_hour + 1):
            cycle = 0.25 + 1.5 * (1 + math.sin(2 * math.pi * (h - 8) / 24)) / 2
            part = now_fraction if (d, h) == (days - 1, now_hour) else 1.0
            hour = rng.poisson(per_day * growth / 24 * cycle * part * share)
            day += hour
            if d >= days - HOUR_DAYS:
                out[f"hour:d{d:03d}T{h:02d}"] = hour
        out[f"day:d{d:03d}"] = day
    out["all"] = sum((c for w, c in out.items() if w.startswith("day:")), np.zeros(len(share), int))
    return out


def tree(sizes: dict[str, np.ndarray], dimension: str, days: range | None = None) -> Window:
    """One dimension's windows: all time (or the sum of ``days``), days, their hours."""
    labels = [s[dimension] for s in segments()]

    def groups(c: np.ndarray) -> dict[str, int]:
        return {
            g: int(sum(n for n, lab in zip(c, labels, strict=True) if lab == g))
            for g in SHARES[dimension]
        }

    day_names = sorted(w for w in sizes if w.startswith("day:"))
    if days is not None:
        day_names = [day_names[d] for d in days]
    inside = [
        Window(
            d,
            groups(sizes[d]),
            tuple(
                Window(h, groups(sizes[h])) for h in sorted(sizes) if h.startswith("hour:" + d[4:])
            ),
        )
        for d in day_names
    ]
    total = sizes["all"] if days is None else sum(sizes[d] for d in day_names)
    return Window("all", groups(total), tuple(inside))


def walk(root: Window) -> list[Window]:
    return [root, *(w for inner in root.inside for w in walk(inner))]


def single_window(root: Window) -> dict[str, set[str]]:
    """The rule before issue 35: each window alone."""
    out = {}
    for w in walk(root):
        found = suppress(dict(w.sizes), MINIMUM)
        out[w.name] = set(found.primary + found.complementary)
    return out


def level(name: str) -> str:
    return name.partition(":")[0]


def cost(root: Window, hidden: dict[str, set[str]]) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = {}
    for w in walk(root):
        row = out.setdefault(level(w.name), [0, 0])
        row[0] += len(hidden[w.name])
        row[1] += len(w.sizes)
    return {k: (v[0], v[1]) for k, v in out.items()}


def solve(root: Window, hidden: dict[str, set[str]]) -> tuple[int, int, float]:
    """(hidden groups pinned, small groups open by < min(minimum, window total), least
    range of a small group) from every served figure, by linear programming."""
    from scipy.optimize import linprog
    from scipy.sparse import lil_array

    def leaves(w: Window) -> list[str]:
        if not w.inside:
            return [w.name]
        return [leaf for inner in w.inside for leaf in leaves(inner)] + [f"rest:{w.name}"]

    groups = list(root.sizes)
    cells = {
        (g, leaf): i
        for i, (g, leaf) in enumerate((g, leaf) for g in groups for leaf in leaves(root))
    }
    rows, rhs = [], []
    for w in walk(root):
        rows.append([cells[g, leaf] for g in groups for leaf in leaves(w)])
        rhs.append(sum(w.sizes.values()))
        for g in groups:
            if g not in hidden[w.name]:
                rows.append([cells[g, leaf] for leaf in leaves(w)])
                rhs.append(w.sizes[g])
    a = lil_array((len(rows), len(cells)))
    for i, row in enumerate(rows):
        a[[i] * len(row), row] = 1
    a = a.tocsr()
    pinned = weak = 0
    least = math.inf
    for w in walk(root):
        total = sum(w.sizes.values())
        for g in hidden[w.name]:
            c = np.zeros(len(cells))
            c[[cells[g, leaf] for leaf in leaves(w)]] = 1
            low = linprog(c, A_eq=a, b_eq=rhs, bounds=(0, None)).fun
            high = -linprog(-c, A_eq=a, b_eq=rhs, bounds=(0, None)).fun
            pinned += total > 0 and high - low < 1
            if w.sizes[g] < MINIMUM:
                weak += high - low < min(MINIMUM, total) - 1e-6
                least = min(least, high - low)
    return pinned, weak, least


def redis_timing(days: int) -> tuple[float, float]:
    """Median seconds of one breakdown's decision as the API takes it (every live
    window's segment sizes read from a real Redis, one dimension decided), and of the
    yardstick: the same breakdown's estimates once decided (what a request did before)."""
    import redis

    from aggregator.query.estimators import Ask, Reader
    from aggregator.query.segments import segment_estimates
    from aggregator.query.suppression import hidden_groups
    from ldp_store import keys, schema
    from ldp_store.embedded import EmbeddedRedis
    from ldp_store.registry import Registry

    spec = {
        "domain": ["a", "b", "c"],
        "epsilon": 1.0,
        "mechanism": "grr",
        "dimensions": [{"name": d, "values": list(v)} for d, v in SHARES.items()],
    }
    sizes = counts(5000, days=days)
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(tmp).start()
        try:
            client = redis.Redis.from_url(server.url)
            registry = Registry(client)
            definition = registry.put("bench.suppression", spec).definition
            order = [definition.segment(s) for s in segments()]
            base = time.time() - days * 86400
            for window, c in sizes.items():
                name = window
                if window != "all":  # real window names, so the tree is built as served
                    kind, _, rest = window.partition(":")
                    d, _, h = rest[1:].partition("T")
                    t = base + int(d) * 86400 + int(h or 0) * 3600
                    hour, _, day, _ = schema.window_names(int(t * 1000))
                    name = hour if kind == "hour" else day
                    client.zadd(keys.windows_key(definition.name, 1, 0), {name: t * 1000})
                fields: dict[str, int] = {schema.N: int(c.sum())}
                for s, n in zip(order, c, strict=True):  # GRR-like: a third support each
                    fields[schema.segment_n_field(s)] = int(n)
                    for v in range(3):
                        fields[f"{schema.SEGMENT_PREFIX}{s}:{schema.count_field(v)}"] = int(n) // 3
                client.hset(keys.counts_key(definition.name, 1, name, 0), mapping=fields)
            reader, ask = Reader(client, registry), Ask(confidence=0.95)
            decide, estimate = [], []
            for _ in range(7):
                start = time.perf_counter()
                hidden = hidden_groups(client, definition, MINIMUM)
                hidden.of("all", "app_version")
                middle = time.perf_counter()
                segment_estimates(reader, definition, "all", "app_version", ask, MINIMUM, hidden)
                decide.append(middle - start)
                estimate.append(time.perf_counter() - middle)
            return float(np.median(decide)), float(np.median(estimate))
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="solve for every hidden group")
    parser.add_argument("--redis", action="store_true", help="time the decision on Redis")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'reports/day':>11} {'now':>5} {'dimension':>11} {'level':>5}", end=" ")
    print(f"{'hidden before':>13} {'after':>6} {'of':>5}")
    for per_day, now in [(1000, "09:20"), (5000, "09:20"), (5000, "00:05"), (50000, "09:20")]:
        sizes = counts(per_day, now)
        for dimension in SHARES:
            root = tree(sizes, dimension)
            after = {w: set(why) for w, why in hide_across_windows(root, MINIMUM).items()}
            before = single_window(root)
            old, new = cost(root, before), cost(root, after)
            for kind in ("all", "day", "hour"):
                print(f"{per_day:>11,} {now:>5} {dimension:>11} {kind:>5}", end=" ")
                print(f"{old[kind][0]:>13} {new[kind][0]:>6} {new[kind][1]:>5}")
            if args.check:
                recent = tree(sizes, dimension, range(DAYS - 3, DAYS))
                mine = {w: set(why) for w, why in hide_across_windows(recent, MINIMUM).items()}
                for label, hidden in (("before", single_window(recent)), ("after", mine)):
                    pinned, weak, least = solve(recent, hidden)
                    print(
                        f"{'':>11} {'':>11} last 3 days, {label}: {pinned} hidden groups pinned, "
                        f"{weak} small groups open by < the minimum (least range {least:.0f})"
                    )
    if args.redis:
        for days in (30, 400):
            decide, estimate = redis_timing(days)
            print(
                f"one breakdown, {days} days and 14 days of hours (median of 7): decision", end=" "
            )
            print(f"{decide * 1000:.1f} ms; yardstick, its estimates: {estimate * 1000:.1f} ms")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
