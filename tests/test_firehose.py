"""The firehose load tool writes exactly what the SDK and the collector would, with the SDK's law.

Three guards keep ``loadtests.firehose`` from drifting from the protocol:

* its rendered bytes equal the compact JSON of the SDK's own ``perturb`` payloads, and
  every payload it writes passes the collector's checker (``check_report``);
* the output law of its vectorized perturbation, for a fixed true value, matches the
  exact output probabilities the SDK's mechanism objects declare (χ², fixed seeds), and so
  does a sample of the SDK's ``perturb`` itself;
* a real run against Redis and ``ldp aggregate --once`` counts every report exactly once
  and lands within 4.5 σ of the truth per value, σ from the mechanism's variance.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import redis
from scipy.stats import chisquare

from aggregator.query.window import read_counts
from aggregator.stats.frequency import estimate_from_counts
from aggregator.stats.kinds import codec_for
from client_sdk import mechanisms
from client_sdk.mechanisms import FrequencyOracle
from client_sdk.wire import MetricDefinition, check_report, new_report_id
from ldp_store import streams
from ldp_store.registry import Registry
from loadtests import firehose

# (mechanism, k): several k per unary encoding, for each base64 padding (k/8 mod 3).
FORMATS = [
    ("rr", 2),
    ("grr", 16),
    ("sue", 10),
    ("oue", 64),
    ("oue", 7),
    ("oue", 65),
    ("olh", 100),
    ("blh", 30),
    ("hr", 50),
    ("ss", 20),
]


def _mechanism(name: str, k: int, epsilon: float = 1.0) -> FrequencyOracle:
    return mechanisms.create(name, epsilon=epsilon, domain_size=k)


def _compact(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def _firehose_payloads(m: FrequencyOracle, values: np.ndarray, seed: int) -> list[bytes]:
    codec = codec_for(m)
    blob = firehose.render(firehose.perturb(codec, values, np.random.default_rng(seed)))
    assert blob.endswith(b"\n")
    return blob.split(b"\n")[:-1]


@pytest.mark.parametrize(("name", "k"), FORMATS)
def test_rendered_bytes_are_the_sdk_payloads_compact_json(name: str, k: int) -> None:
    m = _mechanism(name, k)
    rng = random.Random(2024)
    payloads = [m.perturb(rng.randrange(k), rng) for _ in range(2000)]
    codec = codec_for(m)
    rendered = firehose.render(codec.parse(payloads))
    assert rendered == b"".join(_compact(p) + b"\n" for p in payloads)


@pytest.mark.parametrize(("name", "k"), FORMATS)
def test_every_firehose_payload_passes_the_collectors_checker(name: str, k: int) -> None:
    m = _mechanism(name, k)
    definition = MetricDefinition(
        name="fh.check", version=3, domain=tuple(f"v{i}" for i in range(k)), mechanism=m
    )

    def lookup(metric: str, version: int) -> MetricDefinition | None:
        return definition if (metric, version) == ("fh.check", 3) else None

    values = firehose.true_values(np.random.default_rng(1), np.full(k, 1 / k), 3000)
    for line in _firehose_payloads(m, values, seed=2):
        report = {"metric": "fh.check", "version": 3, "id": new_report_id()}
        report["payload"] = json.loads(line)
        _, _, canonical = check_report(report, lookup)
        assert _compact(canonical) == line  # what the collector would store, byte for byte


# -- the output law of one true value -----------------------------------------------------------

Outcome = Callable[[dict[str, Any]], Any]


def _law(m: FrequencyOracle, v: int) -> tuple[dict[Any, float], Outcome]:
    """Every output of ``m.perturb(v)`` with its exact probability, from the SDK's attributes."""
    k = m.domain_size
    law: dict[Any, float] = {}
    if isinstance(m, mechanisms.GeneralizedRR):  # rr, grr
        return {u: m.p if u == v else m.q for u in range(k)}, lambda p: p["v"]
    if isinstance(m, (mechanisms.OptimizedUnaryEncoding, mechanisms.SymmetricUnaryEncoding)):
        for bits in itertools.product((0, 1), repeat=k):
            prob = 1.0
            for u, bit in enumerate(bits):
                one = m.p if u == v else m.q
                prob *= one if bit else 1 - one
            law[bits] = prob
        return law, lambda p: tuple(int(m.supports(p, u)) for u in range(k))
    if isinstance(m, mechanisms.LocalHashing):  # olh, blh: (a, b, y) with a, b uniform
        P, g = m.prime, m.g
        hashes = 1 / ((P - 1) * P)
        law = {
            (a, b, y): hashes * (m.keep if y == m.hash(a, b, v) else (1 - m.keep) / (g - 1))
            for a in range(1, P)
            for b in range(P)
            for y in range(g)
        }
        return law, lambda p: (p["a"], p["b"], p["y"])
    if isinstance(m, mechanisms.HadamardResponse):  # j uniform on C_v w.p. p, else off it
        half = m.order // 2
        law = {j: (m.p if m.in_code(v, j) else 1 - m.p) / half for j in range(m.order)}
        return law, lambda p: p["j"]
    if isinstance(m, mechanisms.SubsetSelection):
        s = m.s
        with_v, without_v = math.comb(k - 1, s - 1), math.comb(k - 1, s)
        law = {
            subset: m.keep / with_v if v in subset else (1 - m.keep) / without_v
            for subset in itertools.combinations(range(k), s)
        }
        return law, lambda p: tuple(p["v"])
    raise AssertionError(f"no law for {m.name}")


