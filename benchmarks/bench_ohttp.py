"""What Oblivious HTTP costs: on the device, at the collector, through the relay, in the shuffle.

    python benchmarks/bench_ohttp.py [--batch 100] [--seconds 6] [--clients 4] [--shuffle-b 100]

One run, four figures, each beside a yardstick measured in the same run:

* **device**: µs to seal one upload (Binary HTTP + HPKE, ``client_sdk.ohttp``) and to open
  its answer, per upload and per report, beside the cost of making the same reports
  (``client_sdk.wire.build_report``: perturbation with the CSPRNG and the JSON object);
* **collector**: reports/s of one gunicorn collector (the production config, 2 workers,
  embedded redis-server with AOF) for the same reports sent directly (``POST /v1/reports``)
  and sealed through the gateway (``POST /.well-known/ohttp-gateway``, shuffling off so
  only the gateway differs); rounds alternate, bodies are built before each phase (the
  load generator does the same work for both: post bytes, read the answer);
* **relay**: p50/p99 of one upload's round trip, one at a time, to the gateway directly
  and through ``ldp relay`` (its own process, loopback): the relay's added latency;
* **definitions**: p50/p99 of one definition fetch (``GET /v1/metrics/<name>``) with the
  SDK's own transports, directly (``HTTPTransport``) and sealed through the relay
  (``ObliviousTransport``: seal, relay, gateway, open), as a device behind a relay now
  fetches them (``--only definitions`` runs just this);
* **shuffle**: a second collector with ``LDP_SHUFFLE_MIN_BATCH`` = B; single-report
  uploads through the gateway at a steady rate λ; each report's wait from its 202 to its
  batch's release (the stream entry's id is the release time), against theory: a report
  at position i of its batch waits (B − i)/λ, on average (B − 1)/(2λ), at most (B − 1)/λ.

The load average is printed before and after: the machine is shared; compare the figures
of one run (ratios), not across runs. Figures go to ``docs/benchmarks/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
from dataclasses import replace
from pathlib import Path
from typing import Any

import requests

from client_sdk.ohttp import bhttp
from client_sdk.ohttp.encapsulation import (
    decapsulate_request,
    encapsulate_request,
    generate_private_key,
    public_key_of,
)
from client_sdk.ohttp.keys import (
    GATEWAY_PATH,
    KEM_X25519_HKDF_SHA256,
    REQUEST_MEDIA_TYPE,
    SUPPORTED,
    KeyConfig,
    decode_key_configs,
)
from client_sdk.wire import MetricDefinition, build_report, parse_spec
from ldp_store import keys
from ldp_store.embedded import EmbeddedRedis, free_port

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.process_helpers import spawn  # noqa: E402

TOKEN = "bench-admin-token-0001"
SPEC = {"domain": [f"v{i}" for i in range(32)], "epsilon": 1.0, "mechanism": "oue"}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- device ------------------------------------------------------------------------------


class _Key:
    def __init__(self) -> None:
        self.private_key = generate_private_key()
        self.config = KeyConfig(
            1, KEM_X25519_HKDF_SHA256, public_key_of(self.private_key), SUPPORTED
        )


def bench_device(batch: int, repeat: int) -> None:
    definition = replace(parse_spec("bench.metric", SPEC), version=1)
    key = _Key()
    reports = [build_report(definition, i % 32) for i in range(batch)]
    body = json.dumps({"reports": reports}, separators=(",", ":")).encode()
    request = bhttp.BinaryRequest(
        "POST",
        "https",
        "collector.example",
        "/v1/reports",
        (("content-type", "application/json"),),
        body,
    )
    _, gateway = decapsulate_request(
        encapsulate_request(key.config, bhttp.encode_request(request))[0],
        lambda i: key,
    )
    answer = gateway.encapsulate_response(
        bhttp.encode_response(bhttp.BinaryResponse(202, (), b'{"accepted":1}'))
    )

    def seal() -> None:
        encapsulate_request(key.config, bhttp.encode_request(request))

    def seal_and_open() -> None:
        _, context = encapsulate_request(key.config, bhttp.encode_request(request))
        try:
            context.decapsulate_response(answer)
        except Exception:  # noqa: BLE001  # another request's answer: the work is the same
            pass

    def make_reports() -> None:
        for i in range(batch):
            build_report(definition, i % 32)

    number = 200
    seal_us = min(timeit.repeat(seal, number=number, repeat=repeat)) / number * 1e6
    both_us = min(timeit.repeat(seal_and_open, number=number, repeat=repeat)) / number * 1e6
    make_us = min(timeit.repeat(make_reports, number=20, repeat=repeat)) / 20 * 1e6
    print(f"\ndevice ({batch}-report OUE k=32 uploads, {len(body)} bytes of JSON):")
    rows = (
        ("seal one upload (BHTTP + HPKE)", seal_us),
        ("seal + open its answer", both_us),
        (f"yardstick: make the {batch} reports", make_us),
    )
    for label, us in rows:
        print(f"  {label:<36} {us:8.0f} µs   {us / batch:7.2f} µs/report")
    print(f"  OHTTP / making the reports: {both_us / make_us:.2f}")


# -- servers -----------------------------------------------------------------------------


def start_collector(
    redis_url: str, logs: Path, min_batch: int, workers: int
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update(
        REDIS_URL=redis_url,
        LDP_ADMIN_TOKEN=TOKEN,
        LDP_BIND=f"127.0.0.1:{port}",
        LDP_WEB_WORKERS=str(workers),
        LDP_ACCESS_LOG="off",
        LDP_LOG_LEVEL="warning",
        LDP_SHUFFLE_MIN_BATCH=str(min_batch),
        LDP_SOURCE_REQUESTS_PER_SECOND="0",
        LDP_SOURCE_REPORTS_PER_MINUTE="0",
        LDP_RELAY_REQUESTS_PER_SECOND="0",
        LDP_MAX_BACKLOG="100000000",
    )
    url = f"http://127.0.0.1:{port}"
    args = ["gunicorn", "-c", "collector/gunicorn_conf.py", "collector:create_app()"]
    return serve_process(args, logs / f"collector-{port}.log", url + "/readyz", env), url


def start_relay(gateway: str, logs: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    args = ["ldp_server", "relay", "--gateway", gateway, "--port", str(port), "--workers", "1"]
    args += ["--requests-per-second", "0"]
    return serve_process(args, logs / "relay.log", url + "healthz"), url


def serve_process(
    args: list[str], log: Path, ready: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m ARGS`` in a session of its own (``stop`` ends the group), its output in
    ``log``; returned once ``ready`` answers 200."""
    process = spawn(args, log, env)
    wait(ready)
    return process


