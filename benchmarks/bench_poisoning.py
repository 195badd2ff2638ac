"""The poisoning table: share of fakes → shift → alarmed or not (a benchmark, not a test).

    PYTHONPATH=. python benchmarks/bench_poisoning.py [--quick] [--trials 20]
        [--section frequency|strings]

frequency: GRR, OUE and OLH at ε = 1, k = 64; each trial draws honest windows of n
reports from a Zipf population (the real vectorized encoder and batch decoder,
:class:`~aggregator.analysis.defences.HonestWindows`) and adds the maximal-gain attack's
crafted reports for one rare target (:class:`~aggregator.analysis.crafting.MaximalGain`:
GRR names the target, OUE sets its bit padded to the honest number of ones, OLH a fresh
random seed hashing it into the reported bucket). ``shift`` is the target estimate's mean
move (after − before, in points); ``alarmed`` the share of trials in which
:func:`~aggregator.stats.detect.detect` raised any alarm at α = 10⁻³, in three
situations: a fresh metric (no baseline: the floor and support tests), one baseline hour,
six baseline hours (the shift test). GRR's fresh rows are repeated on a population that
leaves most of the domain unused (4 of 64 values), where the floor test has something
to see, and at n = 10⁶.

strings: ε = 8, 16 bytes (8 rows × 2048 cells a level), 66,000 honest reports of a
Zipf vocabulary; c crafted reports for ``=WEBSERVICE("http://x")`` put into 4 of the 8
rows of each level, or spread over the rows as devices spread theirs. Printed: how often
the value was discovered, its mean estimate, and how often
:func:`~aggregator.stats.detect.detect_sketch` alarmed.

Numpy's PCG64 with fixed seeds: a simulation, not a CSPRNG. Prints the load average.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from aggregator.analysis.crafting import MaximalGain
from aggregator.analysis.defences import HonestWindows
from aggregator.analysis.simulation import distribution
from aggregator.analysis.string_simulation import simulate_counts
from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares
from aggregator.stats.codecs import Counts
from aggregator.stats.detect import DEFAULT_ALARM_RATE, detect, detect_sketch
from aggregator.stats.discovery import discover
from aggregator.stats.frequency import estimate_from_counts
from aggregator.stats.kinds import codec_for
from aggregator.stats.strings import SketchEstimator
from client_sdk import mechanisms
from client_sdk.mechanisms.strings import StringSketch, normalise

K, EPSILON = 64, 1.0
SHARES = (0.001, 0.003, 0.01, 0.015, 0.03)


def load() -> str:
    return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def sparse(k: int) -> np.ndarray:
    f = np.zeros(k)
    f[:4] = 0.25
    return f


def frequency(n: int, trials: int, quick: bool) -> None:
    print(f"\n## Frequency oracles: k = {K}, ε = {EPSILON:g}, n = {n:,} honest reports a window")
    print(
        "| mechanism | population | β (fakes) | shift, points | fresh metric | 1 baseline hour "
        "| 6 baseline hours |"
    )
    print("|---|---|---|---|---|---|---|")
    rows = [("grr", "zipf", n), ("oue", "zipf", n), ("olh", "zipf", n)]
    rows += [("grr", "4 of 64", n), ("grr", "4 of 64", 10**6), ("grr", "zipf", 10**6)]
    if quick:
        rows = rows[:2]
    for name, population, size in rows:
        m = mechanisms.create(name, epsilon=EPSILON, domain_size=K)
        probs = distribution("zipf", K) if population == "zipf" else sparse(K)
        target = K - 1  # the rarest value (0 % in the sparse population)
        gen = np.random.default_rng(2029)
        attack = MaximalGain(m, [target], gen)
        codec = codec_for(m)
        with_baseline = size <= 10**5 * 2
        result = {beta: {"shift": [], "fresh": 0, "one": 0, "six": 0} for beta in SHARES}
        for _ in range(trials):
            honest = HonestWindows(m, probs, size, gen)
            windows = honest.take(7 if with_baseline else 1)
            now = windows[-1]
            before = estimate_from_counts(m, now).frequencies[target]
            one = windows[-2] if with_baseline else None
            six = sum(windows[:-1], Counts.zeros(K)) if with_baseline else None
            for beta in SHARES:
                fakes = round(beta * size / (1 - beta))
                poisoned = now + codec.decode(attack.payloads(fakes, gen))
                after = estimate_from_counts(m, poisoned).frequencies[target]
                r = result[beta]
                r["shift"].append(after - before)
                pair = (poisoned.n, poisoned.support)
                r["fresh"] += bool(detect(m, "w", pair, None, None, DEFAULT_ALARM_RATE))
                if one is not None and six is not None:
                    r["one"] += bool(
                        detect(m, "w", pair, (one.n, one.support), None, DEFAULT_ALARM_RATE)
                    )
                    r["six"] += bool(
                        detect(m, "w", pair, (six.n, six.support), None, DEFAULT_ALARM_RATE)
                    )
        for beta in SHARES:
            r = result[beta]
            shift = 100 * float(np.mean(r["shift"]))
            cells = [
                f"{r[key]}/{trials}" if with_baseline or key == "fresh" else "—"
                for key in ("fresh", "one", "six")
            ]
            print(
                f"| {name} | {population}, n = {size:,} | {100 * beta:.1f} % | {shift:+.1f} | "
                + " | ".join(cells)
                + " |"
            )
        print(f"<!-- {name} {population} {size}: {load()} -->", flush=True)


TARGET = '=WEBSERVICE("http://x")'


def strings(trials: int, quick: bool) -> None:
    m = StringSketch(epsilon=8.0, max_length=16, salt="5eed")
    n = 66_000
    print(f"\n## Strings: ε = 8, 16 bytes, {m.rows} rows × {m.cells} cells, n = {n:,}")
    print("| crafted reports (share) | placement | discovered | mean estimate | alarmed (kinds) |")
    print("|---|---|---|---|---|")
    vocab = synthetic_vocabulary(5_000, 16, seed=4)
    shares = zipf_shares(5_000, 1.1)
    padded = normalise(TARGET, m.max_length)
    gen = np.random.default_rng(400)
    for reports in (100, 200, 400) if quick else (100, 200, 400, 800):
        for placement in ("4 of 8 rows", "every row"):
            found_count, alarmed, estimates, kinds = 0, 0, [], set()
            for _ in range(trials):
                counts, _ = simulate_counts(m, vocab, shares, n, gen)
                support = np.zeros(m.counters, dtype=np.int64)
                for i in range(reports):
                    level = i % m.levels
                    row = (
                        (i // m.levels) % 4
                        if placement != "every row"
                        else int(gen.integers(m.rows))
                    )
                    support[(level * m.rows + row) * m.cells + m.cell(padded, level, row)] += 1
                est = SketchEstimator(codec_for(m), counts + Counts(reports, support))
                found = discover(est)
                if padded in found.values:
                    found_count += 1
                    estimates.append(found.frequency[found.values.index(padded)])
                alarms = detect_sketch(est, "w", found.values, found.known)
                alarmed += bool(alarms)
                kinds |= {a.kind for a in alarms}
            mean = f"{100 * float(np.mean(estimates)):.2f} %" if estimates else "—"
            print(
                f"| {reports} ({100 * reports / (n + reports):.2f} %) | {placement} | "
                f"{found_count}/{trials} | {mean} | {alarmed}/{trials} "
                f"({', '.join(sorted(kinds)) or '—'}) |",
                flush=True,
            )
    print(f"<!-- strings: {load()} -->")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rows and trials")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--section", choices=["frequency", "strings"], default=None)
    args = ap.parse_args()
    trials = 4 if args.quick else args.trials
    print(f"# Poisoning table ({load()}; α = {DEFAULT_ALARM_RATE:g} per window)")
    start = time.perf_counter()
    if args.section in (None, "frequency"):
        frequency(65_000, trials, args.quick)
    if args.section in (None, "strings"):
        strings(max(2, trials // 4), args.quick)
    print(f"\n{time.perf_counter() - start:.0f} s; {load()}")


if __name__ == "__main__":
    main()
