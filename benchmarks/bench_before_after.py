"""Before/after: the optimized hot paths against an earlier revision, A/B in one process.

    .venv/bin/python benchmarks/bench_before_after.py            # against 745b56c
    .venv/bin/python benchmarks/bench_before_after.py --rev HEAD~1 --quick

The earlier randomness module (``client_sdk/mechanisms/randomness.py``, ``_random.py`` in
revisions before its rename) and frequency codecs (``aggregator/stats/codecs.py``,
``aggregator/decoding.py`` before the aggregator was split by job) are read with
``git show REV:path`` and loaded as separate modules beside the current ones; both
versions run on the same payloads, alternately, and the best of several rounds is kept,
so the ratio holds however fast the shared machine is at the moment. The old OUE sampler
runs inside the current ``OptimizedUnaryEncoding`` (only ``bernoulli_lanes`` and the
generator are swapped); the old subset-selection perturb is its three lines, copied.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator.stats.kinds import codec_for  # noqa: E402
from client_sdk import mechanisms  # noqa: E402
from client_sdk.mechanisms import randomness, unary  # noqa: E402

RANDOMNESS = "client_sdk/mechanisms/randomness.py"
"""Where the randomness module lives now."""

OLD_RANDOMNESS = "client_sdk/mechanisms/_random.py"
"""Where it lived in revisions before its rename (745b56c, the default ``--rev``, among them)."""

CODECS = "aggregator/stats/codecs.py"
"""Where the frequency codecs live now."""

OLD_CODECS = "aggregator/decoding.py"
"""Where they lived before the aggregator was split by job."""


def load_old(rev: str, path: str, name: str) -> types.ModuleType:
    """Module ``name`` built from ``path`` as it was at ``rev``."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    module = types.ModuleType(name)
    module.__file__ = f"{rev}:{path}"
    sys.modules[name] = module  # dataclasses look their module up while decorating
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def path_at(rev: str, path: str, old_path: str) -> str:
    """``path`` if revision ``rev`` has it, else ``old_path`` (where it was before a move)."""
    found = subprocess.run(
        ["git", "cat-file", "-e", f"{rev}:{path}"], cwd=ROOT, capture_output=True
    )
    return path if found.returncode == 0 else old_path


def ab(
    old: Callable[[], object], new: Callable[[], object], units: int, rounds: int
) -> tuple[float, float]:
    """Best µs per unit of ``old`` and ``new``, timed alternately ``rounds`` times."""
    best_old = best_new = float("inf")
    for _ in range(rounds):
        for which in ("old", "new"):
            fn = old if which == "old" else new
            start = time.perf_counter()
            fn()
            elapsed = (time.perf_counter() - start) / units * 1e6
            if which == "old":
                best_old = min(best_old, elapsed)
            else:
                best_new = min(best_new, elapsed)
    return best_old, best_new


def report(label: str, old: float, new: float) -> None:
    """One line: before, after, speed-up."""
    print(f"  {label:44} {old:10.3f} {new:10.3f} {old / new:8.1f}×", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Time the old and the new code paths side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="745b56c", help="the earlier revision (745b56c)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else 7
    scale = 10 if args.quick else 1

    old_random = load_old(args.rev, path_at(args.rev, RANDOMNESS, OLD_RANDOMNESS), "old_random")
    old_decoding = load_old(args.rev, path_at(args.rev, CODECS, OLD_CODECS), "old_decoding")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the start: {load}; {os.cpu_count()} CPUs")
    print(f"before = {args.rev}, after = the work tree; µs per report, best of {rounds}")
    print(f"  {'':44} {'before':>10} {'after':>10} {'speed-up':>9}")

    # OUE perturb, k = 1024: old bit-plane sampler and old CSPRNG vs the current ones.
    oue = mechanisms.create("oue", epsilon=1.0, domain_size=1024)
    values = list(np.random.default_rng(0).integers(0, 1024, 2000 // scale).tolist())
    old_rng = old_random.SecureRandom()
    new_lanes = randomness.bernoulli_lanes  # what unary.py imported
    assert unary.bernoulli_lanes is new_lanes

    def oue_old() -> None:
        unary.bernoulli_lanes = old_random.bernoulli_lanes
        try:
            for v in values:
                oue.perturb(v, old_rng)
        finally:
            unary.bernoulli_lanes = new_lanes

    def oue_new() -> None:
        for v in values:
            oue.perturb(v)

    report("OUE perturb, k=1024, ε=1 (CSPRNG)", *ab(oue_old, oue_new, len(values), rounds))

    # SS perturb, k = 1024 (s = 275): one rng.sample draw per pick vs marks + fix-up.
    ss = mechanisms.create("ss", epsilon=1.0, domain_size=1024)
    ss_values = values[: max(50, len(values) // 10)]

    def ss_old() -> None:
        for value in ss_values:  # the revision's SubsetSelection._perturb
            include = old_random.bernoulli(old_rng, ss.keep)
            others = old_rng.sample(range(ss.domain_size - 1), ss.s - 1 if include else ss.s)
            picked = [u + (u >= value) for u in others]
            if include:
                picked.append(value)
            picked.sort()

    def ss_new() -> None:
        for v in ss_values:
            ss.perturb(v)

    report("SS perturb, k=1024, ε=1 (CSPRNG)", *ab(ss_old, ss_new, len(ss_values), rounds))

    gen = np.random.default_rng(1)
    cases: list[tuple[str, str, int, str, int]] = [
        ("OLH count, k=1024, ε=1", "olh", 1024, "count", 1_000_000),
        ("OLH count, k=1024, ε=0.5", "olh", 1024, "count", 1_000_000),
        ("OUE count, k=1024, ε=1", "oue", 1024, "count", 200_000),
        ("SS parse, k=1024, ε=1", "ss", 1024, "parse", 20_000),
    ]
    for label, name, k, part, n in cases:
        eps = 0.5 if "0.5" in label else 1.0
        m = mechanisms.create(name, epsilon=eps, domain_size=k)
        new_codec, old_codec = codec_for(m), old_decoding.codec_for(m)
        n //= scale
        payloads = new_codec.to_payloads(new_codec.encode(gen.integers(0, k, n), gen))
        batch = new_codec.parse(payloads)
        assert np.array_equal(new_codec.count(batch), old_codec.count(old_codec.parse(payloads)))
        run: dict[str, Callable[[Any], object]] = {
            "count": lambda c, b=batch: c.count(b),
            "parse": lambda c, p=payloads: c.parse(p),
        }
        fn = run[part]
        best = ab(
            lambda c=old_codec, f=fn: f(c), lambda c=new_codec, f=fn: f(c), n, max(2, rounds // 2)
        )
        report(f"{label}, n={n}", *best)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the end: {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
