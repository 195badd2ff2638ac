"""Write the conformance vectors: what the reference (Python) SDK does, byte for byte.

Run ``.venv/bin/python conformance/generate.py`` from the repository root; it rewrites
``conformance/vectors/*.json``. ``tests/test_conformance.py`` regenerates them in memory
and compares, so the committed vectors cannot drift from the Python SDK. Another SDK
replays every vector: the same spec, the same random bytes in, the same payload out.
The format is described in ``conformance/README.md``; the protocol in ``docs/protocol.md``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from client_sdk import mechanisms, wire  # noqa: E402
from client_sdk.mechanisms import base, joint, memoized, numeric, rounding, strings  # noqa: E402
from client_sdk.mechanisms.randomness import SecureRandom  # noqa: E402
from client_sdk.ohttp.encapsulation import encapsulate_request, public_key_of  # noqa: E402
from client_sdk.ohttp.keys import (  # noqa: E402
    SUPPORTED,
    KeyConfig,
    decode_key_configs,
    encode_key_configs,
)
from client_sdk.ohttp.transport import ObliviousTransport  # noqa: E402

VECTORS = Path(__file__).resolve().parent / "vectors"

FORMAT = 1
"""Bumped when the layout of the vector files changes (not when a vector does)."""


def rational(x: float | Fraction | int) -> str:
    """An exact rational as ``"num/den"`` in lowest terms (a float converted exactly)."""
    f = Fraction(x)
    return f"{f.numerator}/{f.denominator}"


def stream(label: str) -> Iterator[bytes]:
    """The random bytes of one case: SHAKE-256 of ``conformance:<label>``, unbounded."""
    size = 1024
    while True:
        yield hashlib.shake_256(f"conformance:{label}".encode()).digest(size)
        size *= 4


class StreamRandom(SecureRandom):
    """The SDK's production generator with its OS bytes replaced by a fixed stream.

    Everything above the byte source (``getrandbits``, ``randrange``, the buffer read of
    ``random_bytes``) is the production :class:`SecureRandom` code, so a vector's bytes
    are exactly what ``os.urandom`` would have had to return for that payload. Records
    the bytes consumed and the top-level calls made.
    """

    def __init__(self, label: str) -> None:
        super().__init__()
        self._label = label
        self._source = stream(label)
        self._all = next(self._source)
        self.used = 0
        self.calls: list[str] = []
        self._depth = 0

    def randbytes(self, n: int) -> bytes:  # noqa: D102
        end = self.used + n
        while end > len(self._all):
            self._all = next(self._source)
        out = self._all[self.used : end]
        self.used = end
        if self._depth == 0:
            self.calls.append(f"randbytes({n})")
        return out

    def getrandbits(self, k: int, /) -> int:  # noqa: D102
        if self._depth == 0:
            self.calls.append(f"getrandbits({k})")
        self._depth += 1
        try:
            return super().getrandbits(k)
        finally:
            self._depth -= 1

    def randrange(self, start: int, stop: int | None = None, step: int = 1, /) -> int:  # noqa: D102
        if self._depth == 0:
            self.calls.append(
                f"randrange({start})" if stop is None else f"randrange({start}, {stop})"
            )
        self._depth += 1
        try:
            return super().randrange(start, stop, step)
        finally:
            self._depth -= 1

    def record(self) -> dict[str, Any]:
        """The randomness a case consumed: the bytes (hex) and the calls, in order."""
        return {"random": self._all[: self.used].hex(), "calls": self.calls}


def compact(obj: Any) -> str:
    """The SDK's JSON encoding of a report (``client_sdk.client._ENCODER``)."""
    return json.dumps(obj, separators=(",", ":"))


# -- the numbers every mechanism is built on -------------------------------------------

EPSILONS = (0.1, 0.5, 0.61, 0.7, 1.0, 1.0986122886681098, 2.0, 3.5, 4.0, 6.0, 10.0, 20.0)

AWKWARD_EPSILONS = {
    0.27: "V8's Math.exp(ε) is one ulp off, and GRR's keep at k = 3 with it",
    2.1: "glibc's and V8's expm1(−ε/2) are one ulp off, and the hybrid's α with them",
    2.467: "glibc's exp(ε) is one ulp off, and OLH's keep with it",
    3.5: "glibc's expm1(−ε/2) is one ulp off, and the hybrid's α with it",
    4.934: "glibc's exp(ε/2) is one ulp off, and SUE's p with it",
    5.66: "glibc's exp(ε) is one ulp off",
    6.218: "glibc's exp(ε) is one ulp off, and GRR's keep at k = 64 with it",
    11.32: "glibc's exp(ε/2) is one ulp off",
    13.08: "glibc's exp(ε) is one ulp off",
    0.24: "glibc's and V8's expm1(ε/2) are one ulp off",
}
"""ε where a libm's exp or expm1 is not the correctly rounded one the protocol pins (found
by comparing with it on a grid; the notes say what the libms of 2026 got wrong)."""


