"""String metrics: discovery quality, interval coverage and cost (a benchmark, not a test).

    PYTHONPATH=. python benchmarks/bench_strings.py [--quick]
        [--section quality|coverage|cost|papers|memory|planning|languages|lengths]
        [--rows 4:1e6,8:1e5] [--runs 10] [--lengths 16,32,64] [--before TREE]

quality: precision and recall of the top 20 and top 100 found against the truth, for
n ∈ {10⁵, 10⁶, 10⁷}, ε ∈ {1, 2, 4, 8}, a synthetic vocabulary of 10⁵ words of 3–16
bytes, Zipf exponents 1.1 and 1.5 (one seeded population per cell: the figures move by a
few hundredths between seeds); also how many were found, how many of those are no word
(false discoveries), and the detection threshold.

coverage: the share of 95 % intervals that cover the truth, over fresh salts and noise,
for candidates (the true top 50, estimated by ``?candidates=``: the plain interval) and
discovered values (every value called present, its truth 0 if it is not a word), with
the plain f̂ ± 1.96σ and with the selection-adjusted interval the API reports
(:mod:`aggregator.stats.selection`); also the adjusted interval's mean width over the
plain one's and the adjusted estimate's mean error in σ.

papers: the settings the heavy-hitter papers evaluated at (n, ε, string length, k; see
:data:`PAPER_SETTINGS` and docs/benchmarks/quality.md for where each comes from), a few seeds each,
with precision, recall, F1 and NCR of the top k, how many values called present are no
word of the vocabulary (false discoveries), the detection threshold and the true
frequency of the k-th value (below the threshold, a method of this kind cannot find it).
Not in the default run (four simulations at n = 10⁷, ~6 minutes at load 5): ask for it
with ``--section papers``.

languages: the same coverage on real word-frequency lists (tests/data: the top 3,000 words
of English, German, French, Japanese and Chinese from wordfreq 3.1.1, 16-byte values), for
ε ∈ {4, 8} at n = 10⁶: per language and ε, the values called present, how many are no
word of the list (false discoveries; with the list's 3,000 words every other value is
absent) and how many of those a device could not send, the share of selection-adjusted
95 % intervals covering the truth with its binomial standard error, and the same for the
plain f̂ ± 1.96σ and for the true top 50 asked for by name. Not in the default run
(~100 discoveries, 5–10 minutes at load 5): ``--section languages``.

lengths: discovery's seconds and memory per max_length (16, 32, 64 at n = 10⁶, ε = 4,
Zipf 1.1 over 10⁵ words of 3..max_length bytes), each length in a fresh process: the
median of ``--repeat`` discoveries, what a read answered from a kept discovery computes
(the alarms' tests and the selection-adjusted intervals, kept per confidence), the
process's RSS before discovery and its peak after, tracemalloc's peak during one
discovery, and a digest of what was found (values,
estimates, variances, p-values, truncations, σ₀, values tested), so that two trees can be
compared on identical counts. ``--before TREE`` runs the same children against another
checkout (``git worktree add --detach /tmp/old main``), alternating with this one.

cost: the SDK's perturb (CSPRNG) µs per report, bytes on the wire, the codec's count
rate, discovery seconds per window and Redis bytes per window. The firehose's drain rate
through real workers is measured by ``python -m loadtests.firehose --mechanism string``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import time
import tracemalloc
import unicodedata
from dataclasses import dataclass

import numpy as np

from aggregator.analysis.string_simulation import score, simulate_counts
from aggregator.analysis.vocabulary import synthetic_vocabulary, word_list, zipf_shares
from aggregator.stats.detect import detect_sketch
from aggregator.stats.discovery import Discovery, detection_threshold, discover
from aggregator.stats.kinds import codec_for
from aggregator.stats.strings import SketchEstimator
from client_sdk.mechanisms.strings import StringSketch
from client_sdk.wire import build_report, parse_spec

VOCABULARY = 100_000
LENGTH = 16
WORD_LISTS = os.path.join(os.path.dirname(__file__), "..", "tests", "data")
LANGUAGES = ("en", "de", "fr", "ja", "zh")


def load() -> str:
    return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def quality(ns: list[int], epsilons: list[float], exponents: list[float]) -> None:
    vocab = synthetic_vocabulary(VOCABULARY, LENGTH, seed=1)
    print("\n## Discovery quality (top-k precision / recall; one seeded population per cell)")
    print(
        "| Zipf s | ε | n | found | not words | threshold | top-20 P | top-20 R | top-100 P "
        "| top-100 R | discover s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    words = {v.tobytes() for v in vocab}
    for s in exponents:
        shares = zipf_shares(VOCABULARY, s)
        for eps in epsilons:
            sketch = StringSketch(epsilon=eps, max_length=LENGTH, salt="b1")
            for n in ns:
                gen = np.random.default_rng(int(n + 100 * eps + 10 * s))
                counts, truth = simulate_counts(sketch, vocab, shares, n, gen)
                t = time.perf_counter()
                found = discover(SketchEstimator(codec_for(sketch), counts))
                took = time.perf_counter() - t
                a, b = score(found, vocab, truth, 20), score(found, vocab, truth, 100)
                thr = detection_threshold(found.null_std, found.tested)
                print(
                    f"| {s} | {eps:g} | {n:.0e} | {len(found.values)} | "
                    f"{sum(v not in words for v in found.values)} | {thr:.4f} | "
                    f"{a.precision:.2f} | {a.recall:.2f} | {b.precision:.2f} | {b.recall:.2f} | "
                    f"{took:.1f} |",
                    flush=True,
                )


COVERAGE_ROWS = ((4.0, 1_000_000), (2.0, 1_000_000), (8.0, 100_000), (1.0, 10_000_000))
"""(ε, n) of the coverage table: far above the threshold, few found, many found near the
threshold, and the lowest ε at the largest n."""


def coverage(runs: int, rows: tuple[tuple[float, int], ...] = COVERAGE_ROWS) -> None:
    vocab = synthetic_vocabulary(VOCABULARY, LENGTH, seed=1)
    index = {vocab[i].tobytes(): i for i in range(len(vocab))}
    shares = zipf_shares(VOCABULARY, 1.1)
    print(f"\n## Interval coverage (95 % intervals, {runs} populations with fresh salts)")
    print(
        "| ε | n | candidates covered | discovered, plain f̂ ± 1.96σ | discovered, "
        "selection-adjusted | adjusted / plain width | adjusted estimate − truth (σ) |"
    )
    print("|---|---|---|---|---|---|---|")
    for eps, n in rows:
        cand, plain, adj = [0, 0], [0, 0], [0, 0]
        widths, bias = [], []
        for run in range(runs):
            gen = np.random.default_rng(1000 + run)
            sketch = StringSketch(epsilon=eps, max_length=LENGTH, salt=f"{run + 1:04x}")
            counts, truth = simulate_counts(sketch, vocab, shares, n, gen)
            est = SketchEstimator(codec_for(sketch), counts)
            found = discover(est)
            share = truth / n
            top = np.argsort(-truth)[:50]
            got = found.estimate(est, vocab[top])
            se = np.sqrt(got.variance)
            inside = np.abs(got.frequency - share[top]) <= 1.96 * se
            cand[0] += int(inside.sum())
            cand[1] += len(top)
            true = np.array([share[index[v]] if v in index else 0.0 for v in found.values])
            sd = np.sqrt(found.variance)
            a = found.adjusted(0.95)
            plain[0] += int((np.abs(found.frequency - true) <= 1.96 * sd).sum())
            adj[0] += int(((a.low <= true) & (true <= a.high)).sum())
            plain[1] += len(true)
            adj[1] += len(true)
            widths.extend(((a.high - a.low) / (2 * 1.96 * sd)).tolist())
            bias.extend(((a.frequency - true) / sd).tolist())
        print(
            f"| {eps:g} | {n:.0e} | {cand[0] / cand[1]:.3f} ({cand[1]}) | "
            f"{plain[0] / max(plain[1], 1):.3f} ({plain[1]}) | "
            f"{adj[0] / max(adj[1], 1):.3f} ({adj[1]}) | "
            f"{np.mean(widths) if widths else float('nan'):.2f} | "
            f"{np.mean(bias) if bias else float('nan'):+.2f} |",
            flush=True,
        )


def _sendable(value: bytes) -> bool:
    text = value.rstrip(b"\x00")
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in text and unicodedata.is_normalized("NFC", decoded)


def languages(runs: int, epsilons: tuple[float, ...] = (4.0, 8.0), n: int = 1_000_000) -> None:
    print(f"\n## Coverage on real word lists (95 % intervals, n = {n:.0e}, {runs} populations)")
    print(
        "| language | ε | called present | not words (of them unsendable) | adjusted covered "
        "± s.e. | plain covered | top 50 by name covered |"
    )
    print("|---|---|---|---|---|---|---|")
    for eps in epsilons:
        for li, lang in enumerate(LANGUAGES):
            vocab, shares = word_list(os.path.join(WORD_LISTS, f"words_{lang}.tsv"), LENGTH)
            index = {vocab[i].tobytes(): i for i in range(len(vocab))}
            found_n = false = unsendable = adj = plain = cand = cand_n = 0
            for run in range(runs):
                gen = np.random.default_rng(1000 * run + int(eps) + 17 * li)
                sketch = StringSketch(epsilon=eps, max_length=LENGTH, salt=f"{run + 1:04x}")
                counts, truth = simulate_counts(sketch, vocab, shares, n, gen)
                est = SketchEstimator(codec_for(sketch), counts)
                found = discover(est)
                true = np.array([truth[index[v]] / n if v in index else 0.0 for v in found.values])
                a = found.adjusted(0.95)
                sd = np.sqrt(found.variance)
                found_n += len(true)
                false += sum(v not in index for v in found.values)
                unsendable += sum(not _sendable(v) for v in found.values)
                adj += int(((a.low <= true) & (true <= a.high)).sum())
                plain += int((np.abs(found.frequency - true) <= 1.96 * sd).sum())
                top = np.argsort(-truth)[:50]
                got = found.estimate(est, vocab[top])
                cand += int(
                    (np.abs(got.frequency - truth[top] / n) <= 1.96 * np.sqrt(got.variance)).sum()
                )
                cand_n += len(top)
            cov = adj / max(found_n, 1)
            se = np.sqrt(cov * (1 - cov) / max(found_n, 1))
            print(
                f"| {lang} | {eps:g} | {found_n} | {false} ({unsendable}) | {cov:.3f} ± {se:.3f} "
                f"| {plain / max(found_n, 1):.3f} | {cand / cand_n:.3f} ({cand_n}) |",
                flush=True,
            )
        print(load(), flush=True)


@dataclass(frozen=True)
class PaperSetting:
    """One paper's evaluation setting as far as our synthetic data can follow it."""

    label: str
    users: int
    epsilon: float
    length: int
    """Bytes per value (the sketch's levels)."""
    k: int
    exponent: float
    seeds: tuple[int, ...] = (1, 2, 3, 4, 5)


