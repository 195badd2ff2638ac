"""The same workloads in two peer libraries, pure-LDP and multi-freq-ldpy, beside ours.

The peers are not project dependencies; they live in a throwaway virtualenv::

    python3 -m venv /tmp/peers-venv
    /tmp/peers-venv/bin/pip install pure-ldp multi-freq-ldpy
    # pure-ldp 1.2.0 imports scikit-learn and statsmodels without declaring them, and both
    # packages hash str with xxhash, which xxhash >= 3 refuses ("Strings must be encoded
    # before hashing"); neither pins it:
    /tmp/peers-venv/bin/pip install scikit-learn statsmodels "xxhash<3"
    /tmp/peers-venv/bin/python benchmarks/bench_peers.py            # ~25 s
    /tmp/peers-venv/bin/python benchmarks/bench_peers.py --quick

Measured in one run, so that the ratios hold however fast the shared machine is:

* OLH decode at k = 1024, ε = 1: ours is ``codec_for(m).decode(payloads)`` (validate,
  columnize, count) at 10⁶ reports and, for a like-for-like batch, at the peers' size;
  pure-LDP is ``LHServer.aggregate_all`` + ``estimate_all``; multi-freq-ldpy is
  ``LH_Aggregator_MI``. Both peers evaluate an xxhash per report and per value in a Python
  loop, O(n·k) with no fixed cost, so their µs/report does not depend on n: they are timed
  on ``--peer-reports`` reports (default 3000; 10⁶ would take ~15 minutes each) and the
  10⁶ figure is that rate × 10⁶.
* OUE perturb at k = 1024, ε = 1: ours with the default CSPRNG and exact sampling, and with
  ``random.Random`` (Mersenne Twister, like the peers' generators); pure-LDP's
  ``UEClient.privatise`` (numpy global generator, returns a numpy vector) and
  multi-freq-ldpy's numba-compiled ``UE_Client`` (compiled before timing).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator.decoding import codec_for  # noqa: E402
from client_sdk import mechanisms  # noqa: E402

K, EPSILON = 1024, 1.0


def per_report(fn: Callable[[], object], reports: int, repeat: int) -> tuple[float, float]:
    """(best, median) µs per report of ``fn``, which handles ``reports`` reports."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) / reports * 1e6)
    return min(samples), statistics.median(samples)


