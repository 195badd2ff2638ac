"""One command: a local ``ldp serve``, a headless Locust load of simulated apps, and checks.

Run: ``python -m loadtests.run`` (1,000,000 devices), or quickly
``python -m loadtests.run --devices 20000 --users 20 --time 60s``. Against a server that
is already running (``ldp serve``, say, or a deployment; fresh, as the checks compare the
counts with this run's reports alone): ``--host``/``--port`` name it, and ``--redis-url``
(or ``REDIS_URL``) its Redis, where the checks read the counts.

In full: ``docs/guides/deployment.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["LoadResult", "main", "miss_bound", "run"]

HERE = Path(__file__).resolve().parent

NOMINAL_MISS_RATE = 0.05
"""The intervals are 95 % intervals: about 5 % of them should miss the truth."""

DEFAULT_USERS = 16
"""Concurrent Locust users: 8 per default web worker, enough to keep them busy while one
request is in flight and the next is being encoded, few enough that queueing stays well
under the p95 threshold on a 2-core machine; and 16 × 625 batches × 100 devices is
exactly the default 1,000,000 devices."""

DEFAULT_MISS_ALPHA = 1e-3
"""Fail only if that many misses (or more) had probability < 0.1 % at a 5 % miss rate:
a correct system fails this check once in a thousand runs."""

DRAIN_TIMEOUT = 600.0
"""Seconds to wait for the aggregator to count every accepted report."""


@dataclass
class LoadResult:
    """The figures of one run and the checks' verdicts."""

    devices_target: int
    devices: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    requests: int = 0
    failures: int = 0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    requests_per_s: float = 0.0
    reports_per_s: float = 0.0
    load_seconds: float = 0.0
    drain_seconds: float = 0.0
    counted: dict[str, int] = field(default_factory=dict)
    misses: int = 0
    intervals: int = 0
    miss_limit: int = 0
    locust_exit_code: int = 0
    failed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``summary.json``)."""
        return dict(self.__dict__)


def miss_bound(intervals: int, alpha: float = DEFAULT_MISS_ALPHA) -> int:
    """The most misses a run may have: the smallest m with P(X > m) < alpha, X ~ Bin(n, 5 %).

    The intervals of one metric are not independent, so this is a guide, not an exact
    test; with a few hundred intervals it separates "about 5 %" from "broken" clearly.
    """
    from scipy.stats import binom  # noqa: PLC0415 - scipy is heavy; only needed at the end

    return int(binom.isf(alpha, intervals, NOMINAL_MISS_RATE))


def _read_truth(folder: Path) -> dict[str, Any]:
    total: dict[str, Any] = {"counts": {}, "devices": 0, "accepted": 0}
    total.update(duplicates=0, rejected=0, batches=0)
    for path in sorted(folder.glob("truth-*.json")):
        data = json.loads(path.read_text())
        for key in ("devices", "accepted", "duplicates", "rejected", "batches"):
            total[key] += int(data[key])
        for name, counts in data["counts"].items():
            mine = total["counts"].setdefault(name, [0] * len(counts))
            for i, c in enumerate(counts):
                mine[i] += int(c)
    return total


def _read_stats(prefix: str) -> dict[str, str]:
    """The ``Aggregated`` row of Locust's ``<prefix>_stats.csv`` (the batch endpoint)."""
    path = Path(prefix + "_stats.csv")
    if not path.exists():
        return {}
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row.get("Name") == "POST /v1/reports":
            return row
    return next((r for r in rows if r.get("Name") == "Aggregated"), {})


def _float(row: dict[str, str], key: str) -> float:
    try:
        return float(row.get(key) or 0)
    except ValueError:
        return 0.0