PAPER_SETTINGS = (
    # PEM (Wang, Li & Jha): the authors' code (vvv214/LDP_Protocols, pem/) runs top_k=32,
    # ε=4 on 6-byte AOL queries, 657,427 users; AOL is replaced by Zipf words of 3-6 bytes.
    PaperSetting("PEM AOL-6B s=1.1", 657_427, 4.0, 6, 32, 1.1),
    PaperSetting("PEM AOL-6B s=1.5", 657_427, 4.0, 6, 32, 1.5),
    PaperSetting("PEM AOL-6B s=1.1 ε=2", 657_427, 2.0, 6, 32, 1.1),
    PaperSetting("PEM AOL-6B s=1.1 ε=8", 657_427, 8.0, 6, 32, 1.1),
    # TrieHH (Zhu et al.): Sentiment140, "1.6M tweets and over 650k users" (abstract); words
    # up to 16 bytes; their ε is central (ε, δ)-DP from sampling, ours local.
    PaperSetting("TrieHH tweets ε=4", 650_000, 4.0, 16, 10, 1.1),
    PaperSetting("TrieHH tweets ε=8", 650_000, 8.0, 16, 10, 1.1),
    # Apple (CMS/SFP) and TreeHist: "hundreds of millions" / "n in the millions" of users;
    # 10⁷ is the most this machine simulates; new words up to 16 bytes.
    PaperSetting("Apple/TreeHist n=1e7 ε=4", 10_000_000, 4.0, 16, 20, 1.1, (1, 2)),
    PaperSetting("Apple/TreeHist n=1e7 ε=8", 10_000_000, 8.0, 16, 100, 1.1, (1, 2)),
)


