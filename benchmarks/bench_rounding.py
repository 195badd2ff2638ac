"""The correctly rounded exp/expm1 (docs/protocol.md §3): their cost, and the SDK's
perturbation before and after, A/B in one run.

    .venv/bin/python benchmarks/bench_rounding.py               # against 95e4e6a
    .venv/bin/python benchmarks/bench_rounding.py --rev HEAD~1 --rounds 3

(a) µs per call of ``rounding.exp``/``expm1`` uncached (a new ε: what building a mechanism
pays once) and cached (every later call), beside libm's ``math.exp``. (b) The earlier
revision's ``client_sdk`` is unpacked with ``git archive`` into a temporary folder; a
worker process per tree, alternately, builds mechanisms for 40 new ε (cold caches) and
times ``perturb`` per call; the best round of each is kept, so the ratio new/old holds
however busy the shared machine is. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BASELINE = "95e4e6a"
"""main before the protocol pinned exp/expm1 (libm's math.exp and math.expm1)."""

WORKER = r"""
import json, random, sys, time
from client_sdk import mechanisms
from client_sdk.mechanisms.randomness import SecureRandom

def per_call(fn, n):
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6

out = {}
eps = [0.5 + i * 0.37 for i in range(40)]  # new ε: every cache is cold
t = time.perf_counter()
for e in eps:
    mechanisms.create("grr", epsilon=e, domain_size=16).keep
    mechanisms.create("oue", epsilon=e, domain_size=64).q
    mechanisms.create("sue", epsilon=e, domain_size=64).p
    mechanisms.create_numeric("hybrid", min(e, 20.0)).alpha
out["build 4 mechanisms, new ε (µs)"] = (time.perf_counter() - t) / len(eps) * 1e6
rng = SecureRandom()
oue = mechanisms.create("oue", epsilon=1.0, domain_size=1024)
grr = mechanisms.create("grr", epsilon=2.0, domain_size=16)
hyb = mechanisms.create_numeric("hybrid", 2.0)
out["perturb oue k=1024 (µs)"] = per_call(lambda: oue.perturb(517, rng), 2000)
out["perturb grr k=16 (µs)"] = per_call(lambda: grr.perturb(5, rng), 20000)
out["perturb hybrid (µs)"] = per_call(lambda: hyb.perturb(0.25, rng), 20000)
print(json.dumps(out))
"""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def unpack(rev: str, into: Path) -> None:
    data = subprocess.run(
        ["git", "archive", rev, "client_sdk"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")


def run_worker(tree: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", WORKER], cwd=tree, env=env, capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    result: dict[str, float] = json.loads(out.stdout)
    return result


def function_costs() -> list[tuple[str, float]]:
    from client_sdk.mechanisms import rounding

    xs = [0.01 + i * 0.0499 for i in range(400)]

    def per_call(fn: object, args: list[float]) -> float:
        best = math.inf
        for _ in range(3):
            t = time.perf_counter()
            for x in args:
                fn(x)  # type: ignore[operator]
            best = min(best, (time.perf_counter() - t) / len(args))
        return best * 1e6

    rows = [
        ("math.exp (libm)", per_call(math.exp, xs * 50)),
        ("rounding.exp, new x (decimal, Ziv)", per_call(lambda x: rounding._rounded(x, False), xs)),
        ("rounding.expm1, new x", per_call(lambda x: rounding._rounded(x, True), xs)),
    ]
    for x in xs:
        rounding.exp(x)
    rows.append(("rounding.exp, cached x", per_call(rounding.exp, xs * 50)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default=BASELINE, help="the revision to compare against")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {load()}  ({os.cpu_count()} cores)")
    print("\n(a) µs per call")
    for name, us in function_costs():
        print(f"  {name:<38} {us:9.3f}")
    with tempfile.TemporaryDirectory() as tmp:
        old, new = Path(tmp) / "old", Path(tmp) / "new"
        unpack(args.rev, old)
        new.mkdir()
        (new / "client_sdk").symlink_to(ROOT / "client_sdk")
        best: dict[str, dict[str, float]] = {"old": {}, "new": {}}
        for _ in range(args.rounds):
            for label, tree in (("old", old), ("new", new)):
                for key, value in run_worker(tree).items():
                    best[label][key] = min(best[label].get(key, math.inf), value)
    print(f"\n(b) best of {args.rounds} alternating rounds: {args.rev} (libm) vs this tree")
    print(f"  {'case':<34} {'before':>9} {'after':>9} {'after/before':>13}")
    for key in best["old"]:
        b, a = best["old"][key], best["new"][key]
        print(f"  {key:<34} {b:9.2f} {a:9.2f} {a / b:13.2f}")
    print(f"\nload average after: {load()}")


if __name__ == "__main__":
    main()
