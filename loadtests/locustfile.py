"""Locust users that act as real apps: real SDK encoder, fresh devices, SDK-sized batches.

Each Locust user is a stream of simulated devices. Every task iteration simulates
``LDP_DEVICES_PER_BATCH`` new devices; each device draws one fresh true value of every
categorical metric (from ``LDP_DISTRIBUTION``) and perturbs it on the "device" with the
real encoder, :func:`client_sdk.wire.build_report` (the CSPRNG, as the SDK does). The
reports of one iteration go out as ONE ``POST /v1/reports`` of ``{"reports": [...]}``:
``devices per batch × metrics`` reports, an SDK-sized batch (50–500 by default).

In full: ``docs/guides/deployment.md``.
"""

from __future__ import annotations

import json
import logging
import os
import random
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import gevent
from locust import FastHttpUser, constant, events, task
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import WorkerRunner

from client_sdk.wire import MetricDefinition, build_report

__all__ = ["AppUser", "Truth", "thresholds_exit_code"]

log = logging.getLogger("ldp.load")

MAX_DEVICES_PER_BATCH = 250
"""The collector takes at most LDP_MAX_REPORTS (1000) reports per request; with the four
demo metrics, 250 devices fill that exactly. An SDK flushes far smaller batches."""

DEFAULT_MAX_P95_MS = 2000.0
"""A sync gunicorn worker validates and appends a 400-report batch in tens of ms; 2 s at
p95 means the machine is saturated (queueing), which is a failing run."""

CSV_FLUSH_SECONDS = 1.5
"""Locust rewrites its CSV files every second (``CSV_STATS_INTERVAL_SEC``) and not again
on quit: wait that long before quitting so they hold the final figures."""

BATCH_NAME = "POST /v1/reports"
"""One stats entry for every batch, whatever its size."""


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw not in (None, "") else default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw not in (None, "") else default


def _weights(definition: MetricDefinition) -> list[float]:
    """The true-value distribution of a categorical metric, from LDP_DISTRIBUTION."""
    k = definition.k
    kind = os.environ.get("LDP_DISTRIBUTION", "zipf")
    if kind == "uniform":
        return [1.0] * k
    if kind == "demo":
        from ldp_server.demo import DEMO_METRICS  # noqa: PLC0415 - only for this mode

        entry = DEMO_METRICS.get(definition.name)
        if entry is not None and len(entry["shares"]) == k:
            return list(entry["shares"])
    if kind not in ("zipf", "demo"):
        raise ValueError(f"LDP_DISTRIBUTION={kind!r}: use zipf, uniform or demo")
    s = _env_float("LDP_ZIPF_S", 1.1)
    return [1.0 / (i + 1) ** s for i in range(k)]


@dataclass
class Truth:
    """What this process's simulated devices held, counting only accepted reports."""

    counts: dict[str, list[int]] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    devices: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    batches: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of a truth file."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


TRUTH = Truth()
"""This process's tally (gevent: users run cooperatively, no lock needed)."""

_definitions: list[MetricDefinition] | None = None


def _load_definitions(client: Any) -> list[MetricDefinition]:
    """GET /v1/metrics once per process; keep the categorical metrics asked for."""
    global _definitions
    if _definitions is not None:
        return _definitions
    with client.get("/v1/metrics", name="GET /v1/metrics", catch_response=True) as response:
        if response.status_code != 200:
            response.failure(f"status {response.status_code}")
            raise StopUser()
        data = response.json()
    wanted = {n.strip() for n in os.environ.get("LDP_METRICS", "").split(",") if n.strip()}
    found = [MetricDefinition.from_dict(d) for d in data["metrics"]]
    chosen = [
        d
        for d in found
        if d.kind == "categorical" and not d.longitudinal and (not wanted or d.name in wanted)
    ]
    if not chosen:
        log.error("no categorical metric to report (GET /v1/metrics: %d metrics)", len(found))
        raise StopUser()
    for d in chosen:
        TRUTH.counts.setdefault(d.name, [0] * d.k)
        TRUTH.versions[d.name] = d.version
    _definitions = chosen
    return chosen