def _exp_row(eps: float) -> dict[str, Any]:
    return {
        "epsilon": eps,
        "exp": rational(rounding.exp(eps)),
        "exp_epsilon": rational(base.exp_epsilon(eps)),
        "exp_upper_bound": rational(base._exp_upper_bound_check(eps)),
        "exp_half": rational(rounding.exp(eps / 2)),
        "expm1_half": rational(rounding.expm1(eps / 2)),
        "hybrid_alpha": rational(-rounding.expm1(-eps / 2)),
    }


def exp_table() -> dict[str, Any]:
    """e^x and e^x − 1 correctly rounded at the ε used below and at awkward ε, and the two
    derived numbers of ``base``."""
    awkward = [{**_exp_row(eps), "why": why} for eps, why in sorted(AWKWARD_EPSILONS.items())]
    return {
        "safety": rational(base._SAFETY),
        "table": [_exp_row(eps) for eps in EPSILONS],
        "awkward": awkward,
    }


# -- frequency oracles ------------------------------------------------------------------

ORACLE_SPECS: list[dict[str, Any]] = [
    {"mechanism": "rr", "epsilon": 1.0, "domain_size": 2},
    {"mechanism": "rr", "domain_size": 2, "keep_probability": 0.75},
    {"mechanism": "grr", "epsilon": 1.0, "domain_size": 3},
    {"mechanism": "grr", "epsilon": 4.0, "domain_size": 10},
    {"mechanism": "grr", "epsilon": 0.5, "domain_size": 2},
    {"mechanism": "sue", "epsilon": 1.0, "domain_size": 5},
    {"mechanism": "sue", "epsilon": 2.0, "domain_size": 64},
    {"mechanism": "sue", "epsilon": 1.0, "domain_size": 65},
    {"mechanism": "oue", "epsilon": 1.0, "domain_size": 8},
    {"mechanism": "oue", "epsilon": 3.5, "domain_size": 65},
    {"mechanism": "oue", "epsilon": 1.0, "domain_size": 300},
    {"mechanism": "olh", "epsilon": 2.0, "domain_size": 10},
    {"mechanism": "olh", "epsilon": 1.0, "domain_size": 1000, "g": 4},
    {"mechanism": "blh", "epsilon": 1.0, "domain_size": 20},
    {"mechanism": "hr", "epsilon": 1.0, "domain_size": 7},
    {"mechanism": "hr", "epsilon": 2.0, "domain_size": 100},
    {"mechanism": "ss", "epsilon": 1.0, "domain_size": 8},
    {"mechanism": "ss", "epsilon": 1.0, "domain_size": 100, "s": 3},
    {"mechanism": "ss", "epsilon": 0.5, "domain_size": 300, "s": 120},
    {"mechanism": "memo-grr", "epsilon": 1.0, "domain_size": 4, "permanent_epsilon": 4.0},
    {"mechanism": "memo-sue", "epsilon": 1.0, "domain_size": 12, "permanent_epsilon": 3.0},
    {"mechanism": "memo-oue", "epsilon": 1.0, "domain_size": 16, "permanent_epsilon": 4.0},
    {"mechanism": "memo-oue", "epsilon": 0.5, "domain_size": 100, "permanent_epsilon": 2.0},
    {
        "mechanism": "pram",
        "domain_size": 3,
        "matrix": [["1/2", "1/4", "1/4"], ["1/4", "1/2", "1/4"], [0.25, 0.25, 0.5]],
    },
    {
        "mechanism": "pram",
        "domain_size": 4,
        "matrix": [
            [0.7, 0.1, 0.1, 0.1],
            [0.15, 0.6, 0.15, 0.1],
            [0.1, 0.15, 0.6, 0.15],
            [0.1, 0.1, 0.1, 0.7],
        ],
    },
    # At AWKWARD_EPSILONS: a libm's exp in place of the correctly rounded one changes p or q.
    {"mechanism": "grr", "epsilon": 0.27, "domain_size": 3},
    {"mechanism": "grr", "epsilon": 6.218, "domain_size": 64},
    {"mechanism": "olh", "epsilon": 2.467, "domain_size": 2},
    {"mechanism": "sue", "epsilon": 4.934, "domain_size": 2},
    {"mechanism": "ss", "epsilon": 6.218, "domain_size": 64},
    {"mechanism": "memo-grr", "epsilon": 1.0, "domain_size": 64, "permanent_epsilon": 6.218},
]