def versions() -> dict[str, str]:
    """Installed versions of the peers and what they run on."""
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for dist in ("pure-ldp", "multi-freq-ldpy", "xxhash", "numba"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


# -- OLH decode ---------------------------------------------------------------------------


def ours_olh_decode(n: int, repeat: int) -> tuple[float, float]:
    """Our validate + count of n OLH payloads, µs/report."""
    m = mechanisms.create("olh", epsilon=EPSILON, domain_size=K)
    codec = codec_for(m)
    gen = np.random.default_rng(1)
    payloads = codec.to_payloads(codec.encode(gen.integers(0, K, n), gen))
    codec.decode(payloads[:1000])  # warm-up
    return per_report(lambda: codec.decode(payloads), n, repeat)


def pure_ldp_olh_decode(n: int, repeat: int) -> tuple[float, float]:
    """pure-LDP: LHServer.aggregate_all + estimate_all over the whole domain, µs/report."""
    from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer

    client = LHClient(EPSILON, K, use_olh=True)
    rnd = random.Random(2)
    reports = [client.privatise(rnd.randint(1, K)) for _ in range(n)]  # data are 1..d

    def run() -> None:
        server = LHServer(EPSILON, K, use_olh=True)
        server.aggregate_all(reports)
        server.estimate_all(range(1, K + 1), suppress_warnings=True)

    return per_report(run, n, repeat)


def mfl_olh_decode(n: int, repeat: int) -> tuple[float, float]:
    """multi-freq-ldpy: LH_Aggregator_MI (count + estimate + normalise), µs/report."""
    from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI, LH_Client

    np.random.seed(3)
    rnd = random.Random(3)
    reports = [LH_Client(rnd.randrange(K), K, EPSILON, True) for _ in range(n)]
    return per_report(lambda: LH_Aggregator_MI(reports, K, EPSILON, True), n, repeat)


# -- OUE perturb --------------------------------------------------------------------------


def ours_oue_perturb(reports: int, repeat: int, seeded: bool) -> tuple[float, float]:
    """Our OUE perturb, default CSPRNG or a ``random.Random``, µs/report."""
    m = mechanisms.create("oue", epsilon=EPSILON, domain_size=K)
    rnd = random.Random(4)
    values = [rnd.randrange(K) for _ in range(reports)]
    rng = random.Random(5) if seeded else None

    def run() -> None:
        for v in values:
            m.perturb(v, rng)

    run()  # warm-up
    return per_report(run, reports, repeat)


def pure_ldp_oue_perturb(reports: int, repeat: int) -> tuple[float, float]:
    """pure-LDP: UEClient(use_oue=True).privatise, µs/report."""
    from pure_ldp.frequency_oracles.unary_encoding import UEClient

    client = UEClient(EPSILON, K, use_oue=True)
    rnd = random.Random(6)
    values = [rnd.randint(1, K) for _ in range(reports)]

    def run() -> None:
        for v in values:
            client.privatise(v)

    run()
    return per_report(run, reports, repeat)


def mfl_oue_perturb(reports: int, repeat: int) -> tuple[float, float]:
    """multi-freq-ldpy: UE_Client(optimal=True), numba-compiled before timing, µs/report."""
    from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Client

    start = time.perf_counter()
    UE_Client(0, K, EPSILON, True)
    print(f"    (multi-freq-ldpy UE_Client numba compile: {time.perf_counter() - start:.2f} s)")
    rnd = random.Random(7)
    values = [rnd.randrange(K) for _ in range(reports)]

    def run() -> None:
        for v in values:
            UE_Client(v, K, EPSILON, True)

    run()
    return per_report(run, reports, repeat)


def attempt(label: str, fn: Callable[[], tuple[float, float]]) -> tuple[float, float] | None:
    """Run one measurement; on failure print exactly why and go on."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except Exception as exc:  # a peer failing is a result to report
        last = traceback.extract_tb(exc.__traceback__)[-1]
        print(
            f"  {label}: FAILED: {type(exc).__name__}: {exc} "
            f"(at {Path(last.filename).name}:{last.lineno})"
        )
        return None


def row(label: str, result: tuple[float, float] | None, ours: float | None, n: str) -> None:
    """One table line: best and median µs/report and the ratio to ours (best/best)."""
    if result is None:
        print(f"  {label:44} {'failed':>10}")
        return
    best, median = result
    ratio = f"{best / ours:10.1f}×" if ours else ""
    print(f"  {label:44} {n:>9} {best:11.3f} {median:11.3f} {ratio}")


def main(argv: Sequence[str] | None = None) -> int:
    """Time the peers and ours in one run and print µs/report and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer reports and repeats")
    parser.add_argument("--reports", type=int, help="our OLH decode batch (default 10⁶)")
    parser.add_argument("--peer-reports", type=int, help="peers' OLH decode reports (3000)")
    args = parser.parse_args(argv)
    n = args.reports or (100_000 if args.quick else 1_000_000)
    peer_n = args.peer_reports or (300 if args.quick else 3000)
    repeat = 2 if args.quick else 3
    perturb_reports = 300 if args.quick else 2000

    info = versions()
    print(
        f"peer benchmarks — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"nproc {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.2f}"
    )
    print("  " + ", ".join(f"{key} {value}" for key, value in info.items()))
    header = f"  {'':44} {'reports':>9} {'best µs':>11} {'median µs':>11} {'÷ ours':>11}"

    print(f"\nOLH decode, k = {K}, ε = {EPSILON:g} (µs/report; ratio: peer ÷ ours at {n})")
    print(header)
    ours = ours_olh_decode(n, repeat)
    ours_small = ours_olh_decode(peer_n, repeat)
    row("ours: codec.decode (parse + count)", ours, None, f"{n}")
    row("ours, same batch as the peers", ours_small, None, f"{peer_n}")
    base = ours[0]
    row(
        "pure-LDP LHServer aggregate_all + estimate_all",
        attempt("pure-LDP", lambda: pure_ldp_olh_decode(peer_n, 1 if args.quick else 2)),
        base,
        f"{peer_n}",
    )
    row(
        "multi-freq-ldpy LH_Aggregator_MI",
        attempt("multi-freq-ldpy", lambda: mfl_olh_decode(peer_n, 1 if args.quick else 2)),
        base,
        f"{peer_n}",
    )
    print(f"  (same-batch ratios: divide by ours at {peer_n}, {ours_small[0]:.3f} µs)")

    print(
        f"\nOUE perturb, k = {K}, ε = {EPSILON:g} (µs/report; ratio: peer ÷ ours with the CSPRNG)"
    )
    print(header)
    ours_csprng = ours_oue_perturb(perturb_reports, repeat + 2, seeded=False)
    ours_mt = ours_oue_perturb(perturb_reports, repeat + 2, seeded=True)
    row("ours: perturb(v), CSPRNG (os.urandom)", ours_csprng, None, f"{perturb_reports}")
    row("ours: perturb(v, random.Random(seed))", ours_mt, None, f"{perturb_reports}")
    row(
        "pure-LDP UEClient(use_oue=True).privatise",
        attempt("pure-LDP", lambda: pure_ldp_oue_perturb(perturb_reports, repeat + 2)),
        ours_csprng[0],
        f"{perturb_reports}",
    )
    row(
        "multi-freq-ldpy UE_Client (numba)",
        attempt("multi-freq-ldpy", lambda: mfl_oue_perturb(perturb_reports, repeat + 2)),
        ours_csprng[0],
        f"{perturb_reports}",
    )
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
