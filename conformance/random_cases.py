"""Random cross-SDK cases: what no one thought to write down as a fixed vector.

``python conformance/random_cases.py --seed S [--count N]`` prints, as JSON, N random metric
definitions (every kind and mechanism, public dimensions, awkward ε, domains, ranges,
labels and strings) as the collector serves them, a value and the random bytes of each,
and what the Python SDK puts on the wire for them: each report's exact JSON, the batch
body of them all, and Oblivious HTTP requests sealed under random keys to random collector
URLs. Another SDK replays the same bytes and must write the same bytes
(``client_js/test/random.test.js``). The seed draws everything (a different one each
run; printed, so a failure can be replayed). In full: ``conformance/README.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any
from unittest import mock

HERE = Path(__file__).resolve().parent
for path in (HERE.parent, HERE):  # run as a script from anywhere
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from generate import (  # noqa: E402
    StreamRandom,
    batch_body,
    compact,
    gateway_keys,
    sealed_request,
)

from client_sdk import wire  # noqa: E402
from client_sdk.errors import DefinitionError  # noqa: E402

ORACLES = ("auto", "rr", "grr", "sue", "oue", "olh", "blh", "hr", "ss", "pram")
MEMOIZED = ("memo-grr", "memo-sue", "memo-oue")
NUMERIC = ("auto", "duchi", "pm", "hybrid")

CHARACTERS = (
    "abcxyz019 _-.",
    '"\\/\b\f\n\r\t\x01\x1f\x7f',  # what a JSON encoder escapes (and DEL, which Python does)
    "éüßñøÅ\u00a0",  # Latin-1
    "\u0301\u0308",  # combining marks (NFC folds some into the letter before)
    "日本語中文한국어",
    "\u2028\u2029\ufeff\uffff",
    "😀🎉𝄞\U0010fffd",  # astral: a surrogate pair in UTF-16
)
"""Pools of characters for labels, dimension values and string values."""

DIMENSION_NAMES = ("platform", "app_version", "10", "2", "0", "z", "a.b", "x-y", "07")
"""Dimension names, some integer-like: a JS object iterates those first, whatever the
order they were declared in."""


def _text(r: random.Random, low: int, high: int) -> str:
    pools = r.sample(CHARACTERS, r.randint(1, len(CHARACTERS)))
    return "".join(r.choice(r.choice(pools)) for _ in range(r.randint(low, high)))


def _labels(r: random.Random, k: int) -> list[str]:
    """k distinct labels (some the index-like "0", "1", ...: a label, not an index)."""
    labels: list[str] = []
    while len(labels) < k:
        label = str(len(labels)) if r.random() < 0.1 else _text(r, 1, 12)
        if label.strip() and label not in labels:
            labels.append(label)
    return labels


def _epsilon(r: random.Random, low: float = 0.05, high: float = 12.0) -> float:
    """ε log-uniform in [low, high]: often a float of 17 digits, sometimes a round one."""
    eps = math.exp(r.uniform(math.log(low), math.log(high)))
    return round(eps, r.choice((1, 2, 17, 17, 17)))


def _name(r: random.Random, n: int) -> str:
    head = r.choice("abcdefghijklmnopqrstuvwxyz0123456789")
    tail = "".join(
        r.choice("abcdefghijklmnopqrstuvwxyz0123456789_.-") for _ in range(r.randint(0, 20))
    )
    return f"{head}{tail}.n{n}"


def _categorical(r: random.Random) -> tuple[dict[str, Any], Any]:
    mechanism = r.choice((*ORACLES, *MEMOIZED))
    if mechanism == "rr":
        k = 2
    elif mechanism == "pram":
        k = r.randint(2, 6)
    else:
        k = int(math.exp(r.uniform(math.log(2), math.log(1500))))
    spec: dict[str, Any] = {"domain": _labels(r, k), "epsilon": _epsilon(r), "mechanism": mechanism}
    if mechanism == "olh" and r.random() < 0.5:
        spec["options"] = {"g": r.randint(2, 40)}
    if mechanism == "ss" and r.random() < 0.5:
        spec["options"] = {"s": r.randint(1, k - 1)}
    if mechanism == "pram":
        rows = []
        for _ in range(k):
            weights = [r.randint(1, 9) for _ in range(k)]
            rows.append([str(Fraction(w, sum(weights))) for w in weights])
        spec["options"] = {"matrix": rows}
        if r.random() < 0.5:
            del spec["epsilon"]  # read off the matrix
        else:
            spec["epsilon"] = 20.0  # a ceiling
    if mechanism in MEMOIZED or (mechanism in ("auto", "grr", "sue", "oue") and r.random() < 0.3):
        if mechanism in MEMOIZED:
            spec["mechanism"] = mechanism.removeprefix("memo-")
        spec["longitudinal"] = {"permanent_epsilon": round(spec["epsilon"] * r.uniform(1, 6), 6)}
        spec["budget"] = {
            "reports_per_period": r.randint(1, 5),
            "period": r.choice(("day", "week")),
        }
    index = r.randrange(k)
    return spec, (index if r.random() < 0.4 else spec["domain"][index])


def _numeric(r: random.Random) -> tuple[dict[str, Any], Any]:
    scale = 10 ** r.randint(-3, 8)
    lo = r.choice((0, -1, r.uniform(-1, 1) * scale, -scale))
    hi = lo + r.choice((1, r.uniform(0.001, 2) * scale, scale))
    if r.random() < 0.5:
        lo, hi = round(lo), round(hi) + 1
    spec = {
        "kind": "numeric",
        "range": [lo, hi],
        "epsilon": _epsilon(r),
        "mechanism": r.choice(NUMERIC),
    }
    value = r.choice((lo, hi, r.uniform(lo, hi), (lo + hi) / 2))
    return spec, (round(value) if r.random() < 0.2 and lo <= round(value) <= hi else value)


def _distribution(r: random.Random) -> tuple[dict[str, Any], Any]:
    log = r.random() < 0.4
    spec, value = _numeric(r)
    del spec["mechanism"]
    low, high = spec["range"]
    if log:
        spec["range"] = [abs(low) + 1e-3, abs(low) + 1e-3 + (high - low)]
        value = spec["range"][0] + (value - low)
        value = min(max(value, spec["range"][0]), spec["range"][1])
    bins = 1 << r.randint(2, 12)
    shape: dict[str, Any] = {"bins": bins, "scale": "log" if log else "linear"}
    if r.random() < 0.3:
        divisors = [1 << b for b in range(1, 13) if (bins.bit_length() - 1) % b == 0]
        shape["branching"] = r.choice(divisors)
    elif r.random() < 0.4:
        spec["mechanism"] = "haar"
    spec["distribution"] = shape
    return spec, value


def _string(r: random.Random) -> tuple[dict[str, Any], Any]:
    spec: dict[str, Any] = {
        "kind": "string",
        "max_length": r.randint(1, 32),
        "epsilon": _epsilon(r, 0.5, 12.0),
    }
    if r.random() < 0.4:
        spec["options"] = {"rows": r.randint(1, 6), "cells": r.randint(2, 300)}
        if r.random() < 0.5:
            spec["options"]["salt"] = r.randbytes(r.randint(1, 16)).hex()
    return spec, _text(r, 0, 40)


def _joint(r: random.Random) -> tuple[dict[str, Any], Any]:
    names = r.sample(("os", "version", "crash", "a", "b", "c", "10", "2"), r.randint(2, 4))
    attributes = [{"name": n, "domain": _labels(r, r.randint(2, 12))} for n in names]
    spec = {
        "kind": "joint",
        "attributes": attributes,
        "epsilon": _epsilon(r, 0.5, 12.0),
        "mechanism": r.choice(("auto", "joint", "marginals")),
    }
    picks = [r.randrange(len(a["domain"])) for a in attributes]
    labels = [a["domain"][i] for a, i in zip(attributes, picks, strict=True)]
    form = r.randrange(3)
    if form == 0:
        value: Any = dict(zip(names, labels, strict=True))
        items = list(value.items())
        r.shuffle(items)  # the caller's order is not the wire's
        value = dict(items)
    elif form == 1:
        value = labels
    else:
        value = picks
    return spec, value


def _dimensions(r: random.Random) -> tuple[list[dict[str, Any]], dict[str, str]]:
    names = r.sample(DIMENSION_NAMES, r.randint(1, 3))
    declared = [{"name": n, "values": _labels(r, r.randint(1, 4))} for n in names]
    given = {d["name"]: r.choice(d["values"]) for d in declared}
    items = list(given.items())
    r.shuffle(items)
    return declared, dict(items)


KIND_MAKERS = (
    (_categorical, 55),
    (_numeric, 15),
    (_string, 12),
    (_joint, 18),
    (_distribution, 12),
)


def _case(r: random.Random, n: int, seed: int, secret: bytes) -> dict[str, Any]:
    """One random definition (redrawn until the Python SDK accepts it and the value)."""
    while True:
        make = r.choices([m for m, _ in KIND_MAKERS], [w for _, w in KIND_MAKERS])[0]
        spec, value = make(r)
        dimensions = None
        if r.random() < 0.3:
            spec["dimensions"], dimensions = _dimensions(r)
        try:
            definition = wire.parse_spec(_name(r, n), spec, version=r.randint(1, 10**6))
        except DefinitionError:
            continue  # e.g. too many segments for the domain: draw another
        rid = r.randbytes(16).hex()
        rng = StreamRandom(f"random:{seed}:{n}")
        try:
            with mock.patch("client_sdk.wire.report.new_report_id", lambda rid=rid: rid):
                report = wire.build_report(definition, value, rng, secret, dimensions)
        except ValueError:
            continue
        return {
            "definition": definition.to_dict(),
            "value": value,
            **({"dimensions": dimensions} if dimensions else {}),
            "id": rid,
            **rng.record(),
            "report_json": compact(report),
            "report": report,
        }


def _collector_url(r: random.Random) -> str:
    scheme = r.choice(("http", "https"))
    host = r.choice(("collector.example", "127.0.0.1", "[::1]", "Telemetry.Example.ORG", "a-b.c"))
    port = r.choice(
        ("", f":{r.randint(1, 65535)}", ":8000", ":443" if scheme == "https" else ":80")
    )
    prefix = r.choice(("", "", "/t", "/a/b", "/ldp/", "/x.y-z_0"))
    return f"{scheme}://{host}{port}{prefix}"


def _ohttp(r: random.Random, cases: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """``count`` requests sealed to random gateway keys: uploads of random subsets of the
    cases' reports and definition fetches, to random collector URLs."""
    out = []
    for _ in range(count):
        keys = gateway_keys(r.randbytes(32), r.randrange(256))
        url = _collector_url(r)
        body: str | None
        if r.random() < 0.6:
            chosen = r.sample(cases, r.randint(0, min(len(cases), 40)))
            method, path, body = "POST", "/v1/reports", batch_body([c["report"] for c in chosen])
        else:
            name = r.choice(cases)["definition"]["name"]
            query = f"?version={r.randint(1, 10**6)}" if r.random() < 0.5 else ""
            method, path, body = "GET", f"/v1/metrics/{name}{query}", None
        request = sealed_request(keys, url, method, path, body, r.randbytes(32))
        out.append({**request, "keys": keys.hex()})
    return out


def random_cases(seed: int, count: int, ohttp: int = 12) -> dict[str, Any]:
    """``count`` random cases drawn from ``seed``, their batch, and ``ohttp`` sealed
    requests. Test data, not privacy: the cases are drawn with :class:`random.Random`."""
    r = random.Random(seed)
    secret = hashlib.sha256(f"random:{seed}:secret".encode()).digest()  # one device
    cases = [_case(r, n, seed, secret) for n in range(count)]
    return {
        "seed": seed,
        "secret": secret.hex(),
        "cases": cases,
        "batch": batch_body([c["report"] for c in cases]),
        "ohttp": _ohttp(r, cases, ohttp),
    }


def main() -> None:
    """Print the cases of ``--seed`` as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, default=300)
    args = parser.parse_args()
    json.dump(random_cases(args.seed, args.count), sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
