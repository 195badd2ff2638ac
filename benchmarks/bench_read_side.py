"""The read side at scale (issue 43): reads that never wait on each other, answers sized to
be read, ten thousand metrics. Before/after in one run.

Run on purpose, not as a test, with a checkout of the old code as the yardstick::

    git worktree add --detach /tmp/old-scale main
    .venv/bin/python benchmarks/bench_read_side.py isolation --before /tmp/old-scale
    .venv/bin/python benchmarks/bench_read_side.py sizes --before /tmp/old-scale
    .venv/bin/python benchmarks/bench_read_side.py warming --before /tmp/old-scale
    .venv/bin/python benchmarks/bench_read_side.py restart --before /tmp/old-scale
    .venv/bin/python benchmarks/bench_read_side.py metrics --before /tmp/old-scale
    .venv/bin/python benchmarks/bench_read_side.py trends --before /tmp/old-scale

For each tree (``--before``'s, then this one), ``ldp serve`` runs from that tree on
loopback (embedded Redis, 2 web workers, 1 aggregator, no read token, per-source limits
off), the metrics are defined and their reports uploaded with the SDK's encoder over
HTTP, and the aggregator drains them. Then:

* ``isolation``: a small estimate (4 values) asked ``--probes`` times (for at most
  ``--probe-seconds``), one at a time,
  while 0, 1 and 4 clients pull the heaviest reads in a loop (a 256×256 2-way marginal of
  a 5×256 joint metric in full, a k = 65,536 estimate in full, a ``?by=`` of 64 groups
  at k = 1,000 in full): its p50/p99/max, and how the heavy reads were answered.
* ``sizes``: bytes and time of the default answer and the column form (``--full``: the
  explicit full table too) of a k = 65,536 estimate, a 256×256 joint marginal and a
  ``?by=`` of 64 groups at k = 1,000: the first read, then medians of ``--repeat``;
  then ``--batches`` times a batch of ``--batch`` reports to each, a wait until the
  server is quiet (the CPU its web processes used from the upload on: ingest, the
  overview's polls and any warm-up), and each answer's first read of the new counts.
* ``warming``: the small estimate probed (``--probes``, at most ``--probe-seconds``)
  while batches of ``--batch`` reports keep arriving for the three large metrics,
  whose default answers were read once: its p50/p99/max, the batches counted meanwhile
  and the web processes' CPU.
* ``restart``: the answers of ``sizes`` (default, and with ``--full`` the full table,
  which the heavy lane serves) read once, then every read worker stopped (SIGTERM;
  gunicorn starts new ones) and, once the server is quiet (what the new workers compute
  at start happens meanwhile: its CPU and seconds), each answer's first read in the new
  workers, and the next (the same counts: what a kept read costs). ``--strings N``: a
  string metric as well (max_length 64, ε = 4, N simulated reports over 10⁵ words of
  Zipf 1.1, its counts written into Redis as the worker leaves them) and its default
  read (window all: one discovery).
* ``metrics``: ``--metrics`` metrics (default 10,000) defined: ``/v1/overview`` (its
  first page, a page of one, a search), ``/metrics`` (the Prometheus scrape: the first,
  which weighs Redis memory, then the median of the next ``--repeat``) and the
  dashboard's page, medians of ``--repeat``, each with the CPU time the server's web
  processes and Redis spent on it (wall time alone says little on a loaded machine); the
  CPU the idle aggregator (and Redis) use over ``--idle`` seconds, the Redis commands
  per second meanwhile (INFO commandstats), then the keys they name per second
  (``MONITOR``, 10 s).
* ``trends``: a k = 16 and a k = 1,024 metric with 90 days of hourly and 2 years of
  daily windows (their counts written into Redis as the worker leaves them, packed;
  the server keeps hours 90 days, days 2 years): each trend's bytes and time (the
  default answer, the compact form with the confidence sequence, the full rows
  (``format=json``, the old default), the column form, ``?values=`` of two), medians of
  ``--repeat``; and a numeric metric's trend (pm) over the same windows, once.

The machine is shared: the load average is printed at each step, and each answer's
server CPU time (the web processes' CPU from ``/proc``, 10 ms ticks), since wall time
under load cannot show what a request costs; ``first_*`` is the run's first read of an
answer (nothing kept yet).
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tree_server import load, serve_tree  # noqa: E402  (beside this script)

from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from tests import http_helpers  # noqa: E402

TOKEN = "bench-read-side-admin-token"
SMALL = ("bench.small", {"domain": ["a", "b", "c", "d"], "epsilon": 1.0})
BIG = ("bench.big", {"domain": [f"v{i:05d}" for i in range(65_536)], "epsilon": 2.0})
JOINT = (
    "bench.joint",
    {
        "kind": "joint",
        "attributes": [
            {"name": f"a{j}", "domain": [f"x{i}" for i in range(256)]} for j in range(5)
        ],
        "epsilon": 4.0,
    },
)
GROUPS = (
    "bench.groups",
    {
        "domain": [f"v{i:04d}" for i in range(1000)],
        "epsilon": 2.0,
        "dimensions": [{"name": "region", "values": [f"r{i:02d}" for i in range(64)]}],
    },
)
HEAVY_FULL = (
    "/v1/estimates/bench.joint?marginal=a0,a1&values=all",
    "/v1/estimates/bench.big?values=all",
    "/v1/estimates/bench.groups?by=region&values=all",
)
"""The heaviest reads, asking for the full table (the old code ignores ``values``)."""


def call(url: str, method: str = "GET", body: Any = None, token: str = "") -> Any:
    return http_helpers.call(url, method, body, token, timeout=300)


def fetch(url: str, path: str) -> tuple[int, int, float]:
    """(status, bytes, seconds) of one GET on a fresh connection."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    started = time.perf_counter()
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        size = len(reply.read())
        return reply.status, size, time.perf_counter() - started
    except (OSError, http.client.HTTPException):
        return 0, 0, time.perf_counter() - started
    finally:
        conn.close()


