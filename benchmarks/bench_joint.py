"""Joint metrics against multi-freq-ldpy's SPL, SMP and RS+FD, and their interval coverage.

* ``mse``: one population of 3 correlated attributes (k = 4, 8, 16), ε ∈ {1, 2, 4}, n ∈
  {10⁴, 10⁵, 10⁶}: the mean squared error of every 2-way marginal's cells (averaged over
  the 3 pairs), mean ± standard error over seeds. Ours: the joint kind as ``auto``
  chooses it, raw (unbiased) and consistent (post-processed). multi-freq-ldpy's
  protocols estimate 1-way frequencies of several attributes; to give them 2-way
  marginals each *pair* of attributes is one derived attribute of k_a·k_b values, and
  SPL (every pair at ε/3), SMP (one sampled pair at ε) and RS+FD (one sampled pair plus
  fake data for the others), each with its adaptive GRR/OUE randomizer (``ADP``), run
  on those, with the library's own clients and aggregators (its estimates are clipped
  and renormalised). RS+FD's ε bounds the likelihood ratio of tuples that differ in one
  attribute: it randomizes the sampled attribute at ε' = ln(d(e^ε − 1) + 1), so two
  tuples differing everywhere are ε'-distinguishable (``audit`` measures it). Our ε, like
  SPL's and SMP's, bounds every pair of tuples; ``RS+FD@tuple`` runs RS+FD at the ε
  whose ε' is the nominal ε, the same whole-tuple guarantee. Our reports are simulated
  with numpy (``JointCodec.encode``: the SDK's mechanism math, a numpy generator).
* ``coverage``: the share of 95 % intervals of 2-way (and 1-way) marginal cells that
  hold the truth, over seeds, with the binomial 99.9 % band of a correct 95 %.
* ``audit``: RS+FD[GRR]'s likelihood ratio for two tuples differing in every attribute.
* ``drain``: one embedded Redis, single and joint metrics each loaded with the same number
  of SDK payloads and drained by one ``ldp aggregate --once`` (drain_harness.py), in
  one run: reports/s and CPU µs per report of Redis and the worker.

Needs ``pip install multi-freq-ldpy`` (0.2.5 measured) for ``mse`` and ``audit``: a
benchmark-only dependency, not in pyproject.toml (there is no ``bench`` extra). Run:
``python benchmarks/bench_joint.py mse --seeds 5,3,2`` (the library's clients take
20–330 µs per user in Python: about 40 minutes at these seeds) or ``coverage``. Prints
the load average before and after; ``--json FILE`` keeps the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from aggregator.stats.joint import consistent_tables, estimate_marginal
from aggregator.stats.joint_codec import JointCodec
from client_sdk.mechanisms.base import exp_epsilon
from client_sdk.mechanisms.joint import choose_joint
from client_sdk.wire import MetricDefinition, build_report

SIZES = (4, 8, 16)
PAIRS = list(combinations(range(len(SIZES)), 2))


def population(n: int, seed: int) -> np.ndarray:
    """Three correlated attributes: b depends on a, c on b (Zipf-like tail)."""
    gen = np.random.default_rng(1000 + seed)
    a = np.minimum(gen.geometric(0.45, n) - 1, SIZES[0] - 1)
    b = (2 * a + gen.integers(0, 3, n)) % SIZES[1]
    c = (b + gen.geometric(0.3, n)) % SIZES[2]
    return np.column_stack([a, b, c]).astype(np.int64)


def truth(values: np.ndarray, attrs: tuple[int, ...]) -> np.ndarray:
    table = np.zeros([SIZES[a] for a in attrs])
    np.add.at(table, tuple(values[:, a] for a in attrs), 1)
    return table.ravel() / len(values)


def pair_values(values: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Each pair of attributes as one derived attribute (a·k_b + b)."""
    cols = [values[:, a] * SIZES[b] + values[:, b] for a, b in PAIRS]
    return np.column_stack(cols), [SIZES[a] * SIZES[b] for a, b in PAIRS]


def ours(values: np.ndarray, epsilon: float, seed: int) -> tuple[list[np.ndarray], list[Any]]:
    m = choose_joint(epsilon, SIZES).mechanism
    codec = JointCodec(m)
    counts = codec.count(codec.encode(values, np.random.default_rng(seed)))
    raw = [estimate_marginal(m, counts, pair).frequencies for pair in PAIRS]
    tables = consistent_tables(m, counts)
    from aggregator.stats.joint import _reduce  # the consistent pair tables, read once

    consistent = [_reduce(m, m.source(pair), tables[m.source(pair)], pair) for pair in PAIRS]
    return raw, consistent