def _chi2_pvalue(law: dict[Any, float], observed: Counter[Any]) -> float:
    assert set(observed) <= set(law), f"impossible outputs {set(observed) - set(law)}"
    total = sum(observed.values())
    outcomes = list(law)
    probs = np.array([law[o] for o in outcomes])
    assert probs.sum() == pytest.approx(1.0, abs=1e-9)
    expected = probs / probs.sum() * total
    assert expected.min() >= 5, "too few samples for a χ² test"
    return float(chisquare([observed[o] for o in outcomes], expected).pvalue)


LAWS = [
    ("rr", 2, 1.0, 1),
    ("grr", 5, 1.0, 3),
    ("sue", 4, 1.0, 2),
    ("oue", 4, 1.0, 0),
    ("oue", 5, 0.5, 4),
    ("olh", 6, 1.0, 5),  # g = 4, P = 7: 168 outputs
    ("blh", 4, 0.5, 1),
    ("hr", 5, 1.0, 2),
    ("ss", 6, 1.0, 4),  # s = 2: 15 subsets
]


@pytest.mark.parametrize(("name", "k", "epsilon", "v"), LAWS)
def test_output_law_of_one_true_value_matches_the_sdks_exact_probabilities(
    name: str, k: int, epsilon: float, v: int
) -> None:
    m = _mechanism(name, k, epsilon)
    law, outcome = _law(m, v)
    lines = _firehose_payloads(m, np.full(200_000, v, dtype=np.int64), seed=7)
    firehose_counts = Counter(outcome(json.loads(line)) for line in lines)
    # The law is the SDK's: its own perturb follows it too (a smaller, slower sample).
    rng = random.Random(11)
    sdk_counts = Counter(outcome(m.perturb(v, rng)) for _ in range(30_000))
    assert _chi2_pvalue(law, firehose_counts) > 1e-4
    assert _chi2_pvalue(law, sdk_counts) > 1e-4


def test_a_wrong_probability_is_caught() -> None:
    """The χ² check has power: a GRR sampled at ε = 1.1 instead of 1 fails it."""
    truth = _mechanism("grr", 5, 1.0)
    wrong = _mechanism("grr", 5, 1.1)
    law, outcome = _law(truth, 3)
    lines = _firehose_payloads(wrong, np.full(200_000, 3, dtype=np.int64), seed=7)
    assert _chi2_pvalue(law, Counter(outcome(json.loads(line)) for line in lines)) < 1e-6


# -- a real run: load, drain with ldp aggregate --once, check --------------------------------


@pytest.mark.parametrize(("name", "k"), [("grr", 16), ("oue", 64), ("olh", 64)])
def test_drain_counts_every_report_once_and_estimates_land_within_sigma(
    redis_db: Any, name: str, k: int
) -> None:
    reports = 20_000
    metric = f"fh.{name}"
    argv = ["--reports", str(reports), "--mechanism", name, "-k", str(k), "--seed", "5"]
    argv += ["--redis-url", redis_db.url, "--metric", metric, "--workers", "2", "--quiet"]
    result = firehose.run(firehose.parser().parse_args(argv))
    assert result.failed == []

    client = redis.Redis.from_url(redis_db.url)
    definition = Registry(client).get(metric)
    assert definition is not None
    counts = read_counts(client, definition)
    assert counts.n == reports == sum(result.truth)
    truth = np.array(result.truth)
    share = truth / reports
    est = estimate_from_counts(definition.oracle, counts)
    sigma = np.sqrt(definition.oracle.variance(reports, share))
    assert np.all(np.abs(est.frequencies - share) <= 4.5 * sigma)


def test_no_drain_leaves_the_reports_in_the_stream(redis_db: Any) -> None:
    argv = ["--reports", "1234", "--mechanism", "grr", "-k", "8", "--seed", "1", "--no-drain"]
    argv += ["--redis-url", redis_db.url, "--metric", "fh.nodrain", "--quiet", "--loader"]
    assert firehose.main([*argv, "pipeline"]) == 0
    client = redis.Redis.from_url(redis_db.url)
    definition = Registry(client).get("fh.nodrain")
    assert definition is not None
    from ldp_store import keys, streams

    assert streams.length(client, keys.stream_key("fh.nodrain", definition.version)) == 1234
    assert read_counts(client, definition).n == 0


def test_reports_spread_over_every_shard_and_all_are_counted(redis_db: Any) -> None:
    if "shards" not in {f.name for f in dataclasses.fields(MetricDefinition)}:
        pytest.skip("metric definitions have no shards in this tree")
    argv = ["--reports", "9000", "--mechanism", "grr", "-k", "8", "--seed", "1", "--shards", "3"]
    argv += ["--redis-url", redis_db.url, "--metric", "fh.sharded", "--quiet", "--workers", "2"]
    client = redis.Redis.from_url(redis_db.url)
    from ldp_store import keys

    loaded = firehose.run(firehose.parser().parse_args([*argv, "--no-drain"]))
    definition = Registry(client).get("fh.sharded")
    assert definition is not None and loaded.failed == []
    lengths = [
        streams.length(client, keys.stream_key("fh.sharded", 1, shard)) for shard in range(3)
    ]
    assert sum(lengths) == 9000 and min(lengths) > 0
    assert firehose.drain(redis_db.url, workers=2)[1] == []
    assert read_counts(client, definition).n == 9000