def _build(spec: dict[str, Any]) -> mechanisms.FrequencyOracle:
    rest = {k: v for k, v in spec.items() if k not in ("mechanism", "epsilon", "domain_size")}
    return mechanisms.create(
        spec["mechanism"], epsilon=spec.get("epsilon"), domain_size=spec["domain_size"], **rest
    )


def _probabilities(m: mechanisms.FrequencyOracle) -> dict[str, Any]:
    """The exact numbers a device samples with, per mechanism."""
    out: dict[str, Any] = {}
    if isinstance(m, mechanisms.PostRandomization):
        out["matrix"] = [[rational(e) for e in row] for row in m.rows]
        out["thresholds"] = [
            {"denominator": str(d), "cumulative": [str(c) for c in cum]} for d, cum in m._thresholds
        ]
        return out
    out["p"] = rational(m.p)
    out["q"] = rational(m.q)
    if isinstance(m, mechanisms.Memoized):
        p_star, q_star = m.composed_probabilities()
        out["p_star_exact"] = rational(p_star)
        out["q_star_exact"] = rational(q_star)
        perm = m.permanent
        out["permanent"] = {"p": rational(perm.p), "q": rational(perm.q)}
        out["irr_keep"] = rational(m.irr_keep)
        if isinstance(m, memoized._MemoizedUnary):
            out["irr_flip"] = rational(m.irr_flip)
    if isinstance(m, mechanisms.LocalHashing):
        out["g"] = m.g
        out["prime"] = m.prime
        out["keep"] = rational(m.keep)
    if isinstance(m, mechanisms.GeneralizedRR | mechanisms.SubsetSelection):
        out["keep"] = rational(m.keep)
    if isinstance(m, mechanisms.SubsetSelection):
        out["s"] = m.s
        out["dense"] = m.dense
    if isinstance(m, mechanisms.HadamardResponse):
        out["order"] = m.order
    return out


