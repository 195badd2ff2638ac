"""Firehose: N perturbed reports straight into a metric's stream, then time the drain.

In full: ``docs/guides/deployment.md``.
"""

from __future__ import annotations

import argparse
import binascii
import itertools
import os
import queue
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from aggregator.stats.batch import Batch
from aggregator.stats.codecs import FrequencyCodec
from aggregator.stats.kinds import codec_for

if TYPE_CHECKING:
    import redis

    from client_sdk.wire import MetricDefinition

__all__ = [
    "CHUNK",
    "FirehoseResult",
    "LOADERS",
    "main",
    "perturb",
    "render",
    "run",
    "true_values",
]

ROOT = Path(__file__).resolve().parents[1]

CHUNK = 100_000
"""Reports generated per step: the numpy work arrays of OUE k = 64 are ~50 MB at this
size (random floats for 64 bits a report), so 10 M reports never need 10 M Python objects
or more than a few hundred MB at once."""

SCRIPT_BATCH = 2_000
"""Reports per Lua loader call (~40 KB of OUE k = 64 payloads; the calls of a chunk go in one
pipeline). Measured at 1 M reports: 2k and 10k a call within 10 % of each other, 50k
15–20 % slower; a small call also blocks Redis for only a few ms."""

QUEUE_DEPTH = 4
"""Chunks rendered ahead of the writer: one core renders while Redis appends on the other."""

LOADERS = ("lua", "pipeline")

_LOADER = """
-- KEYS[1]: the stream; ARGV[1]: payloads, each followed by one newline
local n = 0
for payload in string.gmatch(ARGV[1], '([^\\n]+)\\n') do
  redis.call('XADD', KEYS[1], '*', 'p', payload)
  n = n + 1
end
return n
"""

DRAIN_TIMEOUT = 1800.0
"""Seconds the workers may take before the run is declared failed (10 M reports drain in
a few minutes on a laptop; half an hour means something is stuck)."""

_NEWLINE = ord("\n")

Part = tuple[np.ndarray, np.ndarray | None]
"""One field of a rendered payload: (n, w) uint8 cells and the mask of cells in use
(None: all of them)."""


# -- perturbation ---------------------------------------------------------------------------


def true_values(gen: np.random.Generator, shares: np.ndarray, n: int) -> np.ndarray:
    """``n`` true values drawn independently with probabilities ``shares``."""
    return np.asarray(gen.choice(len(shares), size=n, p=shares), dtype=np.int64)


def perturb(codec: FrequencyCodec, values: np.ndarray, gen: np.random.Generator) -> Batch:
    """Perturb true values in bulk: the codec samples with the mechanism's own p*, q*, etc.

    Not for devices: ``gen`` is a seeded numpy generator (see the module docstring).
    """
    return codec.encode(np.asarray(values, dtype=np.int64), gen)


# -- rendering: columns → the collector's stored bytes ---------------------------------------


def _const(text: str, n: int) -> Part:
    cells = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.broadcast_to(cells, (n, len(cells))), None