WEB_PIDS: list[int] = []
"""The served tree's web processes (the ingest workers that forward and the read service's
workers: every process of ``ldp serve`` but the aggregators and Redis), for the server
CPU time a request costs (the machine is loaded: wall time alone cannot show it)."""


def web_pids(root: int) -> list[int]:
    """``root``'s descendants that serve HTTP (not an aggregator, not redis-server)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rpartition(")")[2].split()
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if " aggregate " not in line and "redis-server" not in line:
            children.setdefault(int(stat[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def web_cpu() -> float:
    """CPU seconds the web processes have used (user + system), those alive."""
    total = 0.0
    for pid in WEB_PIDS:
        try:
            total += cpu_seconds(pid)
        except (OSError, IndexError):
            continue
    return total


def timed(url: str, path: str, repeat: int) -> dict[str, Any]:
    """Status, bytes, median wall ms and median server CPU ms of ``repeat`` GETs."""
    runs, cpus = [], []
    for _ in range(repeat):
        before = web_cpu()
        runs.append(fetch(url, path))
        cpus.append(web_cpu() - before)
    return {
        "status": runs[0][0],
        "bytes": runs[0][1],
        "median_ms": 1000 * statistics.median(r[2] for r in runs),
        "server_cpu_ms": 1000 * statistics.median(cpus),
        "first_ms": 1000 * runs[0][2],  # the first read of these counts: nothing kept yet
        "first_server_cpu_ms": 1000 * cpus[0],
        "load": load(),
    }


EXTRA_ENV: dict[str, str] = {}
"""More environment for ``ldp serve`` (the trends' retention)."""


def serve(tree: Path, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    settings = dict(
        EXTRA_ENV,
        LDP_ADMIN_TOKEN=TOKEN,
        LDP_SOURCE_REQUESTS_PER_SECOND="0",
        LDP_SOURCE_REPORTS_PER_MINUTE="0",
        LDP_ACCESS_LOG="off",
    )
    return serve_tree(tree, data, settings, seconds=120)


def define(url: str, name: str, spec: dict[str, Any]) -> MetricDefinition:
    call(f"{url}/v1/metrics/{name}", "PUT", spec, TOKEN)
    return MetricDefinition.from_dict(call(f"{url}/v1/metrics/{name}"))


def upload(url: str, reports: list[dict[str, Any]]) -> None:
    for i in range(0, len(reports), 500):
        for attempt in range(30):  # 503 + Retry-After under load: as the SDK, retry
            try:
                call(f"{url}/v1/reports", "POST", {"reports": reports[i : i + 500]})
                break
            except urllib.error.HTTPError as exc:
                if exc.code != 503 or attempt == 29:
                    raise
                time.sleep(float(exc.headers.get("Retry-After") or 1))


def populate(url: str, n: int) -> list[MetricDefinition]:
    """The four metrics of ``isolation`` and ``sizes``, ``n`` reports each, drained."""
    defs = [define(url, *spec) for spec in (SMALL, BIG, JOINT, GROUPS)]
    send(url, defs, n, random.Random(43))
    return defs


def send(url: str, defs: list[MetricDefinition], n: int, rng: random.Random) -> None:
    """``n`` reports to each of ``defs`` (those of :func:`populate`, the small one left out
    when absent), uploaded and drained."""
    by_name = {d.name: d for d in defs}
    zipf = [1 / (i + 1) for i in range(256)]
    reports = []
    if SMALL[0] in by_name:
        reports += [build_report(by_name[SMALL[0]], rng.choice("abcd")) for _ in range(n)]
    reports += [build_report(by_name[BIG[0]], rng.randrange(65_536)) for _ in range(n)]
    for _ in range(n):
        row = [rng.choices(range(256), zipf)[0] for _ in range(5)]
        reports.append(build_report(by_name[JOINT[0]], row))
    for _ in range(n):
        region = {"region": f"r{rng.randrange(64):02d}"}
        reports.append(build_report(by_name[GROUPS[0]], rng.randrange(1000), dimensions=region))
    before = counted(url)
    upload(url, reports)
    deadline = time.monotonic() + 900
    while True:
        now = counted(url)
        if now and all(now.get(d, 0) >= before.get(d, 0) + n for d in by_name):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the reports were not drained")
        time.sleep(2.0)


def counted(url: str) -> dict[str, int]:
    """Reports counted per metric (empty while the read service is busy: a 503)."""
    try:
        return {row["name"]: row["n"] for row in call(f"{url}/v1/overview")["metrics"]}
    except OSError:
        return {}


def quiet(seconds: float, most: float) -> float:
    """Wait until the web processes have used less than 20 ms of CPU in a second, twice
    in a row, for at least ``seconds`` and at most ``most``: what a warm-up costs happens
    meanwhile. Returns the CPU seconds they used."""
    started, first = time.monotonic(), web_cpu()
    calm, last = 0, first
    while time.monotonic() - started < most:
        time.sleep(1.0)
        cpu = web_cpu()
        calm = calm + 1 if cpu - last < 0.02 else 0
        last = cpu
        if calm >= 2 and time.monotonic() - started >= seconds:
            break
    return last - first


SERVERS: list[subprocess.Popen[bytes]] = []
"""The ``ldp serve`` running now (its process tree's CPU is measured per request)."""


def run_tree(tree: Path, work: Callable[[str, Path], dict[str, Any]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-read-side-") as tmp:
        process, url = serve(tree, Path(tmp) / "data")
        read_ready(url)
        WEB_PIDS[:] = web_pids(process.pid)
        SERVERS.append(process)
        try:
            return work(url, Path(tmp) / "data")
        finally:
            process.terminate()
            process.wait(60)


def read_ready(url: str, seconds: float = 120.0) -> None:
    """Wait until the read service answers (``/readyz`` is the ingest side's): under load
    its workers may start later, and a 503 meanwhile is no figure; their processes are
    counted once they serve."""
    deadline = time.monotonic() + seconds
    while fetch(url, "/v1/overview?limit=1")[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.5)


def percentiles(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {
        "p50_ms": 1000 * statistics.median(times),
        "p99_ms": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))],
        "max_ms": 1000 * times[-1],
    }


def heavy_reader(url: str, stop: threading.Event, got: dict[int, int], i: int) -> None:
    turn = i
    while not stop.is_set():
        status, _, _ = fetch(url, HEAVY_FULL[turn % len(HEAVY_FULL)])
        turn += 1
        got[status] = got.get(status, 0) + 1
        if status in (0, 503):
            time.sleep(0.5)  # as a client told Retry-After would, roughly


def isolation(args: argparse.Namespace, url: str, data: Path) -> dict[str, Any]:
    populate(url, args.reports)
    out: dict[str, Any] = {}
    for heavy in (0, 1, 4):
        stop = threading.Event()
        got: dict[int, int] = {}
        threads = [
            threading.Thread(target=heavy_reader, args=(url, stop, got, i), daemon=True)
            for i in range(heavy)
        ]
        for t in threads:
            t.start()
        time.sleep(2.0 if heavy else 0.0)  # the heavy reads under way
        times: list[float] = []
        cpus: list[float] = []
        last = web_cpu()
        statuses: dict[int, int] = {}
        until = time.monotonic() + args.probe_seconds
        for _ in range(args.probes):
            if time.monotonic() > until:
                break  # the old code under heavy reads: a probe can take 40 s
            status, _, took = fetch(url, f"/v1/estimates/{SMALL[0]}")
            statuses[status] = statuses.get(status, 0) + 1
            times.append(took)
            if not heavy:  # alone, the web processes' CPU is the probe's
                cpu = web_cpu()
                cpus.append(cpu - last)
                last = cpu
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(300)
        out[f"heavy={heavy}"] = {
            **percentiles(times),
            "probes": len(times),
            "server_cpu_ms_p50": 1000 * statistics.median(cpus) if cpus else None,
            "probe_status": statuses,
            "heavy_status": got,
            "load": load(),
        }
        print(f"  heavy readers {heavy}: {out[f'heavy={heavy}']}", flush=True)
    return out


SIZE_CASES = (
    ("k=65,536", f"/v1/estimates/{BIG[0]}"),
    ("joint 256x256", f"/v1/estimates/{JOINT[0]}?marginal=a0,a1"),
    ("by= 64 groups, k=1,000", f"/v1/estimates/{GROUPS[0]}?by=region"),
)
SIZE_VARIANTS = (
    ("default", ""),
    ("values=all", "values=all"),
    ("format=columns", "format=columns"),
)


def sizes(args: argparse.Namespace, url: str, data: Path) -> dict[str, Any]:
    """Each answer read ``--repeat`` times (its first read: nothing kept yet), then, after
    a batch of ``--batch`` reports to each metric and a quiet server (a warm-up done), its
    first read of the new counts."""
    defs = populate(url, args.reports)
    variants = [v for v in SIZE_VARIANTS if args.full or v[1] != "values=all"]
    paths = {}
    out: dict[str, Any] = {}
    for label, path in SIZE_CASES:
        for variant, query in variants:
            full = path + (("&" if "?" in path else "?") + query if query else "")
            paths[f"{label} {variant}"] = full
            row = timed(url, full, args.repeat)
            out[f"{label} {variant}"] = row
            print(f"  {label} {variant}: {row}", flush=True)
    for step in range(args.batches):
        started = web_cpu()
        send(url, defs[1:], args.batch, random.Random(44 + step))
        quiet(5.0, 120.0)
        warm_cpu = web_cpu() - started  # ingest, the overview's polls and any warm-up
        print(f"  batch {step + 1} counted, server quiet: {warm_cpu:.2f} s CPU", flush=True)
        for name, full in paths.items():
            before = web_cpu()
            status, size, seconds = fetch(url, full)
            row = {
                "status": status,
                "bytes": size,
                "after_batch_ms": 1000 * seconds,
                "after_batch_server_cpu_ms": 1000 * (web_cpu() - before),
                "warm_up_cpu_s": warm_cpu,
                "load": load(),
            }
            out[f"{name} after batch {step + 1}"] = row
            print(f"  {name} after batch {step + 1}: {row}", flush=True)
    return out


def warming(args: argparse.Namespace, url: str, data: Path) -> dict[str, Any]:
    """The small estimate probed one at a time while batches of ``--batch`` reports
    keep arriving for the three large metrics, whose default answers were read once
    (kept warm, where the code keeps reads warm, by the read process that serves the
    probes): what the warm-ups cost a cheap read."""
    defs = populate(url, args.reports)
    for _, path in SIZE_CASES:
        fetch(url, path)
    stop = threading.Event()
    batches = [0]

    def feed() -> None:
        while not stop.is_set():
            send(url, defs[1:], args.batch, random.Random(100 + batches[0]))
            batches[0] += 1
            stop.wait(1.0)

    feeder = threading.Thread(target=feed, daemon=True)
    started = web_cpu()
    feeder.start()
    times: list[float] = []
    statuses: dict[int, int] = {}
    until = time.monotonic() + args.probe_seconds
    while len(times) < args.probes and time.monotonic() < until:
        status, _, took = fetch(url, f"/v1/estimates/{SMALL[0]}")
        statuses[status] = statuses.get(status, 0) + 1
        times.append(took)
        time.sleep(0.05)
    stop.set()
    feeder.join(300)
    out = {
        **percentiles(times),
        "probes": len(times),
        "probe_status": statuses,
        "batches": batches[0],
        "server_cpu_s": web_cpu() - started,
        "load": load(),
    }
    print(f"  probes while batches arrive: {out}", flush=True)
    return out


def read_workers() -> list[int]:
    """The read service's gunicorn workers (forks of its master, which serves
    ``create_server_app``) among the served tree's processes."""
    found = []
    for pid in web_pids(SERVERS[-1].pid):
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            parent = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
            above = Path(f"/proc/{parent}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if "create_server_app" in line and "create_server_app" in above:
            found.append(pid)
    return found


WORDS = ("bench.words", {"kind": "string", "max_length": 64, "epsilon": 4.0})


def write_words(url: str, data: Path, users: int) -> str:
    """The string metric of ``restart --strings``: ``users`` simulated reports' counts in
    its window all (as the worker leaves them). Returns its read's path."""
    import numpy as np  # noqa: PLC0415

    from aggregator.analysis.string_simulation import simulate_counts  # noqa: PLC0415
    from aggregator.analysis.vocabulary import synthetic_vocabulary, zipf_shares  # noqa: PLC0415
    from ldp_store import keys, schema  # noqa: PLC0415
    from ldp_store.connection import connect  # noqa: PLC0415
    from ldp_store.embedded import REDIS_URL_FILE  # noqa: PLC0415

    d = define(url, *WORDS)
    sketch = d.sketch
    vocab = synthetic_vocabulary(100_000, sketch.max_length, seed=1)
    gen = np.random.default_rng(64)
    counts, _ = simulate_counts(sketch, vocab, zipf_shares(100_000, 1.1), users, gen)
    client = connect((data / REDIS_URL_FILE).read_text().strip())
    client.hset(keys.counts_key(d.name, d.version, "all"), mapping={"n": counts.n})
    support = counts.support.astype(schema.SUPPORT_DTYPE).tobytes()
    client.set(keys.support_key(d.name, d.version, "all"), support)
    return f"/v1/estimates/{d.name}"


def restart(args: argparse.Namespace, url: str, data: Path) -> dict[str, Any]:
    """Each answer read once, every read worker restarted, then (the server quiet) each
    answer's first read in the new workers."""
    populate(url, args.reports)
    variants = [v for v in SIZE_VARIANTS if v[1] != "format=columns"]
    variants = [v for v in variants if args.full or v[1] != "values=all"]
    paths = {}
    if args.strings:
        paths["words (max_length 64)"] = write_words(url, data, args.strings)
        fetch(url, paths["words (max_length 64)"])
    for label, path in SIZE_CASES:
        for variant, query in variants:
            full = path + (("&" if "?" in path else "?") + query if query else "")
            paths[f"{label} {variant}"] = full
            fetch(url, full)
    time.sleep(2.0)
    old = read_workers()
    for pid in old:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        new = read_workers()
        if len(new) >= len(old) and not set(new) & set(old):
            break
        time.sleep(0.2)
    else:
        raise RuntimeError("the read workers were not restarted")
    restarted = time.monotonic()
    WEB_PIDS[:] = web_pids(SERVERS[-1].pid)
    start_cpu = quiet(5.0, 300.0)
    out: dict[str, Any] = {
        "restart": {
            "workers": len(new),
            "start_cpu_s": start_cpu,
            "quiet_after_s": time.monotonic() - restarted,
            "load": load(),
        }
    }
    print(f"  read workers restarted: {out['restart']}", flush=True)
    for name, full in paths.items():
        before = web_cpu()
        status, size, seconds = fetch(url, full)
        middle = web_cpu()
        _, _, again = fetch(url, full)  # the same counts again: what a kept read costs
        row = {
            "status": status,
            "bytes": size,
            "first_ms": 1000 * seconds,
            "first_server_cpu_ms": 1000 * (middle - before),
            "next_ms": 1000 * again,
            "next_server_cpu_ms": 1000 * (web_cpu() - middle),
            "load": load(),
        }
        out[f"{name} first read after restart"] = row
        print(f"  {name} first read after restart: {row}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "what", choices=("isolation", "sizes", "warming", "restart", "metrics", "trends")
    )
    parser.add_argument("--before", type=Path, help="a checkout of the old code")
    parser.add_argument("--after", type=Path, default=ROOT, help="the new code (this tree)")
    parser.add_argument("--reports", type=int, default=5000)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--probe-seconds", type=float, default=120.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--metrics", type=int, default=10_000)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--full", action="store_true", help="sizes: ?values=all as well")
    parser.add_argument("--strings", type=int, default=0, help="restart: a string metric's n")
    parser.add_argument("--batch", type=int, default=100, help="sizes: reports a batch")
    parser.add_argument("--batches", type=int, default=2, help="sizes: batches after")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the servers on the way out
    trees = ([("before", args.before)] if args.before else []) + [("after", args.after)]
    work = {
        "isolation": isolation,
        "sizes": sizes,
        "warming": warming,
        "restart": restart,
        "metrics": metrics,
        "trends": trends,
    }[args.what]
    if args.what == "trends":
        EXTRA_ENV.update(
            LDP_RETENTION_HOUR_SECONDS=str(HOURS * 3600 + 7200),
            LDP_RETENTION_DAY_SECONDS=str(DAYS * 86_400 + 172_800),
        )
    results = {}
    for label, tree in trees:
        print(f"{label} ({tree}), load {load()}", flush=True)
        args.old = label == "before"
        results[label] = run_tree(tree, functools.partial(work, args))
    print(json.dumps(results, indent=1))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(root: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of ``ldp serve``'s processes: its web processes
    (gunicorn's and the read service's) and Redis; the aggregators are left out (their
    idle work is measured on its own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found = {"web": 0.0, "redis": 0.0}
    todo = [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            seconds = cpu_seconds(pid)
        except (OSError, ValueError, IndexError):
            continue
        if " aggregate " in line:
            continue
        found["redis" if "redis-server" in line else "web"] += seconds
    return found


def aggregators(data: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if " aggregate " in line and str(data) in line:
            found.append(int(entry.name))
    return found


def metrics(args: argparse.Namespace, url: str, data: Path) -> dict[str, Any]:
    from ldp_store.connection import connect  # noqa: PLC0415
    from ldp_store.embedded import REDIS_URL_FILE  # noqa: PLC0415
    from ldp_store.registry import Registry  # noqa: PLC0415

    client = connect((data / REDIS_URL_FILE).read_text().strip())
    registry = Registry(client)
    started = time.monotonic()
    for i in range(args.metrics):
        spec = {"domain": ["a", "b", "c", "d"], "epsilon": 1.0, "description": f"metric {i}"}
        registry.put(f"bench.m{i:05d}", spec)
    print(f"  {args.metrics} metrics defined in {time.monotonic() - started:.0f} s", flush=True)
    time.sleep(10.0)  # the aggregator finds the new streams
    out: dict[str, Any] = {}
    before_cpu = server_cpu(SERVERS[-1].pid)
    status, size, first = fetch(url, "/metrics")
    after_cpu = server_cpu(SERVERS[-1].pid)
    out["first scrape /metrics"] = {
        "status": status,
        "bytes": size,
        "ms": 1000 * first,
        "server_cpu_ms": 1000 * (after_cpu["web"] - before_cpu["web"]),
        "redis_cpu_ms": 1000 * (after_cpu["redis"] - before_cpu["redis"]),
        "load": load(),
    }
    print(f"  first scrape: {out['first scrape /metrics']}", flush=True)
    cases = [
        ("overview", "/v1/overview"),
        ("overview ?limit=1", "/v1/overview?limit=1"),
        ("overview ?q=m0999", "/v1/overview?q=m0999"),
        ("scrape /metrics", "/metrics"),
        ("dashboard /", "/"),
    ]
    root = SERVERS[-1].pid
    for label, path in cases:
        runs, web_cpu, redis_cpu = [], [], []
        for _ in range(args.repeat):
            before_cpu = server_cpu(root)
            runs.append(fetch(url, path))
            after_cpu = server_cpu(root)
            web_cpu.append(after_cpu["web"] - before_cpu["web"])
            redis_cpu.append(after_cpu["redis"] - before_cpu["redis"])
        out[label] = {
            "status": runs[0][0],
            "bytes": runs[0][1],
            "median_ms": 1000 * statistics.median(r[2] for r in runs),
            "server_cpu_ms": 1000 * statistics.median(web_cpu),
            "redis_cpu_ms": 1000 * statistics.median(redis_cpu),
            "load": load(),
        }
        print(f"  {label}: {out[label]}", flush=True)
    pids = aggregators(data)
    before = sum(cpu_seconds(p) for p in pids)
    redis_before = server_cpu(SERVERS[-1].pid)["redis"]
    calls = redis_calls_by(client)
    time.sleep(args.idle)
    used = sum(cpu_seconds(p) for p in pids) - before
    spent = {c: n - calls.get(c, 0) for c, n in redis_calls_by(client).items()}
    spent["info"] -= 2  # the two INFO of this measurement
    commands = sum(spent.values())
    redis_used = server_cpu(SERVERS[-1].pid)["redis"] - redis_before
    out["idle aggregator"] = {
        "cpu_share_of_a_core": used / args.idle,
        "redis_cpu_share_of_a_core": redis_used / args.idle,
        "redis_commands_per_second": commands / args.idle,
        "most_sent": sorted(spent.items(), key=lambda item: -item[1])[:4],
        "workers": len(pids),
        "load": load(),
    }
    out["idle aggregator"]["keys_named_per_second"] = keys_named(client, min(10.0, args.idle))
    print(f"  idle aggregator: {out['idle aggregator']}", flush=True)
    return out


def keys_named(client: Any, seconds: float) -> float:
    """Keys (``ldp:`` arguments) the commands sent to Redis named per second, every client
    (``MONITOR`` for ``seconds``, after the CPU figures: it costs Redis some)."""
    named = 0
    deadline = time.monotonic() + seconds
    with client.monitor() as monitor:
        while time.monotonic() < deadline:
            command = monitor.next_command()["command"]
            named += sum(word.startswith("ldp:") for word in command.split())
    return named / seconds


def redis_calls_by(client: Any) -> dict[str, int]:
    """Commands Redis has served, every client, by command (INFO commandstats)."""
    stats = client.info("commandstats").items()
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats}


HOURS, DAYS = 90 * 24, 2 * 365
"""The trends' windows: 90 days of hours, 2 years of days (issue 43)."""


def write_windows(client: Any, d: MetricDefinition, rng: random.Random) -> None:
    """HOURS hourly and DAYS daily windows of counts, the newest ending now, as the worker
    leaves them (n in the counts hash, the support counts packed)."""
    import numpy as np  # noqa: PLC0415

    from ldp_store import keys, schema  # noqa: PLC0415

    now = int(time.time())
    shares = np.array([1 / (i + 1) for i in range(d.k if d.kind == "categorical" else 0)])
    gen = np.random.default_rng(rng.randrange(2**32))
    spans = [("hour", 3600, HOURS), ("day", 86_400, DAYS)]
    for kind, size, count in spans:
        with client.pipeline(transaction=False) as pipe:
            for i in range(count):
                start = (now // size - count + 1 + i) * size
                stamp = time.strftime(
                    "%Y-%m-%dT%H" if kind == "hour" else "%Y-%m-%d", time.gmtime(start)
                )
                window = f"{kind}:{stamp}"
                n = int(gen.integers(500, 5000))
                counts = keys.counts_key(d.name, d.version, window)
                if d.kind == "numeric":  # reports spread over [−C, C] (in units), mean C/4
                    units = float(d.mechanism.bound_units)
                    ys = gen.uniform(-0.5 * units, units, n)
                    fields = schema.numeric_increments(n, int(ys.sum()), int((ys * ys).sum()))
                    pipe.hset(counts, mapping=dict(zip(fields[::2], fields[1::2], strict=True)))
                else:
                    support = gen.binomial(n, np.minimum(0.9, 0.1 + shares)).astype(
                        schema.SUPPORT_DTYPE
                    )
                    pipe.hset(counts, mapping={"n": n})
                    pipe.set(keys.support_key(d.name, d.version, window), support.tobytes())
                pipe.zadd(keys.windows_key(d.name, d.version), {window: start * 1000})
            pipe.execute()


TREND_CASES = (
    ("hour", "?granularity=hour", True),
    (
        "hour fields=frequency,cs_low,cs_high",
        "?granularity=hour&fields=frequency,cs_low,cs_high",
        False,
    ),
    ("hour format=json", "?granularity=hour&format=json", False),
    ("hour columns", "?granularity=hour&format=columns", True),
    ("hour values=2", "?granularity=hour&values=v0000,v0001", True),
    ("day", "?granularity=day", True),
    ("day format=json", "?granularity=day&format=json", False),
    ("day columns", "?granularity=day&format=columns", True),
)
"""The trends asked (label, query, asked of the old code too): each tree's default, the
dashboard's compact form with the confidence sequence, the full rows and columns, two
values."""


def trends(args: argparse.Namespace, url: str, data: Path) -> dict[str, Any]:
    from ldp_store.connection import connect  # noqa: PLC0415
    from ldp_store.embedded import REDIS_URL_FILE  # noqa: PLC0415

    client = connect((data / REDIS_URL_FILE).read_text().strip())
    rng = random.Random(43)
    out: dict[str, Any] = {}
    for k in (16, 1024):
        spec = {"domain": [f"v{i:04d}" for i in range(k)], "epsilon": 2.0, "mechanism": "oue"}
        d = define(url, f"bench.trend{k}", spec)
        write_windows(client, d, rng)
        base = f"/v1/estimates/bench.trend{k}/trend"
        for label, query, old in TREND_CASES:
            if args.old and not old:
                continue  # the old code has no compact form (its default is format=json)
            row = timed(url, base + query, args.repeat)
            windows = None
            if row["status"] == 200:
                body = json.loads(urllib.request.urlopen(url + base + query, timeout=600).read())
                table = body.get("compact") or body.get("columns") or {}
                windows = len(body["windows"]) or len(table.get("window", []))
            out[f"k={k} {label}"] = {**row, "windows": windows, "kB": row.pop("bytes") / 1000}
            print(f"  k={k} {label}: {out[f'k={k} {label}']}", flush=True)
    spec = {"kind": "numeric", "range": [0, 120], "epsilon": 1.0, "mechanism": "pm"}
    d = define(url, "bench.trend_mean", spec)
    write_windows(client, d, rng)
    for granularity in ("hour", "day"):
        row = timed(url, f"/v1/estimates/bench.trend_mean/trend?granularity={granularity}", 1)
        out[f"mean {granularity}"] = {**row, "kB": row.pop("bytes") / 1000}
        print(f"  mean {granularity}: {out[f'mean {granularity}']}", flush=True)
    return out


if __name__ == "__main__":
    main()
