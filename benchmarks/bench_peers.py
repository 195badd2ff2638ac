"""The same workloads in two peer libraries, pure-LDP and multi-freq-ldpy, beside ours.

The peers are not project dependencies; they live in a throwaway virtualenv::

    python3 -m venv /tmp/peers-venv
    /tmp/peers-venv/bin/pip install pure-ldp multi-freq-ldpy
    # pure-ldp 1.2.0 imports scikit-learn and statsmodels without declaring them, and both
    # packages hash str with xxhash, which xxhash >= 3 refuses ("Strings must be encoded
    # before hashing"); neither pins it:
    /tmp/peers-venv/bin/pip install scikit-learn statsmodels "xxhash<3"
    PYTHONPATH=. /tmp/peers-venv/bin/python benchmarks/bench_peers.py          # ~2 min
    PYTHONPATH=. /tmp/peers-venv/bin/python benchmarks/bench_peers.py --quick  # ~15 s

(numpy is all of ours it needs; the peers pull it in.) Measured in one run, so that the
ratios hold however fast the shared machine is, for every mechanism both we and a peer
implement — GRR, OUE, OLH (both peers), SS (multi-freq-ldpy) — at k = 1024, ε = 1:

* perturb, µs/report over 2000 values: ours with the default CSPRNG and exact sampling,
  and with ``random.Random`` (Mersenne Twister, like the peers' generators); pure-LDP's
  ``<M>Client.privatise`` (numpy's global generator or ``random``; returns a numpy vector
  for OUE) and multi-freq-ldpy's ``<M>_Client`` (numba-compiled for GRR, OUE and SS:
  compiled before timing).
* decode, µs/report: ours is ``codec_for(m).decode(payloads)`` (validate, columnize,
  count) at 10⁶ reports (SS: 10⁵) and, like for like, at the peers' batch size; pure-LDP
  is ``<M>Server.aggregate_all`` + ``estimate_all``, multi-freq-ldpy ``<M>_Aggregator_MI``.
  Both peers loop in Python over the reports (and for OLH over every value of the domain,
  evaluating an xxhash each time: O(n·k)), with no fixed cost, so their µs/report does not
  depend on n: they are timed on :data:`PEER_DECODE_REPORTS` (OLH: 3000; 10⁶ would take
  ~15 minutes each).

The last table gives every ratio, peer ÷ ours (best of the repeats of each); for decode
the like-for-like one first, ours at the peers' batch size (ours at 10⁶ reports is
cheaper per report, its fixed costs amortised: that ratio, e.g. OLH's ~1,600× against
~200× at 3000 reports, is not a comparison of the same work).
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
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator.stats.kinds import codec_for  # noqa: E402
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


MECHANISMS = ("grr", "oue", "olh", "ss")
PURE_LDP = ("grr", "oue", "olh")
MFL = ("grr", "oue", "olh", "ss")
"""Ours that a peer implements too: GRR (pure-LDP's "direct encoding"), OUE, OLH (both),
SS (multi-freq-ldpy only). At k = 1024, ε = 1 SS reports 275 values (both libraries)."""

OUR_DECODE_REPORTS = {"grr": 1_000_000, "oue": 1_000_000, "olh": 1_000_000, "ss": 100_000}
"""Our decode batch per mechanism (ss reports are 275 values each: 10⁵ is 2.75·10⁷)."""

PEER_DECODE_REPORTS = {"grr": 100_000, "oue": 20_000, "olh": 3_000, "ss": 10_000}
"""The peers' decode batch: they loop in Python per report (OLH: per report and value),
so their µs/report does not depend on n; sized to take a few seconds each."""

PERTURB_REPORTS = 2000


# -- ours --------------------------------------------------------------------------------


def ours_decode(name: str, n: int, repeat: int) -> tuple[float, float]:
    """Our validate + count (``codec.decode``) of n payloads, µs/report."""
    m = mechanisms.create(name, epsilon=EPSILON, domain_size=K)
    codec = codec_for(m)
    gen = np.random.default_rng(1)
    payloads = codec.to_payloads(codec.encode(gen.integers(0, K, n), gen))
    codec.decode(payloads[:1000])  # warm-up
    return per_report(lambda: codec.decode(payloads), n, repeat)


def ours_perturb(name: str, reports: int, repeat: int, seeded: bool) -> tuple[float, float]:
    """Our ``m.perturb``, default CSPRNG or a ``random.Random``, µs/report."""
    m = mechanisms.create(name, epsilon=EPSILON, domain_size=K)
    rnd = random.Random(4)
    values = [rnd.randrange(K) for _ in range(reports)]
    rng = random.Random(5) if seeded else None

    def run() -> None:
        for v in values:
            m.perturb(v, rng)

    run()  # warm-up
    return per_report(run, reports, repeat)


# -- pure-LDP (data are 1..d: its default index_mapper is x - 1) ----------------------------


def _pure_ldp(name: str) -> tuple[Any, Any]:
    """pure-LDP's (client, server factory) for one of our mechanism names."""
    from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
    from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer
    from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer

    if name == "grr":
        return DEClient(EPSILON, K), lambda: DEServer(EPSILON, K)
    if name == "oue":
        return UEClient(EPSILON, K, use_oue=True), lambda: UEServer(EPSILON, K, use_oue=True)
    if name == "olh":
        return LHClient(EPSILON, K, use_olh=True), lambda: LHServer(EPSILON, K, use_olh=True)
    raise LookupError(f"pure-LDP has no {name}")


def pure_ldp_perturb(name: str, reports: int, repeat: int) -> tuple[float, float]:
    """pure-LDP: ``<Mechanism>Client.privatise``, µs/report."""
    client, _ = _pure_ldp(name)
    rnd = random.Random(6)
    values = [rnd.randint(1, K) for _ in range(reports)]

    def run() -> None:
        for v in values:
            client.privatise(v)

    run()
    return per_report(run, reports, repeat)


def pure_ldp_decode(name: str, n: int, repeat: int) -> tuple[float, float]:
    """pure-LDP: ``aggregate_all`` + ``estimate_all`` over the whole domain, µs/report."""
    client, server_for = _pure_ldp(name)
    rnd = random.Random(2)
    reports = [client.privatise(rnd.randint(1, K)) for _ in range(n)]

    def run() -> None:
        server = server_for()
        server.aggregate_all(reports)
        server.estimate_all(range(1, K + 1), suppress_warnings=True)

    return per_report(run, n, repeat)


# -- multi-freq-ldpy ---------------------------------------------------------------------


def _mfl(name: str) -> tuple[Callable[[int], Any], Callable[[list[Any]], Any]]:
    """multi-freq-ldpy's (client, aggregator) for one of our mechanism names."""
    from multi_freq_ldpy.pure_frequency_oracles import GRR, LH, SS, UE

    if name == "grr":
        return (lambda v: GRR.GRR_Client(v, K, EPSILON)), (
            lambda r: GRR.GRR_Aggregator_MI(r, K, EPSILON)
        )
    if name == "oue":
        return (lambda v: UE.UE_Client(v, K, EPSILON, True)), (
            lambda r: UE.UE_Aggregator_MI(r, EPSILON, True)
        )
    if name == "olh":
        return (lambda v: LH.LH_Client(v, K, EPSILON, True)), (
            lambda r: LH.LH_Aggregator_MI(r, K, EPSILON, True)
        )
    if name == "ss":
        return (lambda v: SS.SS_Client(v, K, EPSILON)), (
            lambda r: SS.SS_Aggregator_MI(r, K, EPSILON)
        )
    raise LookupError(f"multi-freq-ldpy has no {name}")


def mfl_perturb(name: str, reports: int, repeat: int) -> tuple[float, float]:
    """multi-freq-ldpy: ``<M>_Client`` (numba-compiled ones compiled before timing)."""
    client, _ = _mfl(name)
    start = time.perf_counter()
    client(0)
    print(
        f"    (multi-freq-ldpy {name} client, first call (numba compile, if jitted): "
        f"{time.perf_counter() - start:.2f} s)"
    )
    rnd = random.Random(7)
    values = [rnd.randrange(K) for _ in range(reports)]

    def run() -> None:
        for v in values:
            client(v)

    run()
    return per_report(run, reports, repeat)


def mfl_decode(name: str, n: int, repeat: int) -> tuple[float, float]:
    """multi-freq-ldpy: ``<M>_Aggregator_MI`` (count + estimate + normalise), µs/report."""
    client, aggregate = _mfl(name)
    np.random.seed(3)
    rnd = random.Random(3)
    reports = [client(rnd.randrange(K)) for _ in range(n)]
    return per_report(lambda: aggregate(reports), n, repeat)


def attempt(
    label: str, fn: Callable[..., tuple[float, float]], *args: Any
) -> tuple[float, float] | None:
    """Run one measurement; on failure print exactly why and go on."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)
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


def ratio(peer: tuple[float, float] | None, ours: float) -> str:
    """peer ÷ ours (best/best), or "–" where the peer has no such mechanism or failed."""
    return f"{peer[0] / ours:,.1f}×" if peer else "–"


@dataclass(frozen=True)
class Peer:
    """A peer library: its mechanisms, how to time it, how its rows are labelled."""

    label: str
    names: Any
    perturb: Callable[..., tuple[float, float]]
    decode: Callable[..., tuple[float, float]]
    perturb_row: str
    decode_row: str


PEERS = (
    Peer(
        "pure-LDP",
        PURE_LDP,
        pure_ldp_perturb,
        pure_ldp_decode,
        "pure-LDP <M>Client.privatise",
        "pure-LDP aggregate_all + estimate_all",
    ),
    Peer(
        "multi-freq-ldpy",
        MFL,
        mfl_perturb,
        mfl_decode,
        "multi-freq-ldpy <M>_Client",
        "multi-freq-ldpy <M>_Aggregator_MI",
    ),
)
"""The peers, in the tables' order (pure-LDP, then multi-freq-ldpy)."""

HEADER = f"  {'':44} {'reports':>9} {'best µs':>11} {'median µs':>11} {'÷ ours':>11}"


def _compare(name: str, args: argparse.Namespace) -> tuple[str, ...]:
    """One mechanism's perturb and decode tables, ours beside each peer's; its summary row."""
    scale = 10 if args.quick else 1
    repeat = 2 if args.quick else 3
    perturb_reports = PERTURB_REPORTS // scale
    n = args.reports or OUR_DECODE_REPORTS[name] // scale
    peer_n = args.peer_reports or PEER_DECODE_REPORTS[name] // scale
    peers = [p for p in PEERS if name in p.names]
    print(f"\n{name.upper()} perturb, k = {K}, ε = {EPSILON:g} (µs/report; peer ÷ ours, CSPRNG)")
    print(HEADER)
    csprng = ours_perturb(name, perturb_reports, repeat + 2, seeded=False)
    mt = ours_perturb(name, perturb_reports, repeat + 2, seeded=True)
    perturbed = {
        p.label: attempt(p.label, p.perturb, name, perturb_reports, repeat + 2) for p in peers
    }
    row("ours: perturb(v), CSPRNG (os.urandom)", csprng, None, f"{perturb_reports}")
    row("ours: perturb(v, random.Random(seed))", mt, None, f"{perturb_reports}")
    for p in peers:
        row(p.perturb_row, perturbed[p.label], csprng[0], f"{perturb_reports}")

    print(f"{name.upper()} decode (µs/report; peer ÷ ours at the same batch, {peer_n})")
    print(HEADER)
    ours = ours_decode(name, n, repeat)
    small = ours_decode(name, peer_n, repeat)
    slow = 1 if args.quick else 2
    decoded = {p.label: attempt(p.label, p.decode, name, peer_n, slow) for p in peers}
    row("ours: codec.decode (validate + count)", ours, None, f"{n}")
    row("ours, same batch as the peers", small, None, f"{peer_n}")
    # ÷ ours at the same batch: like for like (our fixed costs amortise over a larger one)
    for p in peers:
        row(p.decode_row, decoded[p.label], small[0], f"{peer_n}")

    def both(found: dict[str, tuple[float, float] | None], ours: float) -> str:
        return " / ".join(ratio(found.get(p.label), ours) for p in PEERS)

    return (
        name,
        f"{csprng[0]:.2f}",
        both(perturbed, csprng[0]),
        both(perturbed, mt[0]),
        f"{small[0]:.3f}",
        both(decoded, small[0]),
        both(decoded, ours[0]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Time the peers and ours in one run and print µs/report and ratios per mechanism."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10× fewer reports, fewer repeats")
    parser.add_argument("--mechanisms", default=",".join(MECHANISMS), help="comma-separated subset")
    parser.add_argument("--reports", type=int, help="our decode batch (default per mechanism)")
    parser.add_argument("--peer-reports", type=int, help="peers' decode batch (per mechanism)")
    args = parser.parse_args(argv)
    names = [x for x in args.mechanisms.split(",") if x]

    info = versions()
    print(
        f"peer benchmarks — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"nproc {len(os.sched_getaffinity(0))}, load average (1, 5, 15 min) "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    print("  " + ", ".join(f"{key} {value}" for key, value in info.items()))
    summary = [_compare(name, args) for name in names]

    print(f"\nratios, peer ÷ ours (best of each; > 1: ours is faster), k = {K}, ε = {EPSILON:g}")
    print(
        "  (perturb: ÷ ours with the CSPRNG, and ÷ ours with random.Random like the peers; "
        "decode: ÷ ours at the peers' batch size, like for like; then ÷ ours at our 10⁶ "
        "batch, where our fixed costs amortise: not like for like)"
    )
    cols = (
        "mechanism",
        "ours perturb µs",
        "perturb pure-LDP / mfl ÷",
        "same RNG: pure-LDP / mfl ÷",
        "ours decode µs, same n",
        "decode, same n: pure-LDP / mfl ÷",
        "ours at 10⁶: pure-LDP / mfl ÷",
    )
    print("  " + " | ".join(cols))
    for line in summary:
        print("  " + " | ".join(cell.rjust(len(col)) for cell, col in zip(line, cols, strict=True)))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload average (1, 5, 15 min) at the end: {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