def library(name: str, values: np.ndarray, epsilon: float, seed: int) -> list[np.ndarray]:
    from multi_freq_ldpy.mdim_freq_est import RSpFD_solution, SMP_solution, SPL_solution

    protocols = {
        "SPL": (SPL_solution.SPL_ADP_Client, SPL_solution.SPL_ADP_Aggregator_MI),
        "SMP": (SMP_solution.SMP_ADP_Client, SMP_solution.SMP_ADP_Aggregator_MI),
        "RS+FD": (RSpFD_solution.RSpFD_ADP_Client, RSpFD_solution.RSpFD_ADP_Aggregator_MI),
    }
    protocols["RS+FD@tuple"] = protocols["RS+FD"]
    client, aggregate = protocols[name]
    derived, ks = pair_values(values)
    if name == "RS+FD@tuple":  # the ε whose amplified ε' is ε: ε-LDP for whole tuples
        epsilon = float(np.log((exp_epsilon(epsilon) - 1) / len(ks) + 1))
    np.random.seed(seed)  # the library draws from numpy's global generator
    reports = [client(row, ks, len(ks), epsilon) for row in derived]
    return [np.asarray(e, dtype=np.float64) for e in aggregate(reports, ks, len(ks), epsilon)]


def mse(estimates: list[np.ndarray], values: np.ndarray) -> float:
    return float(
        np.mean(
            [np.mean((e - truth(values, p)) ** 2) for e, p in zip(estimates, PAIRS, strict=True)]
        )
    )


def run_mse(seeds_by_n: dict[int, int], methods: list[str], out: list[dict[str, Any]]) -> None:
    print(
        f"{'n':>8} {'ε':>3} {'method':>14} {'MSE (mean ± se over seeds)':>30} {'seeds':>5} {'s':>6}"
    )
    for n, seeds in seeds_by_n.items():
        for epsilon in (1.0, 2.0, 4.0):
            rows: dict[str, list[float]] = {}
            took: dict[str, float] = {}
            for seed in range(seeds):
                values = population(n, seed)
                start = time.perf_counter()
                raw, consistent = ours(values, epsilon, seed)
                took["joint (raw)"] = took.get("joint (raw)", 0.0) + time.perf_counter() - start
                rows.setdefault("joint (raw)", []).append(mse(raw, values))
                rows.setdefault("joint (consistent)", []).append(mse(consistent, values))
                for name in methods:
                    start = time.perf_counter()
                    rows.setdefault(name, []).append(
                        mse(library(name, values, epsilon, seed), values)
                    )
                    took[name] = took.get(name, 0.0) + time.perf_counter() - start
            for name, errors in rows.items():
                mean = float(np.mean(errors))
                se = (
                    float(np.std(errors, ddof=1) / np.sqrt(len(errors))) if len(errors) > 1 else 0.0
                )
                out.append(
                    {
                        "n": n,
                        "epsilon": epsilon,
                        "method": name,
                        "mse": mean,
                        "se": se,
                        "seeds": len(errors),
                    }
                )
                print(
                    f"{n:>8} {epsilon:>3g} {name:>14} {mean:>18.3e} ± {se:.1e} {len(errors):>5} "
                    f"{took.get(name, 0.0):>6.1f}",
                    flush=True,
                )


def run_coverage(seeds: int, out: list[dict[str, Any]]) -> None:
    from scipy.stats import binom

    print(f"{'n':>8} {'ε':>3} {'marginal':>9} {'cells':>7} {'covered':>8} {'band (99.9 %)':>16}")
    for n in (10_000, 100_000, 1_000_000):
        for epsilon in (1.0, 2.0, 4.0):
            m = choose_joint(epsilon, SIZES).mechanism
            codec = JointCodec(m)
            hits = {attrs: [0, 0] for attrs in [*PAIRS, (0,), (1,), (2,)]}
            for seed in range(seeds):
                values = population(n, seed)
                counts = codec.count(codec.encode(values, np.random.default_rng(seed)))
                for attrs, tally in hits.items():
                    est = estimate_marginal(m, counts, attrs)
                    true = truth(values, attrs)
                    tally[0] += int(np.sum((est.ci_low <= true) & (true <= est.ci_high)))
                    tally[1] += len(true)
            for attrs, (hit, total) in hits.items():
                low, high = (
                    binom.ppf(0.0005, total, 0.95) / total,
                    binom.ppf(0.9995, total, 0.95) / total,
                )
                share = hit / total
                out.append(
                    {
                        "n": n,
                        "epsilon": epsilon,
                        "marginal": list(attrs),
                        "cells": total,
                        "covered": share,
                    }
                )
                print(
                    f"{n:>8} {epsilon:>3g} {str(attrs):>9} {total:>7} {share:>8.3f} "
                    f"[{low:.3f}, {high:.3f}]",
                    flush=True,
                )


