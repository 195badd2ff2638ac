"""Collector throughput under gunicorn, beside the machine's own limits measured in the same run.

    python benchmarks/bench_collector.py --phase-seconds 8 --batch 500 --clients 4
    python benchmarks/bench_collector.py --mechanism oue -k 64 --web-workers 2 --rounds 3
    python benchmarks/bench_collector.py --targets collector --worker-classes sync,gevent
    python benchmarks/bench_collector.py --targets collector --appendfsync everysec,always
    python benchmarks/bench_collector.py --targets collector --admission off,on
    python benchmarks/bench_collector.py --before ../main-worktree --mechanism string -k 100

One run measures three targets with the same load generator (``--clients`` processes
sending ``--batch``-report requests) against the same embedded redis-server (AOF on, as
``ldp serve`` runs it):

* **collector** — the web service exactly as ``ldp serve`` starts it (gunicorn with
  ``collector/gunicorn_conf.py``, ``ldp_server.app:create_server_app()``): strict JSON,
  validation with the SDK's wire code, the replay guard and backlog check in one Lua script;
* **bare** — ``benchmarks/bare_flask_app.py`` under the same gunicorn settings (same
  config file, worker count and class, bind style, access log): parse the JSON body,
  ``XADD`` every payload to one stream in ONE script call, nothing else: the collector's
  job with no safeguard and the least Python, a ceiling for it;
* **raw** — no HTTP at all: the same number of client processes send the same payloads
  (compact JSON, as the collector stores them) with the same one-call script, one call
  of ``--batch`` payloads per round trip, straight to Redis.

The reports are built once with the real SDK (``client_sdk.wire.build_report``, fresh ids
for every round: the collector's replay guard would otherwise turn a second round into
duplicates). Each target's phase lasts about ``--phase-seconds`` (8 s: its report count
is set from an untimed probe of its speed; ``--reports N`` fixes one count for all). The
targets take turns, ``--rounds`` times; streams and replay sets are deleted and Redis's
background saves finish before each phase. For each phase it prints
accepted reports/s (all reports over the time from the clients' common start to the last
reply), p50/p99 of the request (or pipeline) latency and the CPU µs per report of the
clients, the gunicorn workers and redis-server (from ``/proc``), then collector ÷ bare and
collector ÷ raw per round and their medians and spread (max − min over the median), by
throughput and by total CPU per report; the load average at the start and the end.
The clients run on the same cores as the servers: compare the ratios, not the absolute
figures, across runs.

No aggregator runs by default (``--aggregators``): it would compete for the CPUs during
the collector's phase only.

Before/after in one run: ``--worker-classes sync,gevent`` starts one collector per gunicorn
worker class (``LDP_WORKER_CLASS``; bare keeps the config's default) and they take turns
like the other targets; ``--appendfsync everysec,always`` runs every target under each
AOF fsync policy, switched with ``CONFIG SET appendfsync`` on the one redis-server before
its phase. Each later variant is then divided by the first of its kind ("after/before").

Other code in one run: ``--before TREE`` starts one more collector, "collector[before]",
whose web workers import the collector from another checkout (``git worktree add
--detach ../before main``; ``PYTHONPATH``, with the cwd outside both trees); it takes
turns with the others and is divided into the later ones (after/before). ``--mechanism
string`` benchmarks a string metric (``-k`` distinct words, ``--max-length`` bytes).

Admission limits (``ldp_edge/admission.py``): the load comes from one address, the flood
they exist to stop, so by default the collectors run with them off (``--admission off``).
``--admission off,on`` starts one collector each, "on" with every check made (source
hash, both buckets) and limits too high to refuse anything: the cost of the limiter.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from bare_flask_app import APPEND  # noqa: E402  (beside this script)
from bare_flask_app import STREAM as BARE_STREAM  # noqa: E402

from client_sdk.transport import HTTPTransport  # noqa: E402
from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from ldp_server.serve import Server  # noqa: E402
from ldp_store.embedded import EmbeddedRedis, die_with_parent, free_port  # noqa: E402
from ldp_store.registry import Registry  # noqa: E402

METRIC = "bench.metric"
RAW_STREAM = "bench:raw:reports"
BARE_APP = "bare_flask_app:create_app()"
CONF = ROOT / "collector" / "gunicorn_conf.py"
READY_TIMEOUT = 30.0
"""Seconds for a gunicorn to answer /readyz (the collector imports numpy and scipy)."""

CLIENT_TIMEOUT = 600.0
"""Seconds the parent waits for one client's result: a bound, so a stuck phase ends."""