class AppUser(FastHttpUser):
    """A stream of fresh devices, each reporting one true value of every metric."""

    wait_time = constant(0)  # the pause, if any, is LDP_WAIT_MS after each batch

    def on_start(self) -> None:
        """Fetch the definitions (once per process) and set this user's quota."""
        self.definitions = _load_definitions(self.client)
        self.weights = [_weights(d) for d in self.definitions]
        self.picker = random.Random()  # true values; the perturbation uses the CSPRNG
        per_batch = _env_int("LDP_DEVICES_PER_BATCH", 100)
        self.per_batch = max(1, min(per_batch, MAX_DEVICES_PER_BATCH))
        self.quota = _env_int("LDP_DEVICES_PER_USER", 0) or None
        self.done = 0
        self.pause = _env_float("LDP_WAIT_MS", 0) / 1000

    @task
    def post_batch(self) -> None:
        """Simulate one batch of devices and POST their reports."""
        if self.quota is not None and self.done >= self.quota:
            raise StopUser()
        devices = self.per_batch
        if self.quota is not None:
            devices = min(devices, self.quota - self.done)
        self.done += devices
        reports: list[dict[str, Any]] = []
        truth: list[tuple[str, int]] = []
        for _ in range(devices):
            for definition, weights in zip(self.definitions, self.weights, strict=True):
                index = self.picker.choices(range(definition.k), weights)[0]
                reports.append(build_report(definition, index))
                truth.append((definition.name, index))
        TRUTH.devices += devices
        with self.client.post(
            "/v1/reports", json={"reports": reports}, name=BATCH_NAME, catch_response=True
        ) as response:
            if response.status_code != 202:
                response.failure(f"status {response.status_code}")
                return
            body = response.json()
            rejected = {int(r["index"]) for r in body.get("rejected", [])}
            TRUTH.batches += 1
            TRUTH.accepted += int(body.get("accepted", 0))
            TRUTH.duplicates += int(body.get("duplicates", 0))
            TRUTH.rejected += len(rejected)
            for i, (name, index) in enumerate(truth):
                if i not in rejected:
                    TRUTH.counts[name][index] += 1
            if rejected:
                response.failure(f"{len(rejected)} reports rejected")
        if self.pause:
            gevent.sleep(self.pause)


def thresholds_exit_code(environment: Environment) -> int:
    """1 if the failure ratio or the p95 response time is over its threshold, else 0."""
    total = environment.stats.total
    max_fail = _env_float("LDP_MAX_FAILURE_RATIO", 0.0)
    max_p95 = _env_float("LDP_MAX_P95_MS", DEFAULT_MAX_P95_MS)
    p95 = total.get_response_time_percentile(0.95) or 0.0
    code = 0
    if total.num_requests == 0:
        log.error("no requests were made")
        code = 1
    if total.fail_ratio > max_fail:
        log.error("failure ratio %.4f > LDP_MAX_FAILURE_RATIO %.4f", total.fail_ratio, max_fail)
        code = 1
    if p95 > max_p95:
        log.error("p95 %.0f ms > LDP_MAX_P95_MS %.0f ms", p95, max_p95)
        code = 1
    return code


def _write_truth() -> None:
    folder = os.environ.get("LDP_TRUTH_DIR")
    if not folder or not TRUTH.counts:
        return
    path = Path(folder) / f"truth-{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(TRUTH.to_dict()))


def _write_stats(environment: Environment) -> None:
    """The final figures of the batch endpoint, exactly (``LDP_TRUTH_DIR/stats.json``)."""
    folder = os.environ.get("LDP_TRUTH_DIR")
    if not folder:
        return
    entry = environment.stats.get(BATCH_NAME, "POST")
    stats = {
        "requests": entry.num_requests,
        "failures": entry.num_failures,
        "p50_ms": entry.get_response_time_percentile(0.5) or 0.0,
        "p95_ms": entry.get_response_time_percentile(0.95) or 0.0,
        "p99_ms": entry.get_response_time_percentile(0.99) or 0.0,
        "total_p95_ms": environment.stats.total.get_response_time_percentile(0.95) or 0.0,
        "total_fail_ratio": environment.stats.total.fail_ratio,
    }
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / "stats.json").write_text(json.dumps(stats))


def _stop_when_all_users_done(environment: Environment) -> None:
    """With per-user quotas, quit once every user has stopped (Locust would idle on).

    ``running`` is the state after spawning completed (on a master: after every worker
    reported it), so a run that has not started yet is never taken for a finished one.
    """
    runner = environment.runner
    while runner is not None:
        gevent.sleep(0.25)
        if runner.state == "running" and runner.user_count == 0:
            log.info("every user reached its device quota: quitting")
            gevent.sleep(CSV_FLUSH_SECONDS)  # let the CSV writer record the last requests
            runner.quit()
            return


@events.init.add_listener
def _on_init(environment: Environment, **_: Any) -> None:
    if _env_int("LDP_DEVICES_PER_USER", 0) and not isinstance(environment.runner, WorkerRunner):
        gevent.spawn(_stop_when_all_users_done, environment)


@events.test_stop.add_listener
def _on_test_stop(environment: Environment, **_: Any) -> None:
    _write_truth()


@events.quitting.add_listener
def _on_quitting(environment: Environment, **_: Any) -> None:
    _write_truth()
    if TRUTH.batches:
        log.info(
            "devices %d, accepted reports %d (duplicates %d, rejected %d) in %d batches",
            TRUTH.devices,
            TRUTH.accepted,
            TRUTH.duplicates,
            TRUTH.rejected,
            TRUTH.batches,
        )
    if not isinstance(environment.runner, WorkerRunner):
        _write_stats(environment)
        environment.process_exit_code = thresholds_exit_code(environment)