def _values(k: int) -> list[int]:
    return sorted({0, 1, k // 2, k - 1})


def _cases(
    prefix: str,
    inputs: Iterable[Any],
    perturb: Callable[[Any, StreamRandom], Any],
    describe: Callable[[Any], dict[str, Any]],
    derived: Callable[[Any, Any], dict[str, Any]] | None = None,
    shown: Callable[[Any], str] = str,
) -> list[dict[str, Any]]:
    """Three cases an input: ``describe(x)``, the bytes drawn (from the stream labelled
    ``prefix:shown(x):rep``), what ``derived(x, payload)`` adds, and the payload."""
    cases = []
    for x in inputs:
        for rep in range(3):
            rng = StreamRandom(f"{prefix}:{shown(x)}:{rep}")
            payload = perturb(x, rng)
            cases.append(
                {
                    **describe(x),
                    **rng.record(),
                    **(derived(x, payload) if derived else {}),
                    "payload": payload,
                    "payload_json": compact(payload),
                }
            )
    return cases


def oracle_vectors() -> dict[str, Any]:
    """Every frequency oracle: spec → exact probabilities; value + bytes → payload."""
    out = []
    for n, spec in enumerate(ORACLE_SPECS):
        m = _build(spec)
        cases = _cases(f"oracle:{n}", _values(m.domain_size), m.perturb, lambda v: {"value": v})
        out.append(
            {
                "spec": spec,
                "params": m.params(),
                "probabilities": _probabilities(m),
                "wire_bytes": m.wire_bytes,
                "cases": cases,
            }
        )
    return {"format": FORMAT, "mechanisms": out}


# -- memoized: the permanent response --------------------------------------------------

SECRETS = (bytes(range(32)), bytes.fromhex("ff" * 16), hashlib.sha256(b"device").digest())


def memoized_vectors() -> dict[str, Any]:
    """The PRR's HMAC seed and SHAKE-256 stream, the PRR, and PRR + IRR reports."""
    out = []
    for n, spec in enumerate(s for s in ORACLE_SPECS if s["mechanism"].startswith("memo-")):
        m = _build(spec)
        assert isinstance(m, mechanisms.Memoized)
        prrs = []
        for secret in SECRETS:
            for metric, version in (("app.theme", 1), ("", 0), ("müsli.ünits", 7)):
                for value in _values(m.domain_size):
                    info = memoized.prr_info(metric, version, value)
                    seed = hmac.digest(secret, info, hashlib.sha256)
                    prr = m.permanent_response(value, secret, metric, version)
                    rng = StreamRandom(f"memo:{n}:{secret.hex()}:{metric}:{value}")
                    report = m.perturb_memoized(value, secret, metric, version, rng)
                    prrs.append(
                        {
                            "secret": secret.hex(),
                            "metric": metric,
                            "version": version,
                            "value": value,
                            "info": info.hex(),
                            "seed": seed.hex(),
                            "stream_head": hashlib.shake_256(seed).digest(64).hex(),
                            "permanent_response": prr,
                            "irr": rng.record(),
                            "payload": report,
                            "payload_json": compact(report),
                        }
                    )
        out.append({"spec": spec, "params": m.params(), "cases": prrs})
    return {"format": FORMAT, "label": memoized.PRR_LABEL.decode(), "mechanisms": out}


# -- numeric ------------------------------------------------------------------------------

NUMERIC_SPECS = [
    ("duchi", 0.5),
    ("duchi", 1.0986122886681098),
    ("duchi", 4.0),
    ("pm", 1.0),
    ("pm", 4.0),
    ("hybrid", 0.5),
    ("hybrid", 1.0),
    ("hybrid", 6.0),
    # At AWKWARD_EPSILONS: a libm's expm1 changes the hybrid's α.
    ("hybrid", 2.1),
    ("hybrid", 3.5),
    ("pm", 0.24),
]

NUMERIC_INPUTS = (-1.0, -0.3333333333333333, 0.0, 2**-40, 0.1, 0.5, 0.9999999999999999, 1.0)

SCALE_CASES = (
    (0.0, 0.0, 120.0),
    (120.0, 0.0, 120.0),
    (37.5, 0.0, 120.0),
    (0.1, -1.0, 1.0),
    (-3.0, -7.25, 1e6),
    (1e300, -1e300, 1e300),
)


def numeric_vectors() -> dict[str, Any]:
    """Scaling, the grid constants, and value + bytes → payload of each numeric mechanism."""
    out = []
    for n, (name, eps) in enumerate(NUMERIC_SPECS):
        m = mechanisms.create_numeric(name, eps)
        constants: dict[str, Any] = {"bound_units": str(m.bound_units)}
        if isinstance(m, mechanisms.PiecewiseMechanism | mechanisms.HybridMechanism):
            pm = m if isinstance(m, mechanisms.PiecewiseMechanism) else m.pm
            constants["window"] = str(pm.window)
            constants["cells"] = str(pm.cells)
        if isinstance(m, mechanisms.HybridMechanism):
            constants["alpha"] = rational(m.alpha)
            constants["duchi_bound_units"] = str(m.duchi.bound_units)
        cases = _cases(
            f"numeric:{n}",
            NUMERIC_INPUTS,
            m.perturb,
            lambda x: {"x": x, "x_exact": rational(x)},
            lambda x, payload: {"units": str(int(payload["y"] * numeric.SCALE))},
            shown=repr,
        )
        out.append({"params": m.params(), "constants": constants, "cases": cases})
    scaling = [
        {
            "value": v,
            "range": [lo, hi],
            "x": numeric.scale(v, lo, hi),
            "x_exact": rational(numeric.scale(v, lo, hi)),
        }
        for v, lo, hi in SCALE_CASES
    ]
    return {
        "format": FORMAT,
        "resolution_bits": numeric.RESOLUTION_BITS,
        "scaling": scaling,
        "mechanisms": out,
    }


# -- joint ----------------------------------------------------------------------------------

JOINT_SPECS: tuple[tuple[float, tuple[int, ...], str], ...] = (
    (2.0, (3, 4), "joint"),
    (2.0, (4, 4, 4), "joint"),
    (1.0, (4, 8, 16), "marginals"),
    (4.0, (3, 4, 5), "marginals"),
)
"""Joint layouts: one GRR group, one OLH group over 64 cells, OLH pairs, GRR pairs."""


def joint_vectors() -> dict[str, Any]:
    """Joint mechanisms: params, the counters' layout, each case's cell, tuple + bytes → payload."""
    out = []
    for n, (eps, sizes, method) in enumerate(JOINT_SPECS):
        m = joint.joint_mechanism(eps, sizes, method)
        tuples = [
            tuple(0 for _ in sizes),
            tuple(k - 1 for k in sizes),
            tuple(k // 2 for k in sizes),
        ]

        def cell(values: Any, payload: Any, m: Any = m) -> dict[str, Any]:
            return {"cell": m.cell(values, m.groups[payload["g"]])}

        cases = _cases(f"joint:{n}", tuples, m.perturb, lambda v: {"values": list(v)}, cell)
        out.append(
            {
                "params": m.params(),
                "method": m.method,
                "counters": m.counters,
                "offsets": list(m.offsets),
                "cases": cases,
            }
        )
    return {"format": FORMAT, "mechanisms": out}


# -- strings --------------------------------------------------------------------------------

NORMALISE_CASES = (
    ("", 4),
    ("abc", 4),
    ("abcd", 4),
    ("abcdef", 4),
    ("café", 4),  # é is 2 bytes: cut before it
    ("cafe\u0301", 8),  # e + combining acute: NFC makes it é
    ("日本語", 4),  # 3-byte characters: cut to one
    ("日本語", 6),
    ("a😀b", 4),  # a 4-byte character that fits exactly
    ("a😀b", 3),  # ... and one that does not
    ("Å", 2),  # U+212B ANGSTROM SIGN, NFC → U+00C5
)

STRING_SPECS: list[dict[str, Any]] = [
    {"epsilon": 4.0, "max_length": 4, "rows": 2, "cells": 8, "salt": "00"},
    {"epsilon": 2.0, "max_length": 6, "rows": 3, "cells": 5, "salt": "a1b2c3"},
    {"epsilon": 4.0, "max_length": 16, "salt": strings.derived_salt("search.term")},
]


def string_vectors() -> dict[str, Any]:
    """Normalisation, the sketch's hash coefficients and cells, and perturbation."""
    normalised = []
    for value, length in NORMALISE_CASES:
        normalised.append(
            {"value": value, "max_length": length, "padded": strings.normalise(value, length).hex()}
        )
    refused = [{"value": "a\x00b", "max_length": 4, "error": "NUL"}]
    out = []
    for n, spec in enumerate(STRING_SPECS):
        m = strings.StringSketch(**spec)
        a, cb = m.coefficients
        values = ["", "a", "abc", "ab\u00e9", "zzzzzzzzzzzzzzzzzzzz", "日本"]
        cells = []
        for value in values:
            padded = strings.normalise(value, m.max_length)
            cells.append(
                {
                    "value": value,
                    "padded": padded.hex(),
                    "cells": [
                        [m.cell(padded, level, row) for row in range(m.rows)]
                        for level in range(m.levels)
                    ],
                }
            )
        cases = _cases(f"string:{n}", values, m.perturb, lambda v: {"value": v})
        out.append(
            {
                "spec": spec,
                "params": m.params(),
                "inner": {"p": rational(m.inner.p), "q": rational(m.inner.q)},
                "coefficients": {"a": list(a), "c_b": [list(x) for x in cb]},
                "cells": cells,
                "cases": cases,
            }
        )
    return {
        "format": FORMAT,
        "hash_prime": strings.HASH_PRIME,
        "derived_salts": [
            {"name": name, "salt": strings.derived_salt(name)}
            for name in ("search.term", "a", "app.page-title")
        ],
        "normalise": normalised,
        "refused": refused,
        "sketches": out,
    }


# -- the wire: definitions, reports and a batch ---------------------------------------------

LONGITUDINAL = {"budget": {"reports_per_period": 1, "period": "day"}}
"""What a memoized metric's spec needs beside its ``longitudinal`` (a budget)."""

WIRE_SPECS: list[tuple[str, dict[str, Any], Any]] = [
    ("app.consent", {"domain": ["no", "yes"], "epsilon": 0.7, "mechanism": "rr"}, "yes"),
    (
        "app.theme",
        {"domain": ["light", "dark", "auto"], "epsilon": 1.0, "mechanism": "grr"},
        "dark",
    ),
    ("app.tab", {"domain": [f"t{i}" for i in range(10)], "epsilon": 1.5, "mechanism": "sue"}, 9),
    ("app.page", {"domain": [f"p{i}" for i in range(32)], "epsilon": 2.0, "mechanism": "oue"}, 7),
    # `auto` picks OLH for a large domain: the default metric the browser SDK once sent
    # without its a and b.
    ("app.screen", {"domain": [f"s{i}" for i in range(300)], "epsilon": 1.0}, 299),
    (
        "app.font",
        {
            "domain": [f"f{i}" for i in range(50)],
            "epsilon": 2.0,
            "mechanism": "olh",
            "options": {"g": 5},
        },
        "f3",
    ),
    (
        "app.locale",
        {"domain": [f"l{i}" for i in range(20)], "epsilon": 1.0, "mechanism": "blh"},
        11,
    ),
    (
        "app.region",
        {"domain": [f"r{i}" for i in range(7)], "epsilon": 1.0, "mechanism": "hr"},
        "r6",
    ),
    (
        "app.widget",
        {
            "domain": [f"w{i}" for i in range(100)],
            "epsilon": 1.0,
            "mechanism": "ss",
            "options": {"s": 3},
        },
        42,
    ),
    (
        "app.lang",
        {
            "domain": ["en", "de", "fr", "ja"],
            "epsilon": 1.0,
            "mechanism": "grr",
            "longitudinal": {"permanent_epsilon": 4.0},
            **LONGITUDINAL,
        },
        "ja",
    ),
    (
        "app.menu",
        {
            "domain": [f"m{i}" for i in range(12)],
            "epsilon": 1.0,
            "mechanism": "sue",
            "longitudinal": {"permanent_epsilon": 3.0},
            **LONGITUDINAL,
        },
        5,
    ),
    (
        "app.sidebar",
        {
            "domain": [f"b{i}" for i in range(16)],
            "epsilon": 1.0,
            "mechanism": "oue",
            "longitudinal": {"permanent_epsilon": 4.0},
            **LONGITUDINAL,
        },
        15,
    ),
    (
        "app.mood",
        {
            "domain": ["low", "mid", "high"],
            "mechanism": "pram",
            "options": {
                "matrix": [["1/2", "1/4", "1/4"], ["1/4", "1/2", "1/4"], [0.25, 0.25, 0.5]]
            },
        },
        "high",
    ),
    ("session.minutes", {"kind": "numeric", "range": [0, 120], "epsilon": 1.0}, 37.5),
    (
        "session.duchi",
        {"kind": "numeric", "range": [-7.25, 1e6], "epsilon": 0.5, "mechanism": "duchi"},
        -3.0,
    ),
    ("session.pm", {"kind": "numeric", "range": [0, 1], "epsilon": 4.0, "mechanism": "pm"}, 1),
    (
        "session.hybrid",
        {"kind": "numeric", "range": [-1, 1], "epsilon": 2.1, "mechanism": "hybrid"},
        0.1,
    ),
    (
        "page.load_ms",  # a log-scale distribution: B = 4, five levels of OUE
        {
            "kind": "numeric",
            "range": [1, 60000],
            "epsilon": 1.0,
            "distribution": {"bins": 1024, "scale": "log"},
        },
        1234.5,
    ),
    (
        "battery.drain",  # linear, B = 2: 64 bins, six levels
        {
            "kind": "distribution",
            "range": [-5, 27.5],
            "epsilon": 2.0,
            "distribution": {"resolution": 0.5, "branching": 2},
            "mechanism": "hh",
        },
        27.5,
    ),
    (
        "battery.flat",  # one level: no level drawn
        {"kind": "numeric", "range": [0, 1], "epsilon": 4.0, "distribution": {"bins": 16}},
        0.0,
    ),
    ("search.term", {"kind": "string", "max_length": 8, "epsilon": 4.0}, "café au lait"),
    (
        "search.emoji",
        {
            "kind": "string",
            "max_length": 6,
            "epsilon": 2.0,
            "options": {"rows": 3, "cells": 5, "salt": "a1b2c3"},
        },
        "a😀b\u0301",
    ),
    (
        "app.crashes",
        {
            "kind": "joint",
            "attributes": [
                {"name": "os", "domain": ["android", "ios", "web"]},
                {"name": "version", "domain": ["1.0", "1.1", "2.0", "2.1"]},
                {"name": "crash", "domain": ["none", "oom", "anr"]},
            ],
            "epsilon": 2.0,
        },
        {"os": "ios", "version": "2.0", "crash": "oom"},
    ),
    (
        "app.pair",
        {
            "kind": "joint",
            "attributes": [
                {"name": "a", "domain": ["x", "y", "z"]},
                {"name": "b", "domain": ["1", "2", "3", "4"]},
            ],
            "epsilon": 2.0,
            "mechanism": "joint",
        },
        ["z", "4"],
    ),
    (
        "app.cube",  # one OLH group over 64 cells
        {
            "kind": "joint",
            "attributes": [{"name": n, "domain": ["a", "b", "c", "d"]} for n in ("p", "q", "r")],
            "epsilon": 2.0,
            "mechanism": "joint",
        },
        {"p": "d", "q": "a", "r": "c"},
    ),
    (
        "app.grid",  # OLH pairs
        {
            "kind": "joint",
            "attributes": [
                {"name": "p", "domain": [f"p{i}" for i in range(4)]},
                {"name": "q", "domain": [f"q{i}" for i in range(8)]},
                {"name": "r", "domain": [f"r{i}" for i in range(16)]},
            ],
            "epsilon": 1.0,
            "mechanism": "marginals",
        },
        [3, 7, 15],
    ),
    (
        "app.mixed",  # GRR and OLH pairs
        {
            "kind": "joint",
            "attributes": [
                {"name": "p", "domain": [f"p{i}" for i in range(3)]},
                {"name": "q", "domain": [f"q{i}" for i in range(4)]},
                {"name": "r", "domain": [f"r{i}" for i in range(5)]},
            ],
            "epsilon": 4.0,
            "mechanism": "marginals",
        },
        {"p": "p2", "q": "q0", "r": "r4"},
    ),
    (
        "app.theme.by_platform",
        {
            "domain": ["light", "dark", "auto"],
            "epsilon": 1.0,
            "mechanism": "grr",
            "dimensions": [
                {"name": "platform", "values": ["ios", "android", "web"]},
                {"name": "app_version", "values": ["1.0", "2.0"]},
            ],
        },
        "auto",
    ),
    (
        # Names a JS object orders first ("10", "2": integer-like keys), and values a JSON
        # encoder must escape (quotes, backslash, non-ASCII, U+2028, an astral character).
        "app.page.by_build",
        {
            "domain": [f"p{i}" for i in range(300)],
            "epsilon": 1.0,
            "dimensions": [
                {"name": "zone", "values": ["nörd", "s\u00fcd"]},
                {"name": "10", "values": ['say "hi"', "back\\slash"]},
                {"name": "2", "values": ["日本", "line\u2028sep", "😀"]},
            ],
        },
        "p150",
    ),
    (
        "page.haar",  # HaarHRR, log scale: a level, a Hadamard row, one randomized bit
        {
            "kind": "numeric",
            "range": [1, 60000],
            "epsilon": 0.5,
            "distribution": {"bins": 1024, "scale": "log"},
            "mechanism": "haar",
        },
        1234.5,
    ),
    (
        "battery.haar",  # linear, 4 bins: two levels, the top value
        {
            "kind": "distribution",
            "range": [-5, 27.5],
            "epsilon": 4.0,
            "distribution": {"bins": 4},
            "mechanism": "haar",
        },
        27.5,
    ),
]
"""One definition of every mechanism and kind: each frequency oracle (``auto``'s OLH
too), memoized, PRAM, the numeric mechanisms, strings, each joint layout (a GRR or OLH
group, GRR or OLH pairs), and public dimensions."""

WIRE_SECRET = bytes(range(100, 132))

WIRE_DIMENSIONS = {
    "app.theme.by_platform": {"platform": "web", "app_version": "2.0"},
    "app.page.by_build": {"2": "😀", "zone": "nörd", "10": 'say "hi"'},
}
"""Public dimensions of the reports whose metric declares them (sent in the clear)."""


def wire_vectors() -> dict[str, Any]:
    """Definitions as served, reports built from them (each as its exact JSON), and one
    batch's exact body."""
    items = []
    reports = []
    for n, (name, spec, value) in enumerate(WIRE_SPECS):
        definition = wire.parse_spec(name, spec, version=n + 1)
        served = definition.to_dict()
        rid = hashlib.sha256(f"report:{n}".encode()).hexdigest()[:32]
        rng = StreamRandom(f"wire:{n}")
        with mock.patch("client_sdk.wire.report.new_report_id", lambda rid=rid: rid):
            dimensions = WIRE_DIMENSIONS.get(name)
            report = wire.build_report(definition, value, rng, WIRE_SECRET, dimensions)
        reports.append(report)
        items.append(
            {
                "definition": served,
                "value": value,
                **({"dimensions": dimensions} if dimensions else {}),
                "secret": WIRE_SECRET.hex() if definition.longitudinal else None,
                "id": rid,
                **rng.record(),
                "report": report,
                "report_json": compact(report),
            }
        )
    body = batch_body(reports)
    return {"format": FORMAT, "reports": items, "batch": body}


def batch_body(reports: list[dict[str, Any]]) -> str:
    """The exact body of ``POST /v1/reports`` with ``reports``, as the SDK's uploader
    joins the reports' encodings (``client_sdk.uploader``)."""
    return '{"reports":[' + ",".join(compact(r) for r in reports) + "]}"


# -- Oblivious HTTP: the sealed requests -----------------------------------------------------

OHTTP_KEY_ID = 7
OHTTP_GATEWAY_KEY = hashlib.sha256(b"conformance:ohttp:gateway").digest()
"""The gateway's X25519 private key of these vectors (any 32 bytes are one)."""

OHTTP_INGEST_KEY = "ldp_0123456789ab_" + base64.urlsafe_b64encode(
    hashlib.sha256(b"conformance:ohttp:ingest-key").digest()
).decode().rstrip("=")
"""An app's ingest key, sealed inside the requests that carry one (its shape only)."""

OHTTP_REQUESTS: tuple[tuple[str, str, str, str | None, str | None], ...] = (
    ("https://collector.example", "POST", "/v1/reports", "wire.json", None),
    ("http://127.0.0.1:8000/telemetry", "POST", "/v1/reports", '{"reports":[]}', None),
    ("https://collector.example", "GET", "/v1/metrics/app.theme", None, None),
    ("https://[::1]:8443", "GET", "/v1/metrics/app.lang?version=3", None, None),
    ("https://shop.example", "POST", "/v1/reports", '{"reports":[]}', OHTTP_INGEST_KEY),
    ("https://shop.example", "GET", "/v1/metrics/app.theme", None, OHTTP_INGEST_KEY),
)
"""(collector URL, method, path, body: ``"wire.json"`` for its batch, None for a GET,
the app's ingest key or None)."""


def gateway_keys(private_key: bytes, key_id: int) -> bytes:
    """The ``application/ohttp-keys`` of one X25519 gateway key (its config alone)."""

    return encode_key_configs([KeyConfig(key_id, 0x0020, public_key_of(private_key), SUPPORTED)])


def sealed_request(
    keys: bytes,
    url: str,
    method: str,
    path: str,
    body: str | None,
    ephemeral: bytes,
    ingest_key: str | None = None,
) -> dict[str, Any]:
    """``method path`` (with ``body``) to the collector at ``url`` as the SDK seals it
    through a relay for ``keys``: its Binary HTTP request and ``message/ohttp-req`` body
    under the ephemeral private key ``ephemeral``."""

    transport = ObliviousTransport(
        url, "https://relay.example/relay", 5.0, pinned=keys, ingest_key=ingest_key
    )
    request = transport.binary_request(None if body is None else body.encode(), path, method)
    transport.close()
    sealed, _ = encapsulate_request(decode_key_configs(keys)[0], request, ephemeral_key=ephemeral)
    return {
        "collector": url,
        "method": method,
        "path": path,
        "body": body,
        "ingest_key": ingest_key,
        "binary_request": request.hex(),
        "ephemeral_private_key": ephemeral.hex(),
        "ephemeral_public_key": public_key_of(ephemeral).hex(),
        "encapsulated_request": sealed.hex(),
    }


def ohttp_vectors() -> dict[str, Any]:
    """A gateway key configuration, and requests as the SDK seals them for it: the Binary
    HTTP request, the ephemeral key, the ``message/ohttp-req`` body."""
    keys = gateway_keys(OHTTP_GATEWAY_KEY, OHTTP_KEY_ID)
    batch = wire_vectors()["batch"]
    out = []
    for n, (url, method, path, body, key) in enumerate(OHTTP_REQUESTS):
        ephemeral = hashlib.sha256(f"conformance:ohttp:ephemeral:{n}".encode()).digest()
        sent = batch if body == "wire.json" else body
        sealed = sealed_request(keys, url, method, path, sent, ephemeral, key)
        out.append({**sealed, "body": body})
    return {
        "format": FORMAT,
        "gateway_private_key": OHTTP_GATEWAY_KEY.hex(),
        "keys": keys.hex(),
        "requests": out,
    }


GENERATORS: dict[str, Callable[[], dict[str, Any]]] = {
    "exp.json": exp_table,
    "oracles.json": oracle_vectors,
    "memoized.json": memoized_vectors,
    "numeric.json": numeric_vectors,
    "strings.json": string_vectors,
    "joint.json": joint_vectors,
    "wire.json": wire_vectors,
    "ohttp.json": ohttp_vectors,
}


def render() -> dict[str, str]:
    """Every vector file's text, by file name."""
    return {
        name: json.dumps(make(), indent=1, ensure_ascii=False) + "\n"
        for name, make in GENERATORS.items()
    }


def main() -> None:
    """Rewrite ``conformance/vectors/``."""
    VECTORS.mkdir(exist_ok=True)
    for name, text in render().items():
        (VECTORS / name).write_text(text, encoding="utf-8")
        print(f"wrote {VECTORS / name} ({len(text):,} bytes)")


if __name__ == "__main__":
    main()