_TICKS = os.sysconf("SC_CLK_TCK")

WARMUP_BATCHES = 2
"""Requests per client before the first timed phase of each target (imports, pools)."""

PHASE_SECONDS = 8.0
"""Default length of a phase. Phases of 1–3 s (a fixed 200,000 reports) swung the
collector/bare ratio from 0.50 to 1.39 between rounds on the shared 2-core machine: a
burst of other load fills a short phase. Each target gets the report count that lasts
this long at its own speed (reports/s and CPU µs/report do not depend on the count)."""

CALIBRATION_BATCHES = 8
"""Requests per client of the untimed phase that measures a target's speed."""

MAX_PHASE_REPORTS = 3_000_000
"""Most reports in one phase (raw Redis is fastest): bounds the memory of the bodies."""


@dataclass(frozen=True)
class Phase:
    """One target's figures in one round."""

    target: str
    accepted: int
    seconds: float
    latencies: list[float]
    cpu: dict[str, float]
    """CPU seconds of the phase: "clients", "web" (gunicorn workers), "redis"."""

    @property
    def rate(self) -> float:
        """Accepted reports per second."""
        return self.accepted / self.seconds

    def pct(self, q: int) -> float:
        """The q-th percentile of the latencies, in ms."""
        return statistics.quantiles(self.latencies, n=100)[q - 1] * 1000

    def cpu_us(self, part: str) -> float:
        """CPU µs per accepted report spent in ``part``, or in all of them ("total")."""
        spent = sum(self.cpu.values()) if part == "total" else self.cpu[part]
        return spent / self.accepted * 1e6


# -- the load generator: one process per client, a common start ----------------------------


def _http_client(url: str, bodies: list[bytes]) -> tuple[int, list[float]]:
    transport = HTTPTransport(url, timeout=30)
    accepted, latencies = 0, []
    for body in bodies:
        start = time.perf_counter()
        response = transport.post("/v1/reports", body)
        latencies.append(time.perf_counter() - start)
        if response.status != 202:
            raise RuntimeError(f"unexpected {response.status}: {response.body[:200]!r}")
        accepted += response.json()["accepted"]
    transport.close()
    return accepted, latencies


def _raw_client(url: str, batches: list[list[bytes]]) -> tuple[int, list[float]]:
    client = redis.Redis.from_url(url)
    append = client.register_script(APPEND)
    client.ping()  # connect before the clock starts, as the HTTP clients' first request does
    accepted, latencies = 0, []
    for batch in batches:
        start = time.perf_counter()
        accepted += int(append(keys=[RAW_STREAM], args=batch))  # one command per batch
        latencies.append(time.perf_counter() - start)
    client.close()
    return accepted, latencies


def _client(
    work: Callable[[], tuple[int, list[float]]], barrier: Any, results: Any
) -> None:  # pragma: no cover - runs in a child
    try:
        barrier.wait(60)
        start, before = time.monotonic(), os.times()
        accepted, latencies = work()
        end, after = time.monotonic(), os.times()
        cpu = after.user - before.user + after.system - before.system
        results.put((accepted, latencies, start, end, cpu, None))
    except Exception as exc:  # report it to the parent instead of hanging it
        results.put((0, [], 0.0, 0.0, 0.0, f"{type(exc).__name__}: {exc}"))


def _cpu_seconds(pids: list[int]) -> dict[int, float]:
    """utime + stime of each live process (all its threads), from /proc (Linux)."""
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone (a worker restarted): its share is lost, not invented
        out[pid] = (int(fields[11]) + int(fields[12])) / _TICKS
    return out


def _workers_of(master: int) -> list[int]:
    """The child processes (gunicorn workers) of ``master``."""
    try:
        return [int(x) for x in Path(f"/proc/{master}/task/{master}/children").read_text().split()]
    except OSError:
        return []


