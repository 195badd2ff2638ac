"""PRAM's costs on the device and at definition load, beside GRR's.

* Loading a definition: every process that loads a pram definition checks its matrix
  exactly (rational arithmetic: stochastic rows, ε, singularity), O(k³) in pure Python;
  printed for k up to ``MAX_PRAM_SIZE`` (64), with the float inverse the estimator uses.
* Perturbing: one exact draw from a row (an integer uniform against cumulative integer
  weights) against GRR's exact Bernoulli, at the same ε and k.

Run: ``python benchmarks/bench_pram.py``. Prints the load average before and after.
"""

from __future__ import annotations

import os
import random
import time

from client_sdk import mechanisms
from client_sdk.mechanisms.pram import MAX_PRAM_SIZE, read_frozen


def banded(k: int) -> list[list[str]]:
    """A neighbour-weighted matrix: 1/2 on the diagonal, the rest decreasing with distance."""
    rows = []
    for x in range(k):
        weights = [1 / (1 + abs(x - y)) if x != y else 0.0 for y in range(k)]
        total = sum(weights)
        rows.append([("0.5" if x == y else repr(0.5 * w / total)) for y, w in enumerate(weights)])
    return rows


def timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main() -> None:
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    print(f"{'k':>4} {'load+check ms':>14} {'inverse ms':>11} {'ε':>7}")
    for k in (4, 16, 32, MAX_PRAM_SIZE):
        matrix = banded(k)
        load = timed(
            lambda m=matrix: (read_frozen.cache_clear(), mechanisms.create("pram", matrix=m)), 3
        )
        m = mechanisms.create("pram", matrix=matrix)
        inv = timed(lambda m=m: (m.__dict__.pop("inverse", None), m.inverse), 3)
        print(f"{k:>4} {load * 1e3:>14.1f} {inv * 1e3:>11.1f} {m.epsilon:>7.3f}")
    rng = random.Random(1)
    k = 16
    pram = mechanisms.create("pram", matrix=banded(k))
    grr = mechanisms.create("grr", epsilon=pram.epsilon, domain_size=k)
    n = 200_000
    for m in (pram, grr):
        per = timed(lambda m=m: m.perturb(rng.randrange(k), rng), n)
        print(f"perturb {m.name:>4} k={k} ε={m.epsilon:.3f}: {per * 1e6:.2f} µs per report")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