def _plural(n: int, noun: str) -> str:
    """``1 aggregator``, ``2 aggregators``."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def run(args: argparse.Namespace) -> LoadResult:
    """Start the server, run Locust, check; returns the figures and failed checks."""
    # server-side imports kept out of --help
    from ldp_server.demo import define_metrics  # noqa: PLC0415
    from ldp_server.serve import Server  # noqa: PLC0415
    from ldp_store.connection import connect  # noqa: PLC0415
    from ldp_store.embedded import free_port  # noqa: PLC0415
    from ldp_store.registry import Registry  # noqa: PLC0415

    out, truth_dir = _output_folders(args.out)
    per_user = math.ceil(args.devices / args.users)
    result = LoadResult(devices_target=per_user * args.users)
    print(f"output: {out}")
    print(
        f"target: {result.devices_target:,} devices = {args.users} users × "
        f"{math.ceil(per_user / args.devices_per_batch)} iterations × "
        f"≤ {args.devices_per_batch} devices per batch"
    )
    with tempfile.TemporaryDirectory(prefix="ldp-load-data-") as data_dir:
        server: Any = None
        if args.port is None:
            server = Server(
                port=free_port(),
                data_dir=data_dir,
                web_workers=args.web_workers,
                aggregators=args.aggregators,
                quiet=True,
            )
        with server or contextlib.nullcontext():
            url = server.url if server else f"http://{args.host}:{args.port}"
            redis_url = server.redis_url if server else args.redis_url
            assert redis_url is not None
            client = connect(redis_url)  # a server or a Redis Cluster
            definitions = define_metrics(Registry(client))
            where = (
                f"{_plural(args.web_workers, 'web worker')}, "
                f"{_plural(args.aggregators, 'aggregator')}"
                if server
                else "running"
            )
            print(f"server: {url} ({where}); metrics: "
                  + ", ".join(f"{d.name} ({d.oracle.name}, k={d.k})"
                              for d in definitions))  # fmt: skip
            _load(args, url, out, per_user, result)
            if server is not None and server.check() is not None:
                result.failed.append(f"server: {server.check()}")
            truth = _read_truth(truth_dir)
            _take_figures(result, truth, truth_dir, str(out / "locust"))
            checked = Checked(args, truth, client, definitions)
            _check_counts(checked, result)
            _check_intervals(checked, result)
    (out / "summary.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return result


def _output_folders(asked: str | None) -> tuple[Path, Path]:
    """The output folder (``asked``, or a fresh temporary one) and its ``truth/``, emptied
    of an earlier run's truth files."""
    out = Path(asked or tempfile.mkdtemp(prefix="ldp-load-")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    truth_dir = out / "truth"
    truth_dir.mkdir(exist_ok=True)
    for stale in [*truth_dir.glob("truth-*.json"), truth_dir / "stats.json"]:
        stale.unlink(missing_ok=True)
    return out, truth_dir


def _load(args: argparse.Namespace, url: str, out: Path, per_user: int, result: LoadResult) -> None:
    """Run Locust headless against ``url`` (its log in ``out/locust.log``); a non-zero
    exit (its own thresholds) is a failed check."""
    command = [
        sys.executable, "-m", "locust", "-f", str(HERE / "locustfile.py"),
        "--headless", "-u", str(args.users), "-r", str(args.spawn_rate or args.users),
        "-t", args.time, "--host", url, "--csv", str(out / "locust"),
        "--html", str(out / "locust.html"), "--only-summary", "--stop-timeout", "30",
    ]  # fmt: skip
    if args.processes != 1:
        command += ["--processes", str(args.processes)]
    env = dict(os.environ)
    env.update(
        LDP_DEVICES_PER_USER=str(per_user),
        LDP_DEVICES_PER_BATCH=str(args.devices_per_batch),
        LDP_DISTRIBUTION=args.distribution,
        LDP_TRUTH_DIR=str(out / "truth"),
        LDP_MAX_FAILURE_RATIO=str(args.max_failure_ratio),
        LDP_MAX_P95_MS=str(args.max_p95_ms),
    )
    print("load: " + " ".join(command[2:]))
    start = time.perf_counter()
    with (out / "locust.log").open("wb") as log:
        done = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    result.load_seconds = time.perf_counter() - start
    result.locust_exit_code = done.returncode
    if done.returncode != 0:
        result.failed.append(
            f"locust exited with {done.returncode} (thresholds: failure ratio "
            f"≤ {args.max_failure_ratio}, p95 ≤ {args.max_p95_ms:.0f} ms; see locust.log)"
        )


def _take_figures(
    result: LoadResult, truth: dict[str, Any], truth_dir: Path, csv_prefix: str
) -> None:
    """The devices' and the requests' figures: the locustfile's final ones, else Locust's
    CSV (which may lag by 1 s)."""
    result.devices = truth["devices"]
    result.accepted = truth["accepted"]
    result.duplicates = truth["duplicates"]
    result.rejected = truth["rejected"]
    exact = truth_dir / "stats.json"
    if exact.exists():
        final = json.loads(exact.read_text())
        result.requests, result.failures = final["requests"], final["failures"]
        result.p50_ms, result.p95_ms = final["p50_ms"], final["p95_ms"]
        result.p99_ms = final["p99_ms"]
    else:
        stats = _read_stats(csv_prefix)
        result.requests = int(_float(stats, "Request Count"))
        result.failures = int(_float(stats, "Failure Count"))
        result.p50_ms = _float(stats, "50%")
        result.p95_ms = _float(stats, "95%")
        result.p99_ms = _float(stats, "99%")
    result.requests_per_s = result.requests / max(result.load_seconds, 1e-9)
    result.reports_per_s = result.accepted / max(result.load_seconds, 1e-9)
    if result.devices < result.devices_target:
        print(f"note: --time ended the run at {result.devices:,} of "
              f"{result.devices_target:,} devices")  # fmt: skip


@dataclass(frozen=True)
class Checked:
    """What a run's checks read: the options, the truth the locustfile kept, the store."""

    args: argparse.Namespace
    truth: dict[str, Any]
    client: Any
    definitions: list[Any]


def _check_counts(run: Checked, result: LoadResult) -> None:
    """Every accepted report counted once: the truth against the collector, then the
    aggregator's n against the truth once it drained."""
    from aggregator.query.window import read_counts  # noqa: PLC0415
    from ldp_server.demo import wait_for_counts  # noqa: PLC0415

    expected = {name: sum(c) for name, c in run.truth["counts"].items()}
    if sum(expected.values()) != result.accepted + result.duplicates:
        result.failed.append(
            f"truth holds {sum(expected.values())} reports, the collector "
            f"accepted {result.accepted} (+{result.duplicates} duplicates)"
        )
    try:
        result.drain_seconds = wait_for_counts(
            run.client, run.definitions, expected, timeout=run.args.drain_timeout
        )
    except TimeoutError as exc:
        result.failed.append(f"aggregator did not drain: {exc}")
    time.sleep(1.0)  # anything counted late would show up as n > accepted
    result.counted = {d.name: read_counts(run.client, d).n for d in run.definitions}
    for name, n in expected.items():
        if result.counted.get(name) != n:
            result.failed.append(f"{name}: aggregator n = {result.counted.get(name)}, accepted {n}")


def _check_intervals(run: Checked, result: LoadResult) -> None:
    """The intervals against the true shares: more misses than a 5 % rate explains at
    ``--miss-alpha`` is a failed check."""
    from ldp_server.demo import estimates_for  # noqa: PLC0415

    estimates = estimates_for(run.client, run.definitions)
    for d in run.definitions:
        counts = run.truth["counts"].get(d.name)
        if not counts or sum(counts) == 0:
            continue
        est = estimates[d.name]
        for i, c in enumerate(counts):
            result.intervals += 1
            if not (float(est.ci_low[i]) <= c / sum(counts) <= float(est.ci_high[i])):
                result.misses += 1
    if not result.intervals:
        result.failed.append("no estimates to check: nothing was accepted")
        return
    result.miss_limit = miss_bound(result.intervals, run.args.miss_alpha)
    if result.misses > result.miss_limit:
        result.failed.append(
            f"{result.misses} of {result.intervals} intervals missed the truth "
            f"(> {result.miss_limit}: P < {run.args.miss_alpha} at a 5 % miss rate)"
        )


def _print(result: LoadResult) -> None:
    r = result
    rate = r.misses / r.intervals if r.intervals else float("nan")
    lines = [
        f"devices          {r.devices:,} of {r.devices_target:,}",
        f"requests         {r.requests:,} ({r.failures} failed), {r.requests_per_s:,.1f}/s",
        f"accepted reports {r.accepted:,} ({r.duplicates} duplicates, {r.rejected} rejected), "
        f"{r.reports_per_s:,.0f}/s over {r.load_seconds:.1f} s",
        f"latency          p50 {r.p50_ms:.0f} ms, p95 {r.p95_ms:.0f} ms, p99 {r.p99_ms:.0f} ms",
        f"aggregator n     {sum(r.counted.values()):,} "
        f"(drained {r.drain_seconds:.1f} s after the load)",
        f"interval misses  {r.misses} of {r.intervals} ({rate:.1%}; limit {r.miss_limit})",
    ]
    print("\n".join(lines))
    if r.failed:
        print("FAILED:\n  " + "\n  ".join(r.failed))
    else:
        print("PASSED")


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run, print the figures; 0 if every check passed."""
    parser = argparse.ArgumentParser(
        prog="python -m loadtests.run",
        description=__doc__.split("\n\n")[0] if __doc__ else "",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,  # "(default: …)" on each
    )
    parser.add_argument("--devices", type=int, default=1_000_000, help="distinct devices")
    parser.add_argument(
        "--users", "-u", type=int, default=DEFAULT_USERS, help="Locust users (concurrency)"
    )
    parser.add_argument(
        "--spawn-rate", "-r", type=float, default=0, help="users started per second (0: all)"
    )
    parser.add_argument("--time", "-t", default="30m", help="Locust's run-time limit")
    parser.add_argument(
        "--devices-per-batch",
        type=int,
        default=100,
        help="devices per request (each sends one report per metric)",
    )
    parser.add_argument("--processes", type=int, default=1, help="Locust processes (-1: CPUs)")
    parser.add_argument(
        "--distribution",
        default="zipf",
        choices=["zipf", "uniform", "demo"],
        help="the devices' true values",
    )
    parser.add_argument(
        "--web-workers",
        type=int,
        default=max(2, os.cpu_count() or 1),
        help="gunicorn workers of the web service (CPUs here, at least 2)",
    )
    parser.add_argument("--aggregators", type=int, default=1, help="aggregator worker processes")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="the running server's host (with --port; without it, a server is started)",
    )
    parser.add_argument("--port", type=int, default=None, help="load a running server on this port")
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("REDIS_URL"),
        help="the running server's Redis (for the metrics and the checks; default REDIS_URL)",
    )
    parser.add_argument(
        "--max-failure-ratio", type=float, default=0.0, help="fail above this failed-request share"
    )
    parser.add_argument(
        "--max-p95-ms", type=float, default=2000.0, help="fail above this p95 latency (ms)"
    )
    parser.add_argument(
        "--miss-alpha",
        type=float,
        default=DEFAULT_MISS_ALPHA,
        help="fail if the interval misses are less probable than this at a 5 %% miss rate",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=DRAIN_TIMEOUT,
        help="seconds to wait for the aggregator to count every accepted report",
    )
    parser.add_argument("--out", default=None, help="output dir; if not given, a new temp dir")
    args = parser.parse_args(argv)
    if args.devices < 1 or args.users < 1 or args.devices_per_batch < 1:
        parser.error("--devices, --users and --devices-per-batch must be positive")
    if args.port is not None and not args.redis_url:
        parser.error("--port needs --redis-url (or REDIS_URL): the checks read its counts")
    if args.port is None and args.host != "127.0.0.1":
        parser.error("--host needs --port: without them a local server is started")
    result = run(args)
    _print(result)
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