def run_phase(
    target: str,
    work: list[Callable[[], tuple[int, list[float]]]],
    web_master: int | None,
    redis_pid: int,
) -> Phase:
    """Run one callable per client process, all started together; collect the figures.

    Besides throughput and latency, the CPU time of the phase: the clients' own, the web
    service's workers' (children of ``web_master``; none for raw) and redis-server's.
    """
    web = _workers_of(web_master) if web_master is not None else []
    before = _cpu_seconds([*web, redis_pid])
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(len(work))
    results = ctx.Queue()
    procs = [ctx.Process(target=_client, args=(w, barrier, results)) for w in work]
    for p in procs:
        p.start()
    got = [results.get(timeout=CLIENT_TIMEOUT) for _ in procs]
    for p in procs:
        p.join()
    after = _cpu_seconds([*web, redis_pid])
    errors = [g[5] for g in got if g[5]]
    if errors:
        raise SystemExit(f"{target}: a client failed: {errors[0]}")
    spent = {pid: after[pid] - before[pid] for pid in after if pid in before}
    return Phase(
        target,
        accepted=sum(g[0] for g in got),
        seconds=max(g[3] for g in got) - min(g[2] for g in got),
        latencies=sorted(x for g in got for x in g[1]),
        cpu={
            "clients": sum(g[4] for g in got),
            "web": sum(v for pid, v in spent.items() if pid != redis_pid),
            "redis": spent.get(redis_pid, 0.0),
        },
    )


# -- servers and Redis state ---------------------------------------------------------------


def _wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"gunicorn for {url} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not become ready within {READY_TIMEOUT:.0f} s")


def start_bare(redis_url: str, workers: int, log_dir: Path, stack: ExitStack) -> tuple[str, int]:
    """gunicorn with the collector's config file and environment, serving the bare app."""
    port = free_port()
    env = dict(os.environ)
    env.update(
        {
            "LDP_REDIS_URL": redis_url,
            "REDIS_URL": redis_url,
            "LDP_BIND": f"127.0.0.1:{port}",
            "LDP_WEB_WORKERS": str(workers),
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT / "benchmarks"), str(ROOT), env.get("PYTHONPATH", "")]
            ).rstrip(os.pathsep),
        }
    )
    log = stack.enter_context(open(log_dir / "bare-web.log", "ab"))
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(CONF), BARE_APP],
        env=env,
        stdout=log,
        stderr=log,
        cwd=ROOT,
        preexec_fn=die_with_parent,
    )

    def stop() -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    stack.callback(stop)
    url = f"http://127.0.0.1:{port}"
    _wait_ready(url, process)
    return url, process.pid


def quiesce(client: redis.Redis, streams: list[str]) -> None:
    """Delete the benchmark's streams and replay sets; wait out Redis's background saves."""
    doomed = set(streams)
    for pattern in (
        f"ldp:{{m:{METRIC}:*}}:reports",
        f"ldp:{{m:{METRIC}:*}}:batched",  # what batch entries hold: the backlog counts it
        f"ldp:{{m:{METRIC}:*}}:seen:*",  # the replay guard's sets, legacy and bucketed
        f"ldp:{{m:{METRIC}:*}}:guard:*",
    ):
        doomed.update(client.scan_iter(match=pattern, count=1000))  # every shard's keys
    if doomed:
        client.unlink(*doomed)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        info = client.info("persistence")
        busy = info.get("rdb_bgsave_in_progress") or info.get("aof_rewrite_in_progress")
        if not busy and not info.get("aof_rewrite_scheduled"):
            break
        time.sleep(0.2)
    time.sleep(0.5)  # let lazy frees and the AOF flush settle


# -- main --------------------------------------------------------------------------------