def wait(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def stop(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(30)


def define(url: str) -> MetricDefinition:
    answer = requests.put(
        url + "/v1/metrics/bench.metric",
        json=SPEC,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    answer.raise_for_status()
    return MetricDefinition.from_dict(answer.json())


def key_config(url: str) -> KeyConfig:
    return decode_key_configs(requests.get(url + GATEWAY_PATH, timeout=10).content)[0]


def sealed(config: KeyConfig, url: str, body: bytes) -> bytes:
    request = bhttp.BinaryRequest(
        "POST",
        "http",
        url.split("//", 1)[1],
        "/v1/reports",
        (("content-type", "application/json"),),
        body,
    )
    return encapsulate_request(config, bhttp.encode_request(request))[0]


# -- collector throughput ----------------------------------------------------------------


def cpu_seconds(master: int) -> float:
    """CPU seconds (user + system) of a gunicorn master and its workers, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [master]
    try:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def phase(target: str, bodies: list[bytes], kind: str, clients: int) -> float:
    """Post every body (``clients`` threads, a session each); seconds from start to last."""
    chunks = [bodies[i::clients] for i in range(clients)]
    failures: list[int] = []

    def run(mine: list[bytes]) -> None:
        session = requests.Session()
        for body in mine:
            answer = session.post(target, data=body, headers={"Content-Type": kind}, timeout=30)
            if answer.status_code not in (200, 202):
                failures.append(answer.status_code)

    threads = [threading.Thread(target=run, args=(chunk,)) for chunk in chunks]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{kind}: {len(failures)} failures, e.g. {failures[:3]}")
    return elapsed


def bench_throughput(
    url: str,
    definition: MetricDefinition,
    batch: int,
    seconds: float,
    clients: int,
    rounds: int,
    redis: Any,
    master: int,
) -> None:
    config = key_config(url)
    probe = [
        json.dumps({"reports": [build_report(definition, i % 32) for i in range(batch)]}).encode()
        for _ in range(20)
    ]
    rate = 20 * batch / phase(url + "/v1/reports", probe, "application/json", clients)
    requests_per_phase = max(20, int(rate * seconds / batch))
    print(
        f"\ncollector: {requests_per_phase} requests of {batch} reports per phase, "
        f"{clients} client threads, 2 gunicorn workers, rounds alternate"
    )
    ratios, cpu_ratios = [], []
    for r in range(rounds):
        figures, cpu = {}, {}
        for name in ("direct", "gateway") if r % 2 == 0 else ("gateway", "direct"):
            bodies = [
                json.dumps(
                    {"reports": [build_report(definition, i % 32) for i in range(batch)]}
                ).encode()
                for _ in range(requests_per_phase)
            ]
            if name == "gateway":
                bodies = [sealed(config, url, b) for b in bodies]
                target, kind = url + GATEWAY_PATH, REQUEST_MEDIA_TYPE
            else:
                target, kind = url + "/v1/reports", "application/json"
            redis.delete(keys.stream_key(definition.name, definition.version))
            before = cpu_seconds(master)
            elapsed = phase(target, bodies, kind, clients)
            cpu[name] = (cpu_seconds(master) - before) / (requests_per_phase * batch) * 1e6
            figures[name] = requests_per_phase * batch / elapsed
        ratios.append(figures["gateway"] / figures["direct"])
        cpu_ratios.append(cpu["gateway"] / cpu["direct"])
        print(
            f"  round {r + 1}: direct {figures['direct']:7.0f} reports/s {cpu['direct']:5.1f} "
            f"µs CPU/report   gateway {figures['gateway']:7.0f} reports/s "
            f"{cpu['gateway']:5.1f} µs CPU/report   gateway/direct {ratios[-1]:.2f} "
            f"(CPU {cpu_ratios[-1]:.2f})"
        )
    print(
        f"  median gateway/direct: throughput {statistics.median(ratios):.2f}, "
        f"collector CPU per report {statistics.median(cpu_ratios):.2f}"
    )


# -- relay latency -----------------------------------------------------------------------


def bench_latency(url: str, relay: str, definition: MetricDefinition, n: int) -> None:
    """Uploads to the gateway directly and through the relay, interleaved one by one (so
    both see the same machine load), after 20 of each to warm the connections."""
    config = key_config(url)
    session = requests.Session()
    targets = {"gateway directly": url + GATEWAY_PATH, "through the relay": relay}
    times: dict[str, list[float]] = {name: [] for name in targets}
    for i in range(n + 20):
        order = list(targets) if i % 2 == 0 else list(reversed(targets))
        for name in order:
            body = json.dumps({"reports": [build_report(definition, 1) for _ in range(10)]})
            sealed_body = sealed(config, url, body.encode())
            started = time.perf_counter()
            answer = session.post(
                targets[name],
                data=sealed_body,
                headers={"Content-Type": REQUEST_MEDIA_TYPE},
                timeout=30,
            )
            if i >= 20:
                times[name].append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200, answer.text
    results = {}
    for name, found in times.items():
        found.sort()
        results[name] = (found[len(found) // 2], found[int(len(found) * 0.99) - 1])
    print(f"\nrelay: {n} 10-report uploads each way, interleaved, loopback (ms)")
    for name, (p50, p99) in results.items():
        print(f"  {name:<18} p50 {p50:6.2f}   p99 {p99:6.2f}")
    added50 = results["through the relay"][0] - results["gateway directly"][0]
    added99 = results["through the relay"][1] - results["gateway directly"][1]
    print(f"  added by the relay: p50 {added50:+.2f} ms, p99 {added99:+.2f} ms")


# -- definition fetches ------------------------------------------------------------------


def bench_definitions(url: str, relay: str, definition: MetricDefinition, n: int) -> None:
    """A definition fetched with the SDK's transports, directly and through the relay,
    interleaved one by one, after 20 of each to warm the connections."""
    from client_sdk.ohttp.transport import ObliviousTransport
    from client_sdk.transport import HTTPTransport

    sealed_transport = ObliviousTransport(url, relay, 30.0)
    sealed_transport.prepare()
    transports = {"directly": HTTPTransport(url, 30.0), "through the relay": sealed_transport}
    path = "/v1/metrics/" + definition.name
    times: dict[str, list[float]] = {name: [] for name in transports}
    for i in range(n + 20):
        order = list(transports) if i % 2 == 0 else list(reversed(transports))
        for name in order:
            started = time.perf_counter()
            answer = transports[name].get(path)
            if i >= 20:
                times[name].append((time.perf_counter() - started) * 1000)
            assert answer.status == 200 and answer.json()["name"] == definition.name
    print(f"\ndefinitions: {n} fetches each way, interleaved, loopback (ms)")
    p50s = {}
    for name, found in times.items():
        found.sort()
        p50s[name] = found[len(found) // 2]
        print(f"  {name:<18} p50 {p50s[name]:6.2f}   p99 {found[int(len(found) * 0.99) - 1]:6.2f}")
    print(
        f"  through the relay / directly, p50: {p50s['through the relay'] / p50s['directly']:.2f}"
    )
    for transport in transports.values():
        transport.close()


# -- shuffle delay -----------------------------------------------------------------------


def bench_shuffle(
    url: str, definition: MetricDefinition, b: int, rate: float, batches: int, redis: Any
) -> None:
    config = key_config(url)
    session = requests.Session()
    total = b * batches
    stream = keys.stream_key(definition.name, definition.version)
    redis.delete(stream)
    bodies = [
        sealed(config, url, json.dumps({"reports": [build_report(definition, 1)]}).encode())
        for _ in range(total)
    ]
    accepted: list[float] = []
    start = time.time()
    for i, body in enumerate(bodies):
        due = start + i / rate
        pause = due - time.time()
        if pause > 0:
            time.sleep(pause)
        answer = session.post(
            url + GATEWAY_PATH, data=body, headers={"Content-Type": REQUEST_MEDIA_TYPE}, timeout=30
        )
        assert answer.status_code == 200
        accepted.append(time.time())
    deadline = time.time() + 10
    while redis.xlen(stream) < total and time.time() < deadline:
        time.sleep(0.05)
    released = sorted(
        int(entry_id.decode().split("-")[0]) / 1000 for entry_id, _ in redis.xrange(stream)
    )
    # Batches leave whole: the k-th batch holds reports k·B .. k·B + B − 1 in arrival order.
    waits = []
    for k in range(batches):
        release = released[k * b]
        waits += [release - accepted[k * b + i] for i in range(b)]
    achieved = (total - 1) / (accepted[-1] - accepted[0])
    print(f"\nshuffle: B = {b}, {total} single-report uploads at {achieved:.0f}/s", end="")
    print(f" (target {rate:.0f}/s)")
    print(
        f"  wait from 202 to release: mean {statistics.mean(waits):.3f} s, max {max(waits):.3f} s"
    )
    print(
        f"  theory at that rate: mean (B−1)/(2λ) = {(b - 1) / (2 * achieved):.3f} s, "
        f"max (B−1)/λ = {(b - 1) / achieved:.3f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=100, help="reports per upload")
    parser.add_argument("--seconds", type=float, default=6.0, help="about this long per phase")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--latency-n", type=int, default=400)
    parser.add_argument("--shuffle-b", type=int, default=100)
    parser.add_argument("--shuffle-rate", type=float, default=200.0, help="uploads per second")
    parser.add_argument("--shuffle-batches", type=int, default=5)
    parser.add_argument("--only", choices=["definitions"], help="run just this part")
    args = parser.parse_args()
    print(f"load average {load()} (start)")
    if args.only == "definitions":
        with tempfile.TemporaryDirectory() as tmp:
            logs = Path(tmp)
            redis_server = EmbeddedRedis(logs / "redis").start()
            processes = []
            try:
                collector, url = start_collector(redis_server.url, logs, 1, 1)
                processes.append(collector)
                relay, relay_url = start_relay(url + GATEWAY_PATH, logs)
                processes.append(relay)
                bench_definitions(url, relay_url, define(url), args.latency_n)
            finally:
                for process in processes:
                    stop(process)
                redis_server.stop()
        print(f"\nload average {load()} (end)")
        return
    bench_device(args.batch, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp)
        redis_server = EmbeddedRedis(logs / "redis").start()
        processes = []
        try:
            redis = redis_server.client()
            collector, url = start_collector(redis_server.url, logs, 1, 2)
            processes.append(collector)
            definition = define(url)
            bench_throughput(
                url,
                definition,
                args.batch,
                args.seconds,
                args.clients,
                args.rounds,
                redis,
                collector.pid,
            )
            relay, relay_url = start_relay(url + GATEWAY_PATH, logs)
            processes.append(relay)
            bench_latency(url, relay_url, definition, args.latency_n)
            bench_definitions(url, relay_url, definition, args.latency_n)
            shuffling, shuffle_url = start_collector(redis_server.url, logs, args.shuffle_b, 1)
            processes.append(shuffling)
            bench_shuffle(
                shuffle_url,
                definition,
                args.shuffle_b,
                args.shuffle_rate,
                args.shuffle_batches,
                redis,
            )
        finally:
            for process in processes:
                stop(process)
            redis_server.stop()
    print(f"\nload average {load()} (end)")


if __name__ == "__main__":
    main()