def _decimal(col: np.ndarray) -> Part:
    """Non-negative integers as decimal digits, right-aligned, with the used cells masked."""
    col = np.asarray(col, dtype=np.int64)
    if col.size and col.min() < 0:
        raise ValueError("payload integers are non-negative")
    width = len(str(int(col.max()))) if col.size else 1
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    digits = (col[:, None] // powers) % 10 + ord("0")
    used = (col[:, None] >= powers) | (powers == 1)
    return digits.astype(np.uint8), used


def _base64(rows: np.ndarray) -> Part:
    """Standard base64 (with ``=`` padding) of each row of bytes, vectorized.

    Rows are zero-padded to whole 3-byte groups and encoded in one call; the characters
    that encode only padding bytes become ``=``, exactly as ``base64.b64encode`` of each
    row alone (which also fills the last partial sextet with zero bits).
    """
    n, nbytes = rows.shape
    groups = -(-nbytes // 3)
    padded = np.zeros((n, 3 * groups), dtype=np.uint8)
    padded[:, :nbytes] = rows
    text = binascii.b2a_base64(padded.tobytes(), newline=False)
    cells = np.frombuffer(text, dtype=np.uint8).reshape(n, 4 * groups).copy()
    fill = 3 * groups - nbytes
    if fill:
        cells[:, -fill:] = ord("=")
    return cells, None


def _fields(batch: Batch) -> list[Part]:
    """The parts of ``{"key":value,...}`` for a batch, in the SDK payload's key order.

    The columns say the layout (every codec columnizes its payload's keys in order):
    unary encodings' packed ``bits`` are base64 text under ``b``; a 2-D ``v`` is subset
    selection's list; any other column is one integer field.
    """
    n = batch.n
    if "bits" in batch.columns:  # {"b":"<base64 of the packed bits>"}
        return [_const('{"b":"', n), _base64(batch.columns["bits"]), _const('"}', n)]
    matrix = batch.columns.get("v")
    if matrix is not None and matrix.ndim == 2:  # {"v":[v1,...,vs]}
        parts = [_const('{"v":[', n)]
        for i in range(matrix.shape[1]):
            if i:
                parts.append(_const(",", n))
            parts.append(_decimal(matrix[:, i]))
        return [*parts, _const("]}", n)]
    # rr, grr: {"v":v}; olh, blh: {"a":a,"b":b,"y":y}; hr: {"j":j}
    parts = []
    for i, (name, col) in enumerate(batch.columns.items()):
        parts.append(_const(("{" if i == 0 else ",") + f'"{name}":', n))
        parts.append(_decimal(col))
    return [*parts, _const("}", n)]


def render(batch: Batch) -> bytes:
    """The payloads of a batch as compact JSON, each followed by a newline.

    Byte for byte what the collector stores in the stream's ``p`` field for the same
    payloads (``json.dumps(payload, separators=(",", ":"))`` of the SDK's ``perturb``
    output; ``tests/test_firehose.py`` checks it against the SDK for every mechanism).
    Compact JSON of these payloads never contains a newline, so it separates them.
    """
    parts = [*_fields(batch), _const("\n", batch.n)]
    cells = np.concatenate([c for c, _ in parts], axis=1)
    if all(m is None for _, m in parts):
        return cells.tobytes()
    mask = np.concatenate(
        [np.ones(c.shape, dtype=bool) if m is None else m for c, m in parts], axis=1
    )
    return cells[mask].tobytes()


def _slices(batch: Batch, step: int) -> Iterator[Batch]:
    for start in range(0, batch.n, step):
        cols = {name: col[start : start + step] for name, col in batch.columns.items()}
        yield Batch(len(next(iter(cols.values()))), cols)


# -- loading ---------------------------------------------------------------------------------


@dataclass
class FirehoseResult:
    """The figures of one run and the checks' verdicts."""

    mechanism: str
    k: int
    epsilon: float
    reports: int
    loader: str
    workers: int
    metric: str = ""
    load_seconds: float = 0.0
    drain_seconds: float = 0.0
    counted: int = 0
    dead_lettered: int = 0
    pending: int = 0
    misses: int = 0
    intervals: int = 0
    miss_limit: int = 0
    max_abs_z: float = 0.0
    drain_worker_cpu: float = 0.0
    """CPU seconds (user + system) of all worker processes together."""
    drain_redis_cpu: float | None = None
    """CPU seconds of the embedded redis-server during the drain (None: not ours to read)."""
    truth: list[int] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    vocabulary: np.ndarray | None = field(default=None, repr=False)
    """A string metric's padded words (the truth counts each)."""
    recall20: float | None = None
    """A string metric: the share of the true top 20 among the 20 found first."""
    discovery_seconds: float = 0.0

    @property
    def load_rate(self) -> float:
        """Reports appended per second."""
        return self.reports / max(self.load_seconds, 1e-9)

    @property
    def drain_rate(self) -> float:
        """Reports counted per second of drain wall time (worker start-up included)."""
        return self.counted / max(self.drain_seconds, 1e-9)


def _blobs(
    codec: FrequencyCodec,
    shares: np.ndarray,
    reports: int,
    gen: np.random.Generator,
    truth: np.ndarray,
    vocabulary: np.ndarray | None = None,
) -> Iterator[list[bytes]]:
    """Per chunk: the rendered blobs of its loader calls; adds the true values to ``truth``.

    A string metric's values are indices into ``vocabulary`` (padded words), whose rows
    the string codec perturbs.
    """
    for start in range(0, reports, CHUNK):
        values = true_values(gen, shares, min(CHUNK, reports - start))
        truth += np.bincount(values, minlength=len(truth))
        if vocabulary is not None:
            batch = codec.encode(vocabulary[values], gen)
            yield [render(part) for part in _slices(batch, SCRIPT_BATCH)]
            continue
        batch = perturb(codec, values, gen)
        yield [render(part) for part in _slices(batch, SCRIPT_BATCH)]


def _ahead(source: Iterator[list[bytes]], depth: int) -> Iterator[list[bytes]]:
    """Run ``source`` in a thread, ``depth`` items ahead (numpy and sockets release the GIL)."""
    box: queue.Queue[Any] = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def put(item: Any) -> bool:
        """Queue ``item`` unless the consumer has gone; False once it has."""
        while not stop.is_set():
            try:
                box.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in source:
                if not put(item):
                    return
            put(done)
        except BaseException as exc:  # re-raised in the consumer
            put(exc)

    thread = threading.Thread(target=produce, name="firehose-render", daemon=True)
    thread.start()
    try:
        while True:
            item = box.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def _shards(definition: MetricDefinition) -> int:
    """Stream shards of a metric version (1 where definitions have no ``shards`` yet)."""
    return int(getattr(definition, "shards", 1))


def _writer(client: redis.Redis, streams: list[str], loader: str) -> Callable[[list[bytes]], int]:
    """A function appending one chunk's blobs to the streams; returns the entries added.

    Blobs go to the shard streams in turn (each loader call touches one stream, so one
    hash slot), as the collector spreads reports evenly over a version's shards.
    """
    turn = itertools.cycle(streams)
    if loader == "lua":
        script = client.register_script(_LOADER)

        def write_lua(blobs: list[bytes]) -> int:
            with client.pipeline(transaction=False) as pipe:
                for blob in blobs:
                    script(keys=[next(turn)], args=[blob], client=pipe)
                return sum(int(x) for x in pipe.execute())

        return write_lua
    if loader == "pipeline":

        def write_pipeline(blobs: list[bytes]) -> int:
            added = 0
            with client.pipeline(transaction=False) as pipe:
                for blob in blobs:
                    stream = next(turn)
                    for payload in blob.split(b"\n")[:-1]:
                        pipe.execute_command("XADD", stream, "*", "p", payload)
                    added += len(pipe.execute())
            return added

        return write_pipeline
    raise ValueError(f"unknown loader {loader!r}; one of {', '.join(LOADERS)}")


def load(
    client: redis.Redis,
    definition: MetricDefinition,
    reports: int,
    shares: np.ndarray,
    gen: np.random.Generator,
    loader: str = "lua",
    progress: Callable[[int], None] | None = None,
    vocabulary: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Append ``reports`` perturbed reports to the metric version's stream (or shards).

    Args:
        client: a redis-py client.
        definition: the metric version (a categorical :class:`MetricDefinition`).
        reports: how many.
        shares: the true-value distribution over 0..k-1.
        gen: the numpy generator for values and noise.
        loader: ``lua`` (one script call per :data:`SCRIPT_BATCH` reports) or
            ``pipeline`` (one XADD per report, pipelined).
        progress: called with the number of reports appended after each chunk.
        vocabulary: a string metric's padded words (``shares`` is then over them).

    Returns:
        (the true-value counts, the seconds it took).

    Raises:
        RuntimeError: Redis appended a different number of entries than sent.
    """
    from ldp_store import keys  # noqa: PLC0415

    codec = codec_for(definition.mechanism)  # type: ignore[arg-type]
    streams = [
        keys.stream_key(definition.name, definition.version, shard)
        for shard in range(_shards(definition))
    ]
    write = _writer(client, streams, loader)
    truth = np.zeros(len(shares), dtype=np.int64)
    start = time.perf_counter()
    source = _blobs(codec, shares, reports, gen, truth, vocabulary)
    for blobs in _ahead(source, QUEUE_DEPTH):
        added = write(blobs)
        expected = sum(blob.count(b"\n") for blob in blobs)
        if added != expected:
            raise RuntimeError(f"Redis appended {added} of {expected} entries")
        if progress is not None:
            progress(added)
    return truth, time.perf_counter() - start


# -- draining and checking -------------------------------------------------------------------


def _process_cpu(pid: int | None) -> float | None:
    """User + system CPU seconds of a process so far, from /proc (Linux); None elsewhere."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain(url: str, workers: int, batch_size: int | None = None) -> tuple[float, list[str]]:
    """Start ``workers`` ``ldp aggregate --once`` processes and wait for all of them.

    Returns:
        (wall seconds from the first start to the last exit, problems such as exit codes).
    """
    procs = []
    start = time.perf_counter()
    for i in range(workers):
        cmd = [sys.executable, "-m", "ldp_server", "aggregate", "--once"]
        cmd += ["--redis-url", url, "--name", f"w{i}"]
        if batch_size:
            cmd += ["--batch-size", str(batch_size)]
        procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True))
    problems = []
    try:
        for i, proc in enumerate(procs):
            remaining = max(1.0, DRAIN_TIMEOUT - (time.perf_counter() - start))
            out, _ = proc.communicate(timeout=remaining)
            if out.strip():
                print(out.strip())
            if proc.returncode != 0:
                problems.append(f"worker w{i} exited with {proc.returncode}")
    except subprocess.TimeoutExpired:
        problems.append(f"the workers did not finish within {DRAIN_TIMEOUT:.0f} s")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return time.perf_counter() - start, problems


def check(
    client: redis.Redis, definition: MetricDefinition, truth: np.ndarray, result: FirehoseResult
) -> None:
    """Compare what the aggregator committed with what was loaded; failures go to ``result``."""
    from aggregator.query.window import lag_details, read_counts  # noqa: PLC0415
    from aggregator.stats.frequency import estimate_from_counts  # noqa: PLC0415
    from ldp_store import keys  # noqa: PLC0415
    from loadtests.run import miss_bound  # noqa: PLC0415

    counts = read_counts(client, definition)
    result.counted = counts.n
    n = int(truth.sum())
    if counts.n != n:
        result.failed.append(f"aggregator n = {counts.n:,}, loaded {n:,}")
    result.dead_lettered = sum(
        int(client.xlen(keys.dead_key(definition.name, definition.version, shard)))
        for shard in range(_shards(definition))
    )
    if result.dead_lettered:
        result.failed.append(f"{result.dead_lettered:,} entries were dead-lettered")
    result.pending = int(lag_details(client, definition).pending)
    if result.pending:
        result.failed.append(f"{result.pending:,} entries are still pending")
    if counts.n == 0:
        result.failed.append("nothing was counted")
        return
    if definition.kind == "string":
        _check_strings(definition, counts, truth, result)
        return
    est = estimate_from_counts(definition.oracle, counts, confidence=0.95)
    share = truth / n
    inside = (est.ci_low <= share) & (share <= est.ci_high)
    result.intervals = len(share)
    result.misses = int((~inside).sum())
    result.max_abs_z = float(np.max(np.abs(est.frequencies - share) / est.std_errors))
    result.miss_limit = miss_bound(result.intervals)
    if result.misses > result.miss_limit:
        result.failed.append(
            f"{result.misses} of {result.intervals} intervals missed the truth "
            f"(> {result.miss_limit}: improbable at a 5 % miss rate)"
        )


def _check_strings(
    definition: MetricDefinition, counts: Any, truth: np.ndarray, result: FirehoseResult
) -> None:
    """A string metric: discover from the committed counts; the top 20's recall, and the
    discovery's seconds (the truth's words are the vocabulary's, kept on ``result``)."""
    from aggregator.stats.discovery import discover  # noqa: PLC0415
    from aggregator.stats.strings import SketchEstimator  # noqa: PLC0415

    start = time.perf_counter()
    found = discover(SketchEstimator(codec_for(definition.sketch), counts))
    result.discovery_seconds = time.perf_counter() - start
    assert result.vocabulary is not None
    top = {result.vocabulary[i].tobytes() for i in np.argsort(-truth, kind="stable")[:20]}
    result.recall20 = sum(v in top for v in found.values[:20]) / 20


def run(args: argparse.Namespace, url: str | None = None) -> FirehoseResult:
    """Create the metric, load, drain (unless ``args.no_drain``) and check.

    Args:
        args: the parsed command line (see :func:`main`).
        url: the Redis to use; default ``args.redis_url``, else an embedded server.
    """
    import redis  # noqa: PLC0415

    from aggregator.analysis.simulation import distribution  # noqa: PLC0415
    from aggregator.cli.console import progress_bar  # noqa: PLC0415
    from ldp_store.embedded import EmbeddedRedis  # noqa: PLC0415
    from ldp_store.registry import Registry  # noqa: PLC0415

    result = FirehoseResult(
        mechanism=args.mechanism,
        k=args.domain_size,
        epsilon=args.epsilon,
        reports=args.reports,
        loader=args.loader,
        workers=args.workers,
    )
    url = url or args.redis_url
    with tempfile.TemporaryDirectory(prefix="ldp-firehose-") as tmp:
        server = None
        if url is None:
            server = EmbeddedRedis(tmp).start()
            url = server.url
        try:
            client = redis.Redis.from_url(url)
            name = args.metric or f"firehose.{args.mechanism}.{time.time_ns() // 1000}"
            spec: dict[str, Any] = {
                "domain": [f"v{i}" for i in range(args.domain_size)],
                "epsilon": args.epsilon,
                "mechanism": args.mechanism,
                "description": "loadtests.firehose",
            }
            if args.mechanism == "string":  # -k: the synthetic vocabulary's size
                from aggregator.analysis.vocabulary import synthetic_vocabulary  # noqa: PLC0415

                spec = {"kind": "string", "max_length": args.max_length, "epsilon": args.epsilon}
                result.vocabulary = synthetic_vocabulary(args.domain_size, args.max_length, 1)
            if args.shards != 1:
                spec["shards"] = args.shards
            definition = Registry(client).put(name, spec).definition
            result.metric = f"{definition.name} v{definition.version}"
            if _shards(definition) > 1:
                result.metric += f" ({_shards(definition)} shards)"
            shares = distribution(args.distribution, args.domain_size, args.zipf_s)
            gen = np.random.default_rng(args.seed)
            with progress_bar(
                f"loading {definition.mechanism.name}", args.reports, enabled=not args.quiet
            ) as advance:
                truth, result.load_seconds = load(
                    client,
                    definition,
                    args.reports,
                    shares,
                    gen,
                    args.loader,
                    advance,
                    result.vocabulary,
                )
            result.truth = truth.tolist()
            _say(args, f"loaded {args.reports:,} {definition.mechanism.name} k={args.domain_size} "
                       f"ε={args.epsilon:g} ({args.loader}) in {result.load_seconds:.1f} s: "
                       f"{result.load_rate:,.0f} reports/s")  # fmt: skip
            if args.no_drain:
                return result
            redis_pid = server.process.pid if server and server.process else None
            redis_cpu = _process_cpu(redis_pid)
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            result.drain_seconds, problems = drain(url, args.workers, args.batch_size)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            result.drain_worker_cpu = (after.ru_utime - children.ru_utime) + (
                after.ru_stime - children.ru_stime
            )
            redis_after = _process_cpu(redis_pid)
            if redis_cpu is not None and redis_after is not None:
                result.drain_redis_cpu = redis_after - redis_cpu
            result.failed += problems
            check(client, definition, truth, result)
        finally:
            if server is not None:
                server.stop()
    return result


def _say(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(text, flush=True)


def _print(result: FirehoseResult, args: argparse.Namespace) -> None:
    r = result
    lines = [
        f"metric        {r.metric}: {r.mechanism} k={r.k} ε={r.epsilon:g}",
        f"load          {r.reports:,} reports in {r.load_seconds:.1f} s: "
        f"{r.load_rate:,.0f} reports/s ({r.loader})",
    ]
    if not args.no_drain:
        lines += [
            f"drain         {r.counted:,} reports in {r.drain_seconds:.1f} s wall "
            f"({r.workers} worker{'s' if r.workers != 1 else ''}, start-up included): "
            f"{r.drain_rate:,.0f} reports/s",
            f"drain CPU     workers {r.drain_worker_cpu:.1f} s, redis-server "
            + ("n/a" if r.drain_redis_cpu is None else f"{r.drain_redis_cpu:.1f} s")
            + f" (of {r.drain_seconds:.1f} s wall)",
        ]
        if r.recall20 is not None:
            lines.append(
                f"discovery     top-20 recall {r.recall20:.2f} in {r.discovery_seconds:.1f} s"
            )
        else:
            lines.append(
                f"intervals     {r.misses} of {r.intervals} missed the truth "
                f"(limit {r.miss_limit}); max |f̂ − f|/se = {r.max_abs_z:.2f}"
            )
    print("\n".join(lines))
    if r.failed:
        print("FAILED:\n  " + "\n  ".join(r.failed))
    elif not args.no_drain:
        print("PASSED")


def parser() -> argparse.ArgumentParser:
    """The command line."""
    from aggregator.analysis.simulation import DISTRIBUTIONS  # noqa: PLC0415

    ap = argparse.ArgumentParser(
        prog="python -m loadtests.firehose",
        description=__doc__.split("\n\n")[0] if __doc__ else "",
    )
    ap.add_argument("--reports", "-n", type=int, default=10_000_000)
    ap.add_argument("--mechanism", "-m", default="oue",
                    choices=[*"rr grr sue oue olh blh hr ss string".split()])  # fmt: skip
    ap.add_argument("--max-length", type=int, default=16,
                    help="string: bytes per value (-k is then the vocabulary's size)")  # fmt: skip
    ap.add_argument("--domain-size", "-k", type=int, default=64)
    ap.add_argument("--epsilon", "-e", type=float, default=1.0)
    ap.add_argument("--distribution", default="zipf", choices=DISTRIBUTIONS)
    ap.add_argument("--zipf-s", type=float, default=1.1, help="zipf exponent")
    ap.add_argument("--workers", "-w", type=int, default=2, help="ldp aggregate --once processes")
    ap.add_argument("--batch-size", type=int, default=None, help="the workers' --batch-size")
    ap.add_argument("--loader", default="lua", choices=LOADERS)
    ap.add_argument("--shards", type=int, default=1, help="stream shards of the metric")
    ap.add_argument("--redis-url", default=None, help="default: an embedded redis-server")
    ap.add_argument("--metric", default=None, help="metric name [default: firehose.<mech>.<µs>]")
    ap.add_argument("--seed", type=int, default=None, help="numpy seed [default: fresh]")
    ap.add_argument("--no-drain", action="store_true", help="load only")
    ap.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run, print the figures; 0 if every check passed."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.reports < 1 or args.workers < 1:
        ap.error("--reports and --workers must be positive")
    if args.mechanism == "rr" and args.domain_size != 2:
        ap.error("rr is binary: use -k 2")
    result = run(args)
    _print(result, args)
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
