"""The JVM SDK's mechanisms, statistically: the output distribution of each (small k)
against the exact one by a chi-square test, and the ε audit of ``ldp audit``
(aggregator/analysis/audit.py) run on the JVM's samples.

The samples come from client_jvm/src/test/java/.../Sampler.java, the SDK's own mechanism
classes on SHAKE-256 streams of fixed seeds (reproducible runs); the exact laws from the
Python SDK's mechanism objects, whose parameters the conformance vectors pin equal to the
JVM's. A correct sampler fails a chi-square test at α = 10⁻³ with probability 10⁻³, once
for a given seed; the negative control (the law at another ε) must fail it.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import math
import subprocess
from collections import Counter
from collections.abc import Callable, Hashable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from jvm_helpers import built
from scipy.stats import chisquare, hypergeom

from aggregator.analysis.audit import audit
from client_sdk import mechanisms

pytestmark = pytest.mark.slow

N = 40_000
"""Samples per chi-square job; every expected cell count below is at least 20 (the numeric
jobs take half: a numeric report costs the JVM ten times a categorical one)."""
N_NUMERIC = 20_000
AUDIT_TRIALS = 40_000
"""Perturbations per input of an audit, as tests/aggregator/test_audit.py runs them."""
ALPHA = 1e-3

PRAM = [[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]]

Law = tuple[Callable[[dict[str, Any]], Hashable], dict[Hashable, float]]


def _mech(spec: dict[str, Any]) -> Any:
    spec = dict(spec)
    name = spec.pop("mechanism")
    if name in ("duchi", "pm", "hybrid"):
        return mechanisms.create_numeric(name, spec["epsilon"])
    return mechanisms.create(name, **spec)


def _bits(m: Any) -> Callable[[dict[str, Any]], Hashable]:
    k = m.domain_size

    def key(payload: dict[str, Any]) -> Hashable:
        raw = int.from_bytes(base64.b64decode(payload["b"]), "big")
        n = 8 * len(base64.b64decode(payload["b"]))
        return tuple((raw >> (n - 1 - v)) & 1 for v in range(k))

    return key


def _unary_law(m: Any, v: int, p: float, q: float) -> Law:
    out: dict[Hashable, float] = {}
    for code in range(2**m.domain_size):
        bits = tuple((code >> (m.domain_size - 1 - u)) & 1 for u in range(m.domain_size))
        prob = 1.0
        for u, bit in enumerate(bits):
            on = p if u == v else q
            prob *= on if bit else 1 - on
        out[bits] = prob
    return _bits(m), out


def _value_law(k: int, v: int, p: float, q: float) -> Law:
    return (lambda payload: payload["v"]), {u: p if u == v else q for u in range(k)}


def _olh_law(m: Any, v: int) -> Law:
    big_p, g = m.prime, m.g
    out: dict[Hashable, float] = {}
    for a in range(1, big_p):
        for b in range(big_p):
            x = ((a * v + b) % big_p) % g
            for y in range(g):
                kept = m.p if y == x else (1 - m.p) / (g - 1)
                out[(a, b, y)] = kept / ((big_p - 1) * big_p)
    return (lambda payload: (payload["a"], payload["b"], payload["y"])), out


def _hr_law(m: Any, v: int) -> Law:
    order = 2 ** (m.domain_size).bit_length()
    row = v + 1
    law = {
        j: (2 * m.p if bin(row & j).count("1") % 2 == 0 else 2 * (1 - m.p)) / order
        for j in range(order)
    }
    return (lambda payload: payload["j"]), law


def _ss_dense_law(m: Any, v: int) -> Law:
    k, s = m.domain_size, m.s
    out: dict[Hashable, float] = {}
    for subset in _subsets(k, s):
        out[subset] = (
            m.p / math.comb(k - 1, s - 1) if v in subset else (1 - m.p) / math.comb(k - 1, s)
        )
    return (lambda payload: tuple(payload["v"])), out


def _subsets(k: int, s: int) -> list[tuple[int, ...]]:
    import itertools

    return list(itertools.combinations(range(k), s))


SPARSE_WATCH = frozenset(range(100, 110))


def _ss_sparse_law(m: Any, v: int) -> Law:
    """(v reported, how many of 10 watched values are): C(199, s) subsets are too many cells."""
    k, s = m.domain_size, m.s
    out: dict[Hashable, float] = {}
    for h in range(11):
        out[(True, h)] = m.p * hypergeom(k - 1, 10, s - 1).pmf(h)
        out[(False, h)] = (1 - m.p) * hypergeom(k - 1, 10, s).pmf(h)

    def key(payload: dict[str, Any]) -> Hashable:
        chosen = set(payload["v"])
        return (v in chosen, len(chosen & SPARSE_WATCH))

    return key, out


def _pram_law(m: Any, v: int) -> Law:
    row = [Fraction(repr(x)) for x in PRAM[v]]
    return (lambda payload: payload["v"]), {u: float(x / sum(row)) for u, x in enumerate(row)}


def _numeric_law(m: Any, x: float, bins: int = 24) -> Law:
    """The exact law (Python's ``pmf``) on ``bins`` equal intervals of the units axis."""
    segments = m.pmf(x)
    top = max(abs(s.first) + s.step * s.size for s in segments) + 1
    edges = [round(-top + 2 * top * i / bins) for i in range(bins + 1)]
    edges[-1] = top + 1
    out: dict[Hashable, float] = dict.fromkeys(range(bins), 0.0)
    for s in segments:
        for i in range(bins):
            lo, hi = edges[i], edges[i + 1]
            first = max(0, -((s.first - lo) // s.step))  # first t with first + t·step ≥ lo
            last = min(s.size, -((s.first - hi) // s.step))  # first t with … ≥ hi
            if last > first:
                out[i] += float((last - first) * s.probability)

    def key(payload: dict[str, Any]) -> Hashable:
        units = m.units(payload)
        return next(i for i in range(bins) if edges[i] <= units < edges[i + 1])

    return key, {i: p for i, p in out.items() if p > 0}


# name → (mechanism spec, value, its exact law)
CHI_SQUARE: dict[str, tuple[dict[str, Any], Any, Callable[[Any, Any], Law]]] = {
    "rr": (
        {"mechanism": "rr", "epsilon": 1.0, "domain_size": 2},
        0,
        lambda m, v: _value_law(2, v, m.p, m.q),
    ),
    "grr": (
        {"mechanism": "grr", "epsilon": 1.0, "domain_size": 4},
        2,
        lambda m, v: _value_law(4, v, m.p, m.q),
    ),
    "sue": (
        {"mechanism": "sue", "epsilon": 1.0, "domain_size": 3},
        1,
        lambda m, v: _unary_law(m, v, m.p, m.q),
    ),
    "oue": (
        {"mechanism": "oue", "epsilon": 1.0, "domain_size": 3},
        0,
        lambda m, v: _unary_law(m, v, m.p, m.q),
    ),
    "olh": ({"mechanism": "olh", "epsilon": 1.0, "domain_size": 4}, 3, _olh_law),
    "hr": ({"mechanism": "hr", "epsilon": 1.0, "domain_size": 3}, 1, _hr_law),
    "ss-dense": ({"mechanism": "ss", "epsilon": 0.5, "domain_size": 6}, 2, _ss_dense_law),
    "ss-sparse": ({"mechanism": "ss", "epsilon": 3.0, "domain_size": 200}, 7, _ss_sparse_law),
    "pram": ({"mechanism": "pram", "domain_size": 3, "matrix": PRAM}, 1, _pram_law),
    "memo-grr": (
        {"mechanism": "memo-grr", "epsilon": 1.0, "domain_size": 4, "permanent_epsilon": 4.0},
        1,
        lambda m, v: _value_law(4, v, m.p, m.q),
    ),
    "memo-oue": (
        {"mechanism": "memo-oue", "epsilon": 1.0, "domain_size": 3, "permanent_epsilon": 4.0},
        2,
        lambda m, v: _unary_law(m, v, m.p, m.q),
    ),
    "pm": ({"mechanism": "pm", "epsilon": 1.0}, 0.5, _numeric_law),
    "hybrid": (
        {"mechanism": "hybrid", "epsilon": 2.0},
        -0.3,
        _numeric_law,
    ),  # α = 0.63: Duchi's too
}

# name → (mechanism spec, bound, inputs): ldp audit's procedure on the JVM's samples
AUDITS: dict[str, tuple[dict[str, Any], str, tuple[float, float]]] = {
    "grr": ({"mechanism": "grr", "epsilon": 1.0, "domain_size": 8}, "report", (0, 1)),
    "oue": ({"mechanism": "oue", "epsilon": 1.0, "domain_size": 8}, "report", (0, 1)),
    "olh": ({"mechanism": "olh", "epsilon": 1.0, "domain_size": 8}, "report", (0, 1)),
    "hr": ({"mechanism": "hr", "epsilon": 1.0, "domain_size": 8}, "report", (0, 1)),
    "ss": ({"mechanism": "ss", "epsilon": 1.0, "domain_size": 8}, "report", (0, 1)),
    "memo-grr": (
        {"mechanism": "memo-grr", "epsilon": 1.0, "domain_size": 8, "permanent_epsilon": 4.0},
        "report",
        (0, 1),
    ),
    "memo-oue-permanent": (
        {"mechanism": "memo-oue", "epsilon": 1.0, "domain_size": 8, "permanent_epsilon": 4.0},
        "permanent",
        (0, 1),
    ),
    "hybrid": ({"mechanism": "hybrid", "epsilon": 1.0}, "report", (-1.0, 1.0)),
    "pm": ({"mechanism": "pm", "epsilon": 4.0}, "report", (-1.0, 1.0)),
}


def _mode(spec: dict[str, Any], bound: str = "report") -> str:
    if bound == "permanent":
        return "permanent"
    return "scaled" if spec["mechanism"] in ("duchi", "pm", "hybrid") else "report"


@pytest.fixture(scope="module")
def samples() -> dict[str, list[dict[str, Any]]]:
    """Every job's payloads, drawn by the JVM in one run, shared by the test workers (kept
    under client_jvm/build/, by a hash of the jobs and the SDK's jar)."""
    build = built()
    jobs: list[dict[str, Any]] = []
    names: list[str] = []
    for seed, (name, (spec, value, _)) in enumerate(CHI_SQUARE.items()):
        params = _mech(spec).params()
        jobs.append(
            {"params": params, "mode": _mode(spec), "value": value, "trials": N, "seed": seed}
        )
        names.append(f"chi:{name}")
    for seed, (name, (spec, bound, inputs)) in enumerate(AUDITS.items(), start=100):
        params = _mech(spec).params()
        for i, x in enumerate(inputs):
            mode = _mode(spec, bound)
            jobs.append(
                {
                    "params": params,
                    "mode": mode,
                    "value": x,
                    "trials": AUDIT_TRIALS,
                    "seed": 2 * seed + i,
                }
            )
            names.append(f"audit:{name}:{i}")
    text = json.dumps(jobs, sort_keys=True)
    key = hashlib.sha256((text + build.stamp_of(build.JAR)).encode()).hexdigest()[:16]
    out = Path(build.BUILD) / f"samples-{key}.jsonl"
    with build.locked():
        if not out.exists():
            (out.parent / "jobs.json").write_text(text)
            done = subprocess.run(
                build.java_command(
                    "org.ldptelemetry.Sampler", str(out.parent / "jobs.json"), f"{out}.tmp"
                ),
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            Path(f"{out}.tmp").replace(out)
    lines = out.read_text().splitlines()
    assert len(lines) == len(jobs)
    return {name: json.loads(line) for name, line in zip(names, lines, strict=True)}


def _chi_square(law: Law, payloads: list[dict[str, Any]]) -> float:
    """The p-value of the payloads' counts against the law: 0 when an output of probability
    0 occurs; cells expecting fewer than 5 are pooled."""
    key, probabilities = law
    probabilities = {c: p for c, p in probabilities.items() if p > 0}
    assert abs(sum(probabilities.values()) - 1) < 1e-9
    counts = Counter(key(p) for p in payloads)
    if set(counts) - set(probabilities):
        return 0.0  # an output of probability 0 occurred
    n = len(payloads)
    cells = sorted(probabilities, key=repr)
    rare = [c for c in cells if n * probabilities[c] < 5]
    common = [c for c in cells if n * probabilities[c] >= 5]
    observed = [counts.get(c, 0) for c in common]
    expected = [n * probabilities[c] for c in common]
    if rare:  # pooled, and with the least likely common cell while still below 5
        observed.append(sum(counts.get(c, 0) for c in rare))
        expected.append(n * sum(probabilities[c] for c in rare))
        if expected[-1] < 5:
            least = min(range(len(expected) - 1), key=expected.__getitem__)
            observed[least] += observed.pop()
            expected[least] += expected.pop()
    assert len(expected) >= 2 and min(expected) >= 5
    total = sum(expected)
    return float(chisquare(observed, [e * n / total for e in expected]).pvalue)


@pytest.mark.parametrize("name", list(CHI_SQUARE))
def test_the_output_distribution_is_the_exact_one(
    name: str, samples: dict[str, list[dict[str, Any]]]
) -> None:
    spec, value, law = CHI_SQUARE[name]
    m = _mech(spec)
    assert _chi_square(law(m, value), samples[f"chi:{name}"]) > ALPHA


@pytest.mark.parametrize("name", ["grr", "oue", "hybrid"])
def test_the_chi_square_test_tells_a_mechanism_at_another_epsilon(
    name: str, samples: dict[str, list[dict[str, Any]]]
) -> None:
    """The negative control: the same samples against the law at ε + 0.15 fail."""
    spec, value, law = CHI_SQUARE[name]
    other = _mech({**spec, "epsilon": spec["epsilon"] + 0.15})
    assert _chi_square(law(other, value), samples[f"chi:{name}"]) < ALPHA


class _Replayed:
    """What the audit calls on a mechanism, answered with the JVM's samples (each input's
    trials in the order the audit asks for them)."""

    def __init__(self, samples: dict[Any, list[dict[str, Any]]]) -> None:
        self.queues = {x: iter(payloads) for x, payloads in samples.items()}

    def __call__(self, value: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return next(self.queues[value])


@pytest.mark.parametrize("name", list(AUDITS))
def test_ldp_audit_passes_the_jvms_mechanisms_and_is_close_to_tight(
    name: str, samples: dict[str, list[dict[str, Any]]]
) -> None:
    spec, bound, inputs = AUDITS[name]
    m = _mech(spec)
    replayed = copy.copy(m)  # the Python object for classes and support; the JVM's payloads
    answer = _Replayed({x: samples[f"audit:{name}:{i}"] for i, x in enumerate(inputs)})
    object.__setattr__(
        replayed, "permanent_response" if bound == "permanent" else "perturb", answer
    )
    result = audit(replayed, trials=AUDIT_TRIALS, confidence=0.99, inputs=inputs, bound=bound)
    declared = m.permanent_epsilon if bound == "permanent" else m.epsilon
    assert result.passed and result.declared_epsilon == declared, result
    # The most distinguishing event has likelihood ratio e^ε: the bound lands near ε.
    assert result.epsilon_lower_bound > (0.85 if bound == "permanent" else 0.75) * declared, result