def ncr(found: list[bytes], vocab: np.ndarray, truth: np.ndarray, k: int) -> float:
    """Normalised cumulative rank (Wang, Li & Jha): the true i-th value (1-based) is worth
    k + 1 − i; the found top k score the worth of those among the true top k, over k(k+1)/2."""
    top = np.argsort(-truth, kind="stable")[:k]
    worth = {vocab[i].tobytes(): k - r for r, i in enumerate(top)}
    return sum(worth.get(v, 0) for v in found[:k]) / (k * (k + 1) / 2)


def papers(settings: tuple[PaperSetting, ...]) -> None:
    print("\n## At the papers' settings (synthetic Zipf words; one row per seed)")
    print(
        "| setting | n | ε | bytes | k | seed | found | not words | threshold | f of k-th | P "
        "| R | F1 | NCR | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for st in settings:
        vocab = synthetic_vocabulary(VOCABULARY, st.length, seed=1)
        shares = zipf_shares(VOCABULARY, st.exponent)
        words = {v.tobytes() for v in vocab}
        for seed in st.seeds:
            sketch = StringSketch(epsilon=st.epsilon, max_length=st.length, salt=f"{seed:04x}")
            gen = np.random.default_rng(7000 + seed)
            t = time.perf_counter()
            counts, truth = simulate_counts(sketch, vocab, shares, st.users, gen)
            found = discover(SketchEstimator(codec_for(sketch), counts))
            took = time.perf_counter() - t
            a = score(found, vocab, truth, st.k)
            f1 = 2 * a.precision * a.recall / (a.precision + a.recall) if a.recall else 0.0
            kth = np.sort(truth)[::-1][st.k - 1] / st.users
            thr = detection_threshold(found.null_std, found.tested)
            print(
                f"| {st.label} | {st.users:,} | {st.epsilon:g} | {st.length} | {st.k} | {seed} "
                f"| {len(found.values)} | {sum(v not in words for v in found.values)} "
                f"| {thr:.4f} | {kth:.4f} | {a.precision:.2f} "
                f"| {a.recall:.2f} | {f1:.2f} | {ncr(found.values, vocab, truth, st.k):.2f} "
                f"| {took:.0f} |",
                flush=True,
            )
        print(load(), flush=True)


def cost() -> None:
    print("\n## Cost")
    d = parse_spec("bench.term", {"kind": "string", "max_length": LENGTH, "epsilon": 4.0})
    sketch = d.sketch
    words = ["pizza", "naïve café", "a" * 40, "münchen"]
    reps = 20_000
    t = time.perf_counter()
    for i in range(reps):
        sketch.perturb(words[i % 4])
    perturb_us = (time.perf_counter() - t) / reps * 1e6
    t = time.perf_counter()
    for i in range(reps):
        build_report(d, words[i % 4])
    report_us = (time.perf_counter() - t) / reps * 1e6
    wire = [len(json.dumps(build_report(d, w), separators=(",", ":"))) for w in words * 50]
    print(f"SDK perturb (CSPRNG): {perturb_us:.1f} µs/report; build_report: {report_us:.1f} µs")
    print(
        f"payload: at most {sketch.wire_bytes} bytes; whole report on the wire: "
        f"{np.mean(wire):.0f} bytes mean, {max(wire)} max"
    )
    codec = codec_for(sketch)
    vocab = synthetic_vocabulary(VOCABULARY, LENGTH, seed=1)
    gen = np.random.default_rng(5)
    batch = codec.encode(vocab[gen.integers(0, VOCABULARY, 200_000)], gen)
    payloads = codec.to_payloads(batch)
    t = time.perf_counter()
    for start in range(0, len(payloads), 10_000):
        codec.increments(codec.parse(payloads[start : start + 10_000]))
    rate = len(payloads) / (time.perf_counter() - t)
    print(f"codec parse + count (worker CPU, one core): {rate:,.0f} reports/s")
    print(
        f"counters per window: {sketch.counters:,} = {8 * sketch.counters / 2**20:.2f} MiB "
        f"packed (+ the allocator's rounding) per window per shard"
    )
    for n in (100_000, 1_000_000, 10_000_000):
        counts, _ = simulate_counts(sketch, vocab, zipf_shares(VOCABULARY, 1.1), n, gen)
        t = time.perf_counter()
        discover(SketchEstimator(codec, counts))
        print(f"discovery at n = {n:.0e}: {time.perf_counter() - t:.1f} s", flush=True)


def memory(ns: list[int]) -> None:
    """Redis bytes of one window of a string metric after n reports, through the real
    commit path (an embedded redis-server, one worker): the counts hash, the delta list
    and the packed string, MEMORY USAGE … SAMPLES 0 each."""
    import tempfile
    from pathlib import Path

    from aggregator.stream.worker import Worker
    from ldp_store import keys
    from ldp_store.embedded import EmbeddedRedis
    from ldp_store.registry import Registry

    print("\n## Redis memory of one window (ε = 4, max_length 16: 262,144 counters)")
    print("| reports | counts hash | delta list | packed string | window total | per report |")
    print("|---|---|---|---|---|---|")
    vocab = synthetic_vocabulary(VOCABULARY, LENGTH, seed=1)
    shares = zipf_shares(VOCABULARY, 1.1)
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedRedis(Path(folder), extra=["--appendonly", "no", "--save", ""])
        with server:
            client = server.client()
            spec = {"kind": "string", "max_length": LENGTH, "epsilon": 4.0}
            for n in ns:
                d = Registry(client).put(f"bench.memory.{n}", spec).definition
                codec = codec_for(d.mechanism)
                gen = np.random.default_rng(n)
                stream = keys.stream_key(d.name, d.version)
                for start in range(0, n, 100_000):
                    size = min(100_000, n - start)
                    batch = codec.encode(vocab[gen.choice(VOCABULARY, size, p=shares)], gen)
                    with client.pipeline(transaction=False) as pipe:
                        for payload in codec.to_payloads(batch):
                            pipe.xadd(stream, {"p": json.dumps(payload, separators=(",", ":"))})
                        pipe.execute()
                    Worker(client, handle_signals=False).run(once=True)
                sizes = [
                    client.memory_usage(k, samples=0) or 0
                    for k in keys.window_keys(d.name, d.version, "all")
                ]
                total = sum(sizes)
                print(
                    f"| {n:,} | {sizes[0]:,} | {sizes[1 + 1]:,} | {sizes[1]:,} | {total:,} | "
                    f"{total / n:.1f} B |",
                    flush=True,
                )


PLANNING_POINTS = [(8.0, 6, 0.02, 24), (6.0, 8, 0.02, 24), (4.0, 8, 0.05, 24), (4.0, 16, 0.01, 8)]
"""(ε, max_length, frequency, runs): the small-population settings where the normal-only
planner was 2–8× optimistic, and one with a few hundred thousand users."""


def planning(points: list[tuple[float, int, float, int]]) -> None:
    """The planner's "users to find f" against discovery: at ½, 1 and 2 times the planned
    n, how often a planted full-length value of frequency f (the planner's worst case) is
    found among a uniform background of 20,000 other random full-length values."""
    from aggregator.stats.discovery import decoys
    from aggregator.stats.string_planning import users_to_find

    print("\n## Planning against discovery (planned power 0.5)")
    print("| ε | bytes | f | planned n | found at n/2 | found at n | found at 2n |")
    print("|---|---|---|---|---|---|---|")
    for eps, length, f, runs in points:
        planned = users_to_find(StringSketch(epsilon=eps, max_length=length), f).users
        assert planned is not None
        cells = []
        for factor in (0.5, 1.0, 2.0):
            n = int(planned * factor)
            hits = 0
            for run in range(runs):
                gen = np.random.default_rng(run)
                sketch = StringSketch(epsilon=eps, max_length=length, salt=f"{run + 1:04x}")
                vocab = decoys(length, length, 20_001, seed=run)
                vocab[:] = gen.integers(ord("a"), ord("z") + 1, vocab.shape)  # sendable: ASCII
                shares = np.full(len(vocab), (1 - f) / (len(vocab) - 1))
                shares[0] = f
                counts, _ = simulate_counts(sketch, vocab, shares, n, gen)
                found = discover(SketchEstimator(codec_for(sketch), counts))
                hits += vocab[0].tobytes() in set(found.values)
            cells.append(f"{hits}/{runs}")
        print(
            f"| {eps:g} | {length} | {f:g} | {planned:,} | " + " | ".join(cells) + " |", flush=True
        )


LENGTH_USERS = 1_000_000
"""Reports of the lengths section's window."""


def _rss_mib() -> float:
    """The process's resident set now (Linux ``/proc``), MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _digest(found: Discovery) -> str:
    """A digest of everything a discovery reports (bit for bit)."""
    h = hashlib.sha256()
    h.update(b"".join(found.values))
    for a in (found.frequency, found.variance, found.null_variance, found.p_values):
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(found.truncation, dtype=np.float64).tobytes())
    h.update(f"{found.null_std!r} {found.tested} {found.alpha!r}".encode())
    return h.hexdigest()[:16]


def length_child(length: int, repeat: int) -> None:
    """One length in this process (``--child``): a JSON line of time, memory and digest."""
    from aggregator.stats.lazy import scipy_stats

    scipy_stats()  # the first discovery of a process imports scipy.stats: not its cost
    sketch = StringSketch(epsilon=4.0, max_length=length, salt="b1")
    vocab = synthetic_vocabulary(VOCABULARY, length, seed=1)
    gen = np.random.default_rng(length)
    counts, _ = simulate_counts(sketch, vocab, zipf_shares(VOCABULARY, 1.1), LENGTH_USERS, gen)
    est = SketchEstimator(codec_for(sketch), counts)
    del vocab
    rss_before = _rss_mib()
    took, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        found = discover(SketchEstimator(codec_for(sketch), counts))
        took.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    found.adjusted(0.95)  # kept with the discovery: a read after the first reuses it
    kept = []
    for _ in range(repeat):
        c = time.process_time()
        detect_sketch(est, "all", found.values, found.known)
        found.adjusted(0.95)
        kept.append(time.process_time() - c)
    tracemalloc.start()
    discover(est)
    traced = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    out = {
        "length": length,
        "seconds": float(np.median(took)),
        "runs": [round(x, 2) for x in took],
        "cpu": float(np.median(cpu)),
        "kept_ms": 1000 * float(np.median(kept)),
        "rss_before": rss_before,
        "peak_rss": peak_rss,
        "traced_peak": traced,
        "found": len(found.values),
        "tested": found.tested,
        "digest": _digest(found),
        "load": os.getloadavg()[0],
    }
    print(json.dumps(out), flush=True)


def lengths(sizes: list[int], repeat: int, before: str | None) -> None:
    """Discovery's cost per max_length, each in a fresh process (see the module's docstring),
    for this tree and optionally ``before``, alternating."""
    import subprocess
    import sys

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [("after", here)] if before is None else [("before", before), ("after", here)]
    print(f"\n## Discovery per max_length (n = {LENGTH_USERS:.0e}, ε = 4, Zipf 1.1)")
    print(
        "| tree | max_length | s (median) | runs | CPU s | read from a kept discovery, CPU ms "
        "| RSS before → peak (MiB) | traced peak (MiB) | found / tested | digest | load (1 min) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for length in sizes:
        for label, tree in trees:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
            script = os.path.abspath(__file__)
            args = [sys.executable, script, "--child", str(length), "--repeat", str(repeat)]
            run = subprocess.run(args, env=env, cwd="/", capture_output=True, text=True, check=True)
            r = json.loads(run.stdout.strip().splitlines()[-1])
            print(
                f"| {label} | {length} | {r['seconds']:.2f} | {r['runs']} | {r['cpu']:.2f} | "
                f"{r['kept_ms']:.1f} | "
                f"{r['rss_before']:.0f} → {r['peak_rss']:.0f} | {r['traced_peak']:.0f} | "
                f"{r['found']} / {r['tested']} | {r['digest']} | {r['load']:.2f} |",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--section",
        choices=[
            "quality",
            "coverage",
            "cost",
            "papers",
            "memory",
            "planning",
            "languages",
            "lengths",
        ],
        action="append",
    )
    ap.add_argument(
        "--rows", help="coverage rows as eps:n,eps:n (default: the four of COVERAGE_ROWS)"
    )
    ap.add_argument("--runs", type=int, help="coverage populations per row (default 10)")
    ap.add_argument("--lengths", default="16,32,64", help="max_lengths of the lengths section")
    ap.add_argument("--repeat", type=int, default=3, help="discoveries per length (median)")
    ap.add_argument("--before", help="another checkout to run the lengths section against")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        length_child(args.child, args.repeat)
        return
    sections = args.section or ["cost", "quality", "coverage"]
    print(load())
    if "cost" in sections:
        cost()
    if "quality" in sections:
        if args.quick:
            quality([1_000_000], [4.0], [1.1])
        else:
            quality([100_000, 1_000_000, 10_000_000], [1.0, 2.0, 4.0, 8.0], [1.1, 1.5])
    if "coverage" in sections:
        rows = COVERAGE_ROWS
        if args.rows:
            rows = tuple(
                (float(e), int(float(n)))
                for e, n in (pair.split(":") for pair in args.rows.split(","))
            )
        coverage(args.runs or (3 if args.quick else 10), rows)
    if "languages" in sections:
        languages(args.runs or (2 if args.quick else 10))
    if "planning" in sections:
        planning(PLANNING_POINTS[:1] if args.quick else PLANNING_POINTS)
    if "memory" in sections:
        memory([10_000, 100_000, 1_000_000] if not args.quick else [10_000, 100_000])
    if "papers" in sections:
        papers(PAPER_SETTINGS[:1] if args.quick else PAPER_SETTINGS)
    if "lengths" in sections:
        lengths([int(x) for x in args.lengths.split(",")], args.repeat, args.before)
    print(load())


if __name__ == "__main__":
    main()