def run_audit(out: list[dict[str, Any]]) -> None:
    """RS+FD[GRR] through the library's client: Pr[y = (0,0,0)] for x = (0,0,0) and for
    x' = (1,1,1), k = 2 each, d = 3, against e^ε and e^ε'."""
    from multi_freq_ldpy.mdim_freq_est.RSpFD_solution import RSpFD_GRR_Client

    np.random.seed(1)
    draws = 200_000
    for epsilon in (1.0, 2.0):
        rates = []
        for x in ([0, 0, 0], [1, 1, 1]):
            hits = sum(
                list(RSpFD_GRR_Client(x, [2, 2, 2], 3, epsilon)) == [0, 0, 0] for _ in range(draws)
            )
            rates.append(hits / draws)
        ratio = rates[0] / rates[1]
        e_eps = exp_epsilon(epsilon)
        amplified = 3 * (e_eps - 1) + 1
        out.append({"epsilon": epsilon, "ratio": ratio, "e_eps": e_eps})
        print(
            f"RS+FD ε = {epsilon:g}: Pr ratio {ratio:.2f} (ε = {np.log(ratio):.2f}); "
            f"e^ε = {e_eps:.2f}, e^ε' = {amplified:.2f}",
            flush=True,
        )


DRAIN_METRICS: list[tuple[str, dict[str, Any]]] = [
    (
        "single grr k=12",
        {"domain": [f"v{i}" for i in range(12)], "epsilon": 2.0, "mechanism": "grr"},
    ),
    (
        "single olh k=128",
        {"domain": [f"v{i}" for i in range(128)], "epsilon": 2.0, "mechanism": "olh"},
    ),
    (
        "joint 3×4×3 (grr pairs)",
        {
            "kind": "joint",
            "epsilon": 2.0,
            "attributes": [
                {"name": f"a{j}", "domain": [f"v{i}" for i in range(k)]}
                for j, k in enumerate((3, 4, 3))
            ],
        },
    ),
    (
        "joint 4×8×16 (olh pairs)",
        {
            "kind": "joint",
            "epsilon": 2.0,
            "attributes": [
                {"name": f"a{j}", "domain": [f"v{i}" for i in range(k)]}
                for j, k in enumerate(SIZES)
            ],
        },
    ),
]
"""Single metrics and joint ones, drained in one run (same Redis, same worker command)."""


def drain_payloads(
    definition: MetricDefinition, rng: random.Random, count: int
) -> list[dict[str, Any]]:
    """``count`` SDK payloads of a single or joint metric (all values drawn first)."""
    if definition.kind == "joint":
        values = [
            [rng.randrange(len(labels)) for _, labels in definition.attributes]
            for _ in range(count)
        ]
    else:
        values = [rng.randrange(len(definition.domain)) for _ in range(count)]
    return [build_report(definition, v, rng)["payload"] for v in values]


def run_drain(reports: int, out: list[dict[str, Any]]) -> None:
    """Each metric: ``reports`` SDK payloads appended, one ``ldp aggregate --once`` drains."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from drain_harness import run_drains

    out += run_drains(DRAIN_METRICS, "bench.joint", reports, drain_payloads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=["mse", "coverage", "audit", "drain"])
    parser.add_argument("--reports", type=int, default=200_000, help="per metric (drain)")
    parser.add_argument("--seeds", default="5,3,2", help="seeds at n = 10⁴, 10⁵, 10⁶ (mse)")
    parser.add_argument("--methods", default="SPL,SMP,RS+FD")
    parser.add_argument("--coverage-seeds", type=int, default=40)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    rows: list[dict[str, Any]] = []
    if args.part == "mse":
        seeds = [int(s) for s in args.seeds.split(",")]
        ns = {10**4: seeds[0], 10**5: seeds[1], 10**6: seeds[2]}
        run_mse({n: s for n, s in ns.items() if s > 0}, args.methods.split(","), rows)
    elif args.part == "drain":
        run_drain(args.reports, rows)
    elif args.part == "coverage":
        run_coverage(args.coverage_seeds, rows)
    else:
        run_audit(rows)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