ADMISSION_VARIABLES = ("LDP_SOURCE_REQUESTS_PER_SECOND", "LDP_SOURCE_REPORTS_PER_MINUTE")
ADMISSION_LIMITS = {"off": "0", "on": str(10**12)}
"""The per-source limits of each ``--admission`` mode: 0 turns a limit off; 10¹² keeps
every check but refuses nothing."""


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set (the Server passes it on to gunicorn), restored after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass(frozen=True)
class Variant:
    """One row of a round: a target, its server (collector: one per worker class) and the
    AOF fsync policy Redis runs with during its phase."""

    label: str
    kind: str
    url: str
    master: int | None
    fsync: str
    server: str
    """The label without the fsync policy: which server (and worker class) answered."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--reports",
        type=int,
        default=None,
        help="reports per phase, the same for every target (default: each target's own "
        "count for --phase-seconds, measured before the rounds)",
    )
    parser.add_argument(
        "--phase-seconds",
        type=float,
        default=PHASE_SECONDS,
        help=f"how long each phase should last (default {PHASE_SECONDS:g})",
    )
    parser.add_argument("--batch", type=int, default=500, help="reports per request (SDK default)")
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--aggregators", type=int, default=0, help="aggregator workers (0)")
    parser.add_argument("--rounds", type=int, default=3, help="turns of the three targets")
    parser.add_argument(
        "--targets", default="collector,bare,raw", help="comma-separated subset, in turn order"
    )
    parser.add_argument(
        "--worker-classes",
        default="",
        help="comma-separated gunicorn worker classes, one collector each (default: the "
        "config's); e.g. sync,gevent for before/after",
    )
    parser.add_argument(
        "--appendfsync",
        default="everysec",
        help="comma-separated Redis AOF fsync policies, each target runs under each "
        "(everysec, always, no)",
    )
    parser.add_argument(
        "--admission",
        default="off",
        help="comma-separated: off (no per-source limits), on (every check, nothing "
        "refused); one collector each, e.g. off,on for the limiter's cost",
    )
    parser.add_argument(
        "--mechanism", default="grr", help="a frequency oracle (grr, oue, ...) or 'string'"
    )
    parser.add_argument(
        "-k", type=int, default=16, help="domain size (string: distinct words reported)"
    )
    parser.add_argument("--max-length", type=int, default=8, help="a string metric's bytes")
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="a checkout of other code (e.g. a git worktree of main): one more collector, "
        "'collector[before]', served from it, taking turns with the others (after/before)",
    )
    parser.add_argument("--epsilon", type=float, default=1.0)
    return parser


def _listed(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


@dataclass(frozen=True)
class Plan:
    """What the command line asks for: targets, worker classes, fsync policies,
    admission modes, the trees served."""

    targets: list[str]
    classes: list[str]
    policies: list[str]
    admissions: list[str]
    trees: dict[str, Path]


def _plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Plan:
    """The options checked (``parser.error`` on a bad one), ``--before`` resolved."""
    plan = Plan(
        _listed(args.targets),
        _listed(args.worker_classes),
        _listed(args.appendfsync),
        _listed(args.admission),
        {"": ROOT},
    )
    if not plan.targets or set(plan.targets) - {"collector", "bare", "raw"}:
        parser.error("--targets takes collector, bare and raw")
    if not plan.admissions or set(plan.admissions) - set(ADMISSION_LIMITS):
        parser.error("--admission takes off and on")
    if not plan.policies or set(plan.policies) - {"everysec", "always", "no"}:
        parser.error("--appendfsync takes everysec, always and no")
    if args.before is None:
        return plan
    args.before = args.before.resolve()
    if not (args.before / "ldp_server" / "app.py").is_file():
        parser.error(
            f"--before {args.before}: no ldp_server/app.py there (the web service this "
            "script starts; a checkout from before it moved there cannot be served)"
        )
    # `python -m gunicorn` puts its cwd first on sys.path: neither tree may be it.
    os.chdir(tempfile.gettempdir())
    print(
        f"collector[before] from {args.before} ({_commit(args.before)}), collector from "
        f"{ROOT} ({_commit(ROOT)})"
    )
    return Plan(
        plan.targets,
        plan.classes,
        plan.policies,
        plan.admissions,
        {"before": args.before, "": ROOT},
    )


def _start_collectors(
    args: argparse.Namespace, plan: Plan, redis_url: str, tmp: str, stack: ExitStack
) -> dict[str, Server]:
    """One collector per tree, worker class and admission mode, by label."""
    collectors: dict[str, Server] = {}
    combinations = itertools.product(plan.trees.items(), plan.classes or [""], plan.admissions)
    for (tree_tag, tree), worker_class, admission in combinations:
        tags = (
            ([tree_tag] if tree_tag else [])
            + ([worker_class] if worker_class else [])
            + ([f"admission={admission}"] if len(plan.admissions) > 1 else [])
        )
        label = f"collector[{','.join(tags)}]" if tags else "collector"
        env = dict.fromkeys(ADMISSION_VARIABLES, ADMISSION_LIMITS[admission])
        # The web workers import the collector from this tree: PYTHONPATH comes
        # before the editable install (and main() left the trees as the cwd).
        env["PYTHONPATH"] = str(tree)
        if worker_class:
            env["LDP_WORKER_CLASS"] = worker_class  # read by the gunicorn config
        with _environment(env):
            collectors[label] = stack.enter_context(
                Server(
                    port=0,
                    redis_url=redis_url,
                    data_dir=Path(tmp)
                    / f"collector-{tree_tag}-{worker_class or 'default'}-{admission}",
                    web_workers=args.web_workers,
                    aggregators=args.aggregators,
                    quiet=True,
                )
            )
    return collectors


def _variants(
    plan: Plan,
    collectors: dict[str, Server],
    bare: tuple[str, int],
    redis_url: str,
) -> list[Variant]:
    """Every target under every fsync policy, in turn order."""
    servers: list[tuple[str, str, str, int | None]] = []
    for kind in plan.targets:
        if kind == "collector":
            for label, server in collectors.items():
                assert server.web is not None
                servers.append((label, kind, server.url, server.web.pid))
        else:
            servers.append((kind, kind, bare[0] if kind == "bare" else redis_url, bare[1]))
    return [
        Variant(
            label if len(plan.policies) == 1 else f"{label} fsync={policy}",
            kind,
            url,
            master if kind != "raw" else None,
            policy,
            label,
        )
        for policy in plan.policies
        for label, kind, url, master in servers
    ]


@dataclass
class Load:
    """The reports of the phases and how each target is sent them."""

    args: argparse.Namespace
    definition: MetricDefinition
    redis_url: str
    reports: list[dict[str, Any]]

    def value(self, i: int) -> int | str:
        return f"w{i % self.args.k}" if self.args.mechanism == "string" else i % self.args.k

    def bodies(self, chunk: list[dict[str, Any]]) -> list[bytes]:
        batch = self.args.batch
        return [
            ENCODE({"reports": chunk[i : i + batch]}).encode() for i in range(0, len(chunk), batch)
        ]

    def work(self, target: Variant, chunk: list[dict[str, Any]]) -> list[Callable[[], Any]]:
        """One callable per client: its share of the chunk's requests."""
        clients, batch = self.args.clients, self.args.batch
        if target.kind == "raw":
            batches = [
                [ENCODE(r["payload"]).encode() for r in chunk[i : i + batch]]
                for i in range(0, len(chunk), batch)
            ]
            return [
                functools.partial(_raw_client, self.redis_url, batches[i::clients])
                for i in range(clients)
            ]
        requests = self.bodies(chunk)
        return [
            functools.partial(_http_client, target.url, requests[i::clients])
            for i in range(clients)
        ]

    def chunk(self, variant: Variant, n: int) -> list[dict[str, Any]]:
        """The phase's reports: distinct for a collector (its replay guard: more are built
        when needed); the others take the same reports over again when they need more."""
        if variant.kind == "collector":
            more = range(len(self.reports), n)
            self.reports.extend(build_report(self.definition, self.value(i)) for i in more)
        return (self.reports * (n // len(self.reports) + 1))[:n]


ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    if args.mechanism == "string":  # a string metric: values are words, not labels
        return {"kind": "string", "max_length": args.max_length, "epsilon": args.epsilon}
    return {
        "domain": [f"v{i}" for i in range(args.k)],
        "epsilon": args.epsilon,
        "mechanism": args.mechanism,
    }


def _sizes(
    args: argparse.Namespace,
    load: Load,
    variants: list[Variant],
    prepare: Callable[[Variant], None],
    redis_pid: int,
) -> dict[str, int]:
    """Each target's reports per phase: ``--reports``, else what it sends in
    ``--phase-seconds`` at the speed a probe measures."""
    if args.reports:
        return {variant.label: args.reports for variant in variants}
    per_request = args.clients * args.batch
    sizes: dict[str, int] = {}
    start = time.perf_counter()
    for variant in variants:
        n = CALIBRATION_BATCHES * per_request
        while True:  # a probe long enough that process start-up does not dominate
            prepare(variant)
            chunk = load.chunk(variant, n)
            probe = run_phase(variant.label, load.work(variant, chunk), variant.master, redis_pid)
            if probe.seconds >= min(1.0, args.phase_seconds / 4) or n >= MAX_PHASE_REPORTS:
                break
            n = min(n * 4, MAX_PHASE_REPORTS)
        requests = max(1, round(probe.rate * args.phase_seconds / per_request))
        sizes[variant.label] = min(requests * per_request, MAX_PHASE_REPORTS)
    print(
        f"reports per phase ({args.phase_seconds:g} s at the speed measured): "
        + ", ".join(f"{label} {n:,}" for label, n in sizes.items())
        + f" ({time.perf_counter() - start:.1f} s to measure)\n"
    )
    return sizes


def _rounds(
    args: argparse.Namespace,
    load: Load,
    variants: list[Variant],
    sizes: dict[str, int],
    prepare: Callable[[Variant], None],
    redis_pid: int,
) -> list[dict[str, Phase]]:
    """The timed rounds, each target once a round in a rotating order; a row a phase."""
    width = max(9, *(len(v.label) for v in variants))
    phases: list[dict[str, Phase]] = []
    print(
        f"{'round':>5}  {'target':<{width}} {'reports/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'seconds':>7}   CPU µs/report: {'clients':>7} {'web':>6} {'redis':>6} {'total':>6}"
    )
    for r in range(args.rounds):
        found: dict[str, Phase] = {}
        turn = r % len(variants)  # rotate the order: no target always runs first
        for variant in variants[turn:] + variants[:turn]:
            prepare(variant)
            chunk = load.chunk(variant, sizes[variant.label])
            phase = run_phase(variant.label, load.work(variant, chunk), variant.master, redis_pid)
            if phase.accepted != len(chunk):
                raise SystemExit(f"{variant.label}: accepted {phase.accepted} of {len(chunk)}")
            found[variant.label] = phase
            print(
                f"{r + 1:>5}  {variant.label:<{width}} {phase.rate:>10,.0f} "
                f"{phase.pct(50):>8.1f} {phase.pct(99):>8.1f} {phase.seconds:>7.2f}   {'':14} "
                + " ".join(
                    f"{phase.cpu_us(part):>{w}.1f}"
                    for part, w in (("clients", 7), ("web", 6), ("redis", 6), ("total", 6))
                )
            )
        phases.append(found)
        ratios = _ratios(found, variants)
        if ratios:
            print("       " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    return phases


def _summary(
    args: argparse.Namespace, variants: list[Variant], phases: list[dict[str, Phase]]
) -> None:
    """Each target's medians over the rounds, and each ratio's median and spread."""
    width = max(9, *(len(v.label) for v in variants))
    print(f"\nmedian over {args.rounds} round(s):")
    for target in (v.label for v in variants):
        rates = [p[target].rate for p in phases]
        p50 = [p[target].pct(50) for p in phases]
        p99 = [p[target].pct(99) for p in phases]
        print(
            f"  {target:<{width}} {statistics.median(rates):>10,.0f} reports/s "
            f"(rounds {min(rates):,.0f}–{max(rates):,.0f}), p50 {statistics.median(p50):.1f} ms, "
            f"p99 {statistics.median(p99):.1f} ms; CPU µs/report "
            + ", ".join(
                f"{part} {statistics.median(p[target].cpu_us(part) for p in phases):.1f}"
                for part in ("clients", "web", "redis", "total")
            )
        )
    per_round = [_ratios(p, variants) for p in phases]
    for key in per_round[0]:
        values = [x[key] for x in per_round]
        middle = statistics.median(values)
        spread = (max(values) - min(values)) / middle * 100 if middle else float("nan")
        print(
            f"  {key}: median {middle:.2f}, spread {spread:.0f} % of it "
            f"(rounds {', '.join(f'{v:.2f}' for v in values)})"
        )


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = _parser()
    args = parser.parse_args()
    plan = _plan(parser, args)
    print(
        f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; load average "
        f"(1, 5, 15 min) {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        embedded = stack.enter_context(EmbeddedRedis(Path(tmp) / "redis"))
        redis_url = embedded.url
        admin = redis.Redis.from_url(redis_url)
        collectors = _start_collectors(args, plan, redis_url, tmp, stack)
        bare = start_bare(redis_url, args.web_workers, Path(tmp), stack)
        assert embedded.process is not None
        redis_pid = embedded.process.pid
        variants = _variants(plan, collectors, bare, redis_url)
        definition = Registry(admin).put(METRIC, _spec(args)).definition
        assert isinstance(definition, MetricDefinition)
        streams = [BARE_STREAM, RAW_STREAM]  # quiesce finds the collector's (every shard)

        # Unique ids within a phase (the collector's replay guard; quiesce empties its sets
        # before each phase, so phases may reuse them). More are built once the phase
        # lengths are known.
        per_request = args.clients * args.batch
        warmup = WARMUP_BATCHES * per_request
        load = Load(args, definition, redis_url, [])
        start = time.perf_counter()
        load.reports = [
            build_report(definition, load.value(i))
            for i in range(max(warmup, CALIBRATION_BATCHES * per_request, args.reports or 0))
        ]
        built = time.perf_counter() - start
        body_bytes = len(load.bodies(load.reports[: args.batch])[0])
        print(
            f"{args.mechanism} k={args.k} ε={args.epsilon:g}: {len(load.reports):,} reports "
            f"built with the SDK in {built:.1f} s ({body_bytes:,} bytes per {args.batch}-report "
            f"body); redis-server {embedded.version()} (AOF {', '.join(plan.policies)})"
        )
        print(
            f"gunicorn ({CONF.name}): {args.web_workers} workers each "
            f"({', '.join(plan.classes) or 'the default class'} for collector); {args.clients} "
            f"client processes; {args.aggregators} aggregator(s); "
            + (
                f"{args.reports:,} reports per phase\n"
                if args.reports
                else f"phases of about {args.phase_seconds:g} s each\n"
            )
        )

        def prepare(variant: Variant) -> None:
            quiesce(admin, streams)
            admin.config_set("appendfsync", variant.fsync)

        for variant in variants:  # warm up each target once (not timed)
            prepare(variant)
            chunk = load.reports[:warmup]
            run_phase(variant.label, load.work(variant, chunk), variant.master, redis_pid)
        sizes = _sizes(args, load, variants, prepare, redis_pid)
        phases = _rounds(args, load, variants, sizes, prepare, redis_pid)
    _summary(args, variants, phases)
    load_average = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the end: {load_average}")


def _commit(tree: Path) -> str:
    """The tree's commit (and "+changes" if its files differ from it)."""
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return head + (" +changes" if dirty else "")


def _ratios(found: dict[str, Phase], variants: list[Variant]) -> dict[str, float]:
    """collector ÷ bare and collector ÷ raw (same fsync policy), and each later variant of a
    kind ÷ the first of that kind differing in one thing only (worker class or fsync
    policy: after ÷ before), where both were measured.

    By throughput (reports/s), and by CPU (the other's total CPU µs/report ÷ this one's:
    the throughput ratio the 2 cores would allow if nothing else ran on them).
    """
    pairs: list[tuple[Variant, Variant]] = []
    for v in variants:
        if v.kind == "collector":
            pairs += [(v, o) for o in variants if o.kind != "collector" and o.fsync == v.fsync]
    for kind in dict.fromkeys(v.kind for v in variants):
        same = [v for v in variants if v.kind == kind]
        for v in same:  # one thing changed: the worker class, or the fsync policy
            first_class = next(o for o in same if o.fsync == v.fsync)
            first_policy = next(o for o in same if o.server == v.server)
            pairs += [(v, o) for o in (first_class, first_policy) if o is not v]
    out = {}
    for mine, other in pairs:
        if mine.label in found and other.label in found:
            a, b = found[mine.label], found[other.label]
            out[f"{mine.label}/{other.label}"] = a.rate / b.rate
            out[f"{mine.label}/{other.label} by CPU"] = b.cpu_us("total") / a.cpu_us("total")
    return out


if __name__ == "__main__":
    main()
