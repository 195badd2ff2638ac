"""ε boundaries: exact output distributions, worst-case likelihood ratios, the CSPRNG.

The reference distributions below are written from the papers' definitions,
independently of the SDK's code; only the mechanisms' parameters (k, g, P, s, K and the
float probabilities they sample with) are read from the objects.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import zlib
from collections import Counter
from fractions import Fraction
from math import comb

import pytest
from scipy.stats import chisquare
from scripted import ALL, ScriptedRandom

from client_sdk.mechanisms import SecureRandom, create, subset
from client_sdk.mechanisms.randomness import (
    bernoulli,
    bernoulli_lanes,
    subset_marks,
    uniform_indices,
)

Output = tuple[int, ...]


def grr_law(keep: Fraction, v: int, k: int) -> dict[Output, Fraction]:
    """Exact output distribution of k-ary randomized response keeping ``v`` w.p. ``keep``."""
    return {(y,): keep if y == v else (1 - keep) / (k - 1) for y in range(k)}


def unary_law(p: Fraction, q: Fraction, v: int, k: int) -> dict[Output, Fraction]:
    """Exact output distribution of a unary encoding of ``v``: its bit set w.p. ``p``,
    each other bit w.p. ``q``."""
    out = {}
    for bits in itertools.product((0, 1), repeat=k):
        pr = Fraction(1)
        for u, b in enumerate(bits):
            one = p if u == v else q
            pr *= one if b else 1 - one
        out[bits] = pr
    return out


def pmf(m, v: int) -> dict[Output, Fraction]:  # type: ignore[no-untyped-def]
    """Exact output distribution of mechanism ``m`` on input ``v``."""
    k = m.domain_size
    if m.name in ("rr", "grr"):
        return grr_law(Fraction(m.keep), v, k)
    if m.name in ("sue", "oue"):
        return unary_law(Fraction(m.p), Fraction(m.q), v, k)
    if m.name in ("olh", "blh"):
        P, g, keep = m.prime, m.g, Fraction(m.keep)
        out = {}
        for a in range(1, P):
            for b in range(P):
                h = ((a * v + b) % P) % g
                for y in range(g):
                    pick = keep if y == h else (1 - keep) / (g - 1)
                    out[(a, b, y)] = pick / (P * (P - 1))
        return out
    if m.name == "hr":
        K, p = m.order, Fraction(m.p)
        return {
            (j,): Fraction(2, K) * (p if bin((v + 1) & j).count("1") % 2 == 0 else 1 - p)
            for j in range(K)
        }
    if m.name == "ss":
        s, keep = m.s, Fraction(m.keep)
        return {
            subset: keep / comb(k - 1, s - 1) if v in subset else (1 - keep) / comb(k - 1, s)
            for subset in itertools.combinations(range(k), s)
        }
    raise AssertionError(m.name)


def supports(m, y: Output, u: int) -> bool:  # type: ignore[no-untyped-def]
    if m.name in ("rr", "grr"):
        return y[0] == u
    if m.name in ("sue", "oue"):
        return y[u] == 1
    if m.name in ("olh", "blh"):
        a, b, yy = y
        return ((a * u + b) % m.prime) % m.g == yy
    if m.name == "hr":
        return bin((u + 1) & y[0]).count("1") % 2 == 0
    if m.name == "ss":
        return u in y
    raise AssertionError(m.name)


CASES = [
    ("rr", 2, 1.0),
    ("rr", 2, 0.3),
    ("grr", 5, 1.0),
    ("grr", 3, 4.0),
    ("sue", 4, 1.0),
    ("oue", 4, 1.0),
    ("oue", 5, 3.0),
    ("olh", 5, 1.0),
    ("olh", 4, 2.5),
    ("blh", 5, 1.0),
    ("hr", 3, 1.0),
    ("hr", 7, 2.0),
    ("ss", 6, 1.0),
    ("ss", 7, 0.5),
]


@pytest.mark.parametrize(("name", "k", "eps"), CASES)
def test_exact_distribution_worst_ratio_equals_e_to_the_epsilon(
    name: str, k: int, eps: float
) -> None:
    m = create(name, epsilon=eps, domain_size=k)
    dists = [pmf(m, v) for v in range(k)]
    for d in dists:
        assert sum(d.values()) == 1
    # p* and q* are exactly the marginal support probabilities of the output distribution.
    for v in range(k):
        for u in range(k):
            mass = sum(pr for y, pr in dists[v].items() if supports(m, y, u))
            expected = m.p if u == v else m.q
            assert float(mass) == pytest.approx(expected, rel=1e-12, abs=0)
    worst = max(
        dists[v][y] / dists[w][y] for v in range(k) for w in range(k) if v != w for y in dists[v]
    )
    assert worst == m.privacy_ratio()
    assert worst <= Fraction(math.exp(eps))
    assert math.log(worst) == pytest.approx(eps, rel=1e-9)
    # ε is tight: any smaller ε is violated by some output.
    assert worst > Fraction(math.exp(eps * (1 - 1e-6)))


@pytest.mark.parametrize(("name", "k", "eps"), [c for c in CASES if c[0] not in ("olh", "blh")])
def test_perturb_samples_the_exact_distribution(name: str, k: int, eps: float) -> None:
    """Chi-square goodness of fit of the real perturb against the exact distribution."""
    m = create(name, epsilon=eps, domain_size=k)
    rng = random.Random(zlib.crc32(f"{name}-{k}".encode()))  # fixed across runs
    v = 1
    dist = pmf(m, v)
    outputs = list(dist)
    index = {y: i for i, y in enumerate(outputs)}
    n = 30_000
    observed = [0] * len(outputs)
    for _ in range(n):
        payload = m.perturb(v, rng)
        if name in ("rr", "grr"):
            y: Output = (payload["v"],)
        elif name in ("sue", "oue"):
            y = tuple(int(m.supports(payload, u)) for u in range(k))
        elif name == "hr":
            y = (payload["j"],)
        else:
            y = tuple(payload["v"])
        observed[index[y]] += 1
    expected = [float(dist[y]) * n for y in outputs]
    # α = 10⁻⁴ per case: a correct sampler fails one of these with probability < 0.2 %.
    assert chisquare(observed, expected).pvalue > 1e-4


@pytest.mark.parametrize(("k", "eps"), [(5, 1.0), (4, 2.5)])
def test_olh_perturb_samples_the_exact_distribution(k: int, eps: float) -> None:
    """OLH has (P−1)·P·g outputs: test the hash seed's uniformity and y given (a, b)."""
    m = create("olh", epsilon=eps, domain_size=k)
    rng = random.Random(99)
    n, v = 30_000, 2
    seeds = [0] * (m.prime * m.prime)
    kept = 0
    for _ in range(n):
        p = m.perturb(v, rng)
        seeds[p["a"] * m.prime + p["b"]] += 1
        kept += m.hash(p["a"], p["b"], v) == p["y"]
    valid = [c for i, c in enumerate(seeds) if i // m.prime >= 1]
    assert chisquare(valid).pvalue > 1e-4  # (a, b) uniform on [1, P) × [0, P)
    sd = math.sqrt(n * m.keep * (1 - m.keep))
    assert abs(kept - n * m.keep) < 4.5 * sd


# -- exact Bernoulli sampling --------------------------------------------------------------


def test_bernoulli_compares_with_the_binary_expansion() -> None:
    p = 0.75  # 0b0.11
    assert bernoulli(ScriptedRandom([0b10]), p) is True  # U = 0.10… < 0.11
    assert bernoulli(ScriptedRandom([0b11]), p) is False  # U = 0.11… ≥ p
    p = 3e-6  # 69 binary digits: compared in a 64-bit word, then a 5-bit one
    num, den = p.as_integer_ratio()
    t = den.bit_length() - 1
    assert t == 69
    head = num >> (t - 64)
    assert bernoulli(ScriptedRandom([head - 1]), p) is True
    assert bernoulli(ScriptedRandom([head + 1]), p) is False
    # Equal on the first 64 bits: the next bits of U decide against p's remaining ones.
    rest_bits = t - 64
    rest = num & ((1 << rest_bits) - 1)
    assert bernoulli(ScriptedRandom([head, rest]), p) is False  # U's prefix == p: U ≥ p
    assert bernoulli(ScriptedRandom([head, rest - 1]), p) is True
    assert bernoulli(ScriptedRandom([head, rest + 1]), p) is False
    assert bernoulli(ScriptedRandom([ALL]), 0.999) is False


@pytest.mark.parametrize("lanes", [64, 200])  # bit planes up to 64 lanes, random bytes above
@pytest.mark.parametrize("p", [0.5, 0.1, 0.268941421369995, 1e-3, 0.999, 0.00390625])
def test_bernoulli_lanes_mean_and_independence(p: float, lanes: int) -> None:
    rng = random.Random(5)
    draws = 2000
    ones_per_lane = [0] * lanes
    pairs = 0
    for _ in range(draws):
        x = bernoulli_lanes(rng, p, lanes)
        assert 0 <= x < 1 << lanes
        for i in range(lanes):
            ones_per_lane[i] += x >> i & 1
        pairs += (x & 1) & (x >> 1 & 1)
    n = lanes * draws
    total = sum(ones_per_lane)
    assert abs(total - n * p) < 4.5 * math.sqrt(n * p * (1 - p))
    # lanes 0 and 1 independent: both set with probability p².
    assert abs(pairs - draws * p * p) < 4.5 * math.sqrt(draws * p * p * (1 - p * p)) + 1


# -- the CSPRNG --------------------------------------------------------------------------------


def test_secure_random_is_uniform_and_unseedable() -> None:
    rng = SecureRandom()
    rng.seed(1)  # ignored
    draws = [rng.getrandbits(8) for _ in range(20_000)]
    assert chisquare([draws.count(i) for i in range(256)]).pvalue > 1e-4
    assert 0 <= rng.random() < 1
    assert rng.getrandbits(0) == 0 and rng.getrandbits(70_000).bit_length() <= 70_000
    with pytest.raises(NotImplementedError):
        rng.getstate()
    with pytest.raises(ValueError):
        rng.getrandbits(-1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_secure_random_never_repeats_across_fork() -> None:
    rng = SecureRandom()
    rng.getrandbits(8)  # fill the buffer in the parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        os.write(write, rng.getrandbits(256).to_bytes(32, "big"))
        os._exit(0)
    os.close(write)
    child = os.read(read, 32)
    os.waitpid(pid, 0)
    parent = rng.getrandbits(256).to_bytes(32, "big")
    assert child != parent, "a forked child must not reuse the parent's buffered noise"


@pytest.mark.parametrize("p", [0.268941421369995, 0.00390625, 1 / 3])
def test_byte_lanes_are_exact_at_the_digit_boundary(p: float) -> None:
    """Lanes whose first random byte equals p's first digit are decided by later digits."""
    rng = random.Random(11)
    lanes, draws = 256, 400
    total = sum(bin(bernoulli_lanes(rng, p, lanes)).count("1") for _ in range(draws))
    n = lanes * draws
    assert abs(total - n * p) < 4.5 * math.sqrt(n * p * (1 - p))


# -- subset selection: both samplers ----------------------------------------------------------

SS_PATHS = {"dense": 0.0, "sparse": 2.0}
"""``subset.DENSE_FRACTION`` forcing each sampler (s ≥ 0·k always; s < 2·k always)."""


@pytest.mark.parametrize("path", SS_PATHS)
@pytest.mark.parametrize(
    ("k", "eps", "s"),
    [(6, 1.0, 0), (7, 0.5, 0), (8, 1.0, 1), (6, 0.5, 4)],  # s = 2, 3, 1 (no other), 4 of 6
)
def test_subset_selection_samplers_realise_the_declared_distribution(
    monkeypatch: pytest.MonkeyPatch, path: str, k: int, eps: float, s: int
) -> None:
    """Each sampler's outputs against the exact pmf: every s-subset, sizes, marginals."""
    monkeypatch.setattr(subset, "DENSE_FRACTION", SS_PATHS[path])
    m = create("ss", epsilon=eps, domain_size=k, s=s)
    assert m.dense == (path == "dense")
    rng = random.Random(zlib.crc32(f"ss-{path}-{k}-{eps}-{s}".encode()))  # fixed across runs
    v, n = 2, 30_000
    dist = pmf(m, v)
    observed: Counter[Output] = Counter(tuple(m.perturb(v, rng)["v"]) for _ in range(n))
    # Only sorted s-subsets come out: every output is a key of the exact pmf.
    assert set(observed) <= set(dist)
    outputs = list(dist)
    expected = [float(dist[y]) * n for y in outputs]
    assert chisquare([observed[y] for y in outputs], expected).pvalue > 1e-4
    # Marginals: the true value is in with probability p*, every other value with q*.
    for u in range(k):
        hits = sum(c for y, c in observed.items() if u in y)
        prob = m.p if u == v else m.q
        assert abs(hits - n * prob) < 4.5 * math.sqrt(n * prob * (1 - prob))


@pytest.mark.parametrize("n", [1, 2, 5, 12, 1023, 1024, 1025, 65535, 65536])
def test_uniform_indices_are_exactly_uniform(n: int) -> None:
    """Exhaustive: fed every 16-bit word once, each value of range(n) comes out equally often."""

    class EveryWordOnce(random.Random):
        """getrandbits serves the words 0, 1, …, 65535 in order (2 bytes each, little-endian),
        then raises :class:`LookupError`."""

        def __init__(self) -> None:
            self.next_word = 0
            super().__init__(0)

        def getrandbits(self, k: int, /) -> int:
            assert k % 16 == 0
            words = range(self.next_word, self.next_word + k // 16)
            if words.stop > 65536:
                raise LookupError("every word served")
            self.next_word = words.stop
            return int.from_bytes(b"".join(w.to_bytes(2, "little") for w in words), "little")

    # A batch size whose draws (batch·2^b/n + 4 words) divide 2^16: the stream then ends
    # exactly after the last word, and every word has been looked at once.
    span = 1 << (n - 1).bit_length()
    batch = next(b for b in range(1, 70_000) if 65536 % (b * span // n + 4) == 0)
    source, values = EveryWordOnce(), []
    with pytest.raises(LookupError):
        values.extend(uniform_indices(source, n, batch))
    assert source.next_word == 65536
    assert Counter(values) == dict.fromkeys(range(n), 65536 // span)  # 2^16/2^b words each
    with pytest.raises(ValueError):
        next(uniform_indices(random.Random(0), 65537, 1))


class FirstDrawScripted(random.Random):
    """Its first ``getrandbits`` returns a scripted value, every later one is seeded."""

    def __init__(self, first: int, seed: int) -> None:
        self.first: int | None = first
        super().__init__(seed)

    def getrandbits(self, k: int, /) -> int:  # noqa: D102
        if self.first is not None:
            x, self.first = self.first, None
            return x
        return super().getrandbits(k)


@pytest.mark.parametrize(
    ("start", "fixed", "pool", "pick"),
    [([0, 1, 2, 3, 4], [], [0, 1, 2, 3, 4], 3), ([0], [0], [1, 2, 3, 4, 5], 2)],
)
def test_subset_marks_fix_up_picks_uniformly(
    start: list[int], fixed: list[int], pool: list[int], pick: int
) -> None:
    """Given any first marking, the fix-up removes (adds) a uniform set of marks.

    Population 6, size 3, threshold t = 128: bytes 0 mark, bytes 255 do not. From five
    marks, two uniformly chosen ones go: the result is uniform over the 3-subsets of the
    five. From {0}, two uniformly chosen unmarked ones come: {0} and a uniform pair of the
    other five.
    """
    first = sum((0 if i in start else 255) << (8 * i) for i in range(6))
    rng = random.Random(23)
    n = 20_000
    counts: Counter[tuple[int, ...]] = Counter()
    for _ in range(n):
        marks = subset_marks(FirstDrawScripted(first, rng.getrandbits(64)), 6, 3)
        assert marks.count(1) == 3 and set(marks) <= {0, 1}
        counts[tuple(i for i in range(6) if marks[i])] += 1
    subsets = [tuple(sorted(fixed + list(c))) for c in itertools.combinations(pool, pick)]
    assert set(counts) == set(subsets)
    assert chisquare([counts[y] for y in subsets]).pvalue > 1e-4


@pytest.mark.parametrize(("k", "s"), [(40, 20), (300, 8)])  # dense (marks), sparse (draws)
def test_subset_selection_is_uniform_over_the_other_values(k: int, s: int) -> None:
    """Larger domains: marginals and pairs of the other values, on the default path."""
    m = create("ss", epsilon=1.0, domain_size=k, s=s)
    assert m.dense == (s == 20)
    rng = random.Random(17)
    n, v = 20_000, 0
    counts = [0] * k
    pairs = 0
    for _ in range(n):
        chosen = m.perturb(v, rng)["v"]
        assert len(chosen) == s and chosen == sorted(set(chosen))
        for u in chosen:
            counts[u] += 1
        pairs += 1 in chosen and 2 in chosen
    # The true value is in with probability p*, each other value with probability q*.
    assert abs(counts[0] - n * m.p) < 4.5 * math.sqrt(n * m.p * (1 - m.p))
    assert chisquare(counts[1:]).pvalue > 1e-4
    others = (k - 1) * n
    assert abs(sum(counts[1:]) / others - m.q) < 4.5 * math.sqrt(m.q * (1 - m.q) / others)
    # Two given other values both picked: s − 1 (or s) uniform picks among the k − 1 others.
    pair_ways = (k - 1) * (k - 2)
    both = m.p * (s - 1) * (s - 2) / pair_ways + (1 - m.p) * s * (s - 1) / pair_ways
    assert abs(pairs - n * both) < 4.5 * math.sqrt(n * both * (1 - both))
