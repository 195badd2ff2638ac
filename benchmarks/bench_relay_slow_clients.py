"""A legitimate sealed upload through ``ldp relay`` while slow clients hold connections.

Run on purpose, not as a test, with a checkout of the old code as the yardstick::

    mkdir /tmp/ldp-main && git archive main | tar -x -C /tmp/ldp-main
    .venv/bin/python benchmarks/bench_relay_slow_clients.py --before /tmp/ldp-main  # ~15 min
    .venv/bin/python benchmarks/bench_relay_slow_clients.py                         # ~6 min

A collector under gunicorn (one gevent worker, embedded redis-server, per-source limits
off: its one source is the relay) is the gateway; ``ldp relay`` runs in front of it with
its defaults (2 workers, 20 requests/s per address, from each tree given). For each
scenario an attacker keeps ``--slow`` connections (2,000) open against the relay, each of
which sent a POST's headers (``Content-Length: 100000``) and 2 bytes of its body, and
opens a new one whenever one is closed or answered (at most ``--reopen-rate`` a second
in all). After ``--settle`` seconds (past the body deadline, and long enough for the old
relay's request limit to let an address's connections pile up), a device uploads
``--uploads`` sealed 10-report batches one after another (for ``--seconds`` at most),
each on a fresh connection from 127.0.0.1 (what a device that has no kept-alive
connection meets), with the SDK's 10 s timeout: p50/p99/max of the round trip and how
many failed (a failure counts as 10 s in the percentiles). The scenarios:

* **no attack**: the yardstick;
* **one address**: every slow connection from 127.0.0.66;
* **2,000 addresses**: each from its own address (127.66.x.y), which no per-address
  limit or cap tells apart.

Printed beside them: the attacker's connections still open when the uploads start, how
many it opened, and the load average (the machine is shared: compare figures of one run).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402
from bench_ohttp import define, key_config, load, sealed, start_collector, stop, wait  # noqa: E402

from client_sdk.ohttp.keys import GATEWAY_PATH, REQUEST_MEDIA_TYPE  # noqa: E402
from client_sdk.wire import MetricDefinition, build_report  # noqa: E402
from ldp_store.embedded import EmbeddedRedis, free_port  # noqa: E402

HEAD = (
    b"POST / HTTP/1.1\r\nHost: relay\r\nContent-Type: message/ohttp-req\r\n"
    b"Content-Length: 100000\r\n\r\n\x00\x01"
)
SDK_TIMEOUT = 10.0


class Attacker:
    """Keeps ``count`` slow connections open from ``sources`` (one thread, non-blocking
    sockets): each sends :data:`HEAD`; one the relay closes or answers is replaced."""

    def __init__(self, port: int, count: int, sources: list[str], reopen_rate: float) -> None:
        self.port, self.count, self.sources = port, count, sources
        self.interval = 1.0 / reopen_rate
        self.selector = selectors.DefaultSelector()
        self.open = 0
        self.opened = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Attacker:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(30)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()

    def _open(self, i: int) -> None:
        s = socket.socket()
        s.setblocking(False)
        try:
            s.bind((self.sources[i % len(self.sources)], 0))
            code = s.connect_ex(("127.0.0.1", self.port))
        except OSError:
            s.close()
            return
        if code not in (0, errno.EINPROGRESS):
            s.close()
            return
        self.selector.register(s, selectors.EVENT_WRITE, i)
        self.open += 1
        self.opened += 1

    def _close(self, s: socket.socket) -> None:
        self.selector.unregister(s)
        s.close()
        self.open -= 1

    def _run(self) -> None:
        next_open, i = time.monotonic(), 0
        while not self.stopped.is_set():
            now = time.monotonic()
            while self.open < self.count and now >= next_open:
                self._open(i)
                i += 1
                # the first count go at once; replacements at the reopen rate
                next_open = now if self.opened < self.count else next_open + self.interval
            for key, events in self.selector.select(timeout=0.05):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                if events & selectors.EVENT_WRITE:
                    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        self._close(s)
                        continue
                    try:
                        s.send(HEAD)
                    except OSError:
                        self._close(s)
                        continue
                    self.selector.modify(s, selectors.EVENT_READ, key.data)
                else:  # answered (408, 429) or closed: replace it
                    self._close(s)
            if self.open >= self.count:
                next_open = max(next_open, time.monotonic())


def start_relay(
    tree: Path, gateway: str, logs: Path, name: str
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "ldp_server", "relay", "--gateway", gateway, "--port", str(port)],
        cwd=tree,
        env=env,
        stdout=open(logs / f"relay-{name}.log", "wb"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait(f"http://127.0.0.1:{port}/healthz")
    return process, port


def uploads(
    relay: str, gateway_url: str, definition: MetricDefinition, n: int, budget: float
) -> dict[str, float]:
    config = key_config(gateway_url)
    times, failed = [], 0
    stop_at = time.monotonic() + budget
    for _ in range(n):
        if time.monotonic() > stop_at:
            break
        body = json.dumps({"reports": [build_report(definition, 1) for _ in range(10)]})
        sealed_body = sealed(config, gateway_url, body.encode())
        started = time.perf_counter()
        try:
            answer = requests.post(  # a fresh connection each time
                relay,
                data=sealed_body,
                headers={"Content-Type": REQUEST_MEDIA_TYPE},
                timeout=SDK_TIMEOUT,
            )
            ok = answer.status_code == 200
        except requests.RequestException:
            ok = False
        elapsed = time.perf_counter() - started
        if not ok:
            failed += 1
            elapsed = max(elapsed, SDK_TIMEOUT)
        times.append(elapsed * 1000)
    times.sort()
    return {
        "p50": times[len(times) // 2],
        "p99": times[min(len(times) - 1, int(len(times) * 0.99))],
        "max": times[-1],
        "failed": failed,
        "done": len(times),
    }


def scenario(
    name: str,
    port: int,
    sources: list[str] | None,
    args: argparse.Namespace,
    gateway_url: str,
    definition: MetricDefinition,
) -> None:
    attacker = None
    held = opened = 0
    if sources is not None:
        attacker = Attacker(port, args.slow, sources, args.reopen_rate).start()
        time.sleep(args.settle)
    try:
        if attacker is not None:
            held, opened = attacker.open, attacker.opened
        found = uploads(
            f"http://127.0.0.1:{port}/", gateway_url, definition, args.uploads, args.seconds
        )
    finally:
        if attacker is not None:
            attacker.stop()
    attack = "" if attacker is None else f"  attacker: {held} open at the start, {opened} opened"
    print(
        f"  {name:<16} p50 {found['p50']:8.1f}  p99 {found['p99']:8.1f}  max {found['max']:8.1f}"
        f"  failed {found['failed']:3.0f}/{found['done']:.0f}{attack}  (load {load()})",
        flush=True,
    )
    time.sleep(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the old code: its relay too")
    parser.add_argument("--slow", type=int, default=2000, help="slow connections held")
    parser.add_argument("--uploads", type=int, default=200)
    parser.add_argument(
        "--seconds", type=float, default=120.0, help="at most this long uploading per scenario"
    )
    parser.add_argument("--settle", type=float, default=60.0, help="seconds before uploading")
    parser.add_argument("--reopen-rate", type=float, default=200.0, help="new connections/s")
    args = parser.parse_args()
    print(f"load average {load()} (start); {os.cpu_count()} cores", flush=True)
    trees = {"before": args.before.resolve()} if args.before else {}
    trees["after"] = ROOT
    one = ["127.0.0.66"]
    many = [f"127.66.{i // 250}.{i % 250 + 1}" for i in range(args.slow)]
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp)
        redis_server = EmbeddedRedis(logs / "redis").start()
        collector, url = start_collector(redis_server.url, logs, 1, 1)
        try:
            definition = define(url)
            for tree_name, tree in trees.items():
                relay, port = start_relay(tree, url + GATEWAY_PATH, logs, tree_name)
                try:
                    print(
                        f"\n{tree_name} ({tree}): {args.uploads} sealed 10-report uploads, one "
                        f"at a time, fresh connections (ms); {args.slow} slow connections",
                        flush=True,
                    )
                    scenario("no attack", port, None, args, url, definition)
                    scenario("one address", port, one, args, url, definition)
                    scenario(f"{args.slow:,} addresses", port, many, args, url, definition)
                finally:
                    stop(relay)
        finally:
            stop(collector)
            redis_server.stop()
    print(f"\nload average {load()} (end)")


if __name__ == "__main__":
    main()
