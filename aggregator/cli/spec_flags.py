"""The flags of ``ldp metrics create``: one table, one row per key of a metric's spec.

A flag only *places* its text in the spec dict (as JSON would hold it); what the spec
means and what is wrong with it is :func:`client_sdk.wire.parse_spec`'s alone, so the CLI
says exactly what the collector would say. A new spec key is one more :class:`SpecFlag`
row in :data:`SPEC_FLAGS`.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from client_sdk import mechanisms
from client_sdk.wire import BUDGET_PERIODS, KINDS

__all__ = ["SPEC_FLAGS", "SpecFlag", "build_spec", "flags_of", "read_spec_file", "spec_options"]


def scalar(text: str) -> Any:
    """A flag's text as JSON would hold it: ``4`` → 4, ``0.5`` → 0.5, ``abc`` → "abc".

    Not a check: a value of the wrong type reaches ``parse_spec`` as it was typed, and
    its message is the collector's.
    """
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, int | float | bool) else text


def text(value: str) -> str:
    """A flag's text, as it is (names, periods, descriptions)."""
    return value


def labels(value: str) -> list[str] | Any:
    """``--domain``: comma-separated labels, or ``@file.json`` holding a JSON list."""
    if value.startswith("@"):
        try:
            return json.loads(Path(value[1:]).read_text())
        except (OSError, ValueError) as exc:
            raise click.UsageError(f"cannot read {value[1:]}: {exc}") from None
    return [x.strip() for x in value.split(",")]


def pair(value: str) -> list[Any]:
    """``--range``: ``LO,HI`` → [LO, HI] (any other count of parts is parse_spec's to refuse)."""
    return [scalar(x.strip()) for x in value.split(",")]


def option_value(raw: str) -> Any:
    """An option's value: a number or text, a JSON list or object (``[[0.8, 0.2], …]``),
    or ``@file.json`` holding one (pram's ``matrix``)."""
    if raw.startswith("@"):
        try:
            return json.loads(Path(raw[1:]).read_text())
        except (OSError, ValueError) as exc:
            raise click.UsageError(f"cannot read {raw[1:]}: {exc}") from None
    if raw.startswith(("[", "{")):
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise click.UsageError(f"--option value is not JSON: {exc}") from None
    return scalar(raw)


def option_pairs(values: tuple[str, ...]) -> dict[str, Any]:
    """``--option g=4 --option s=2`` → {"g": 4, "s": 2}; ``--option matrix=@m.json``."""
    options: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--option takes KEY=VALUE (e.g. g=4), got {item!r}")
        options[key.strip()] = option_value(raw.strip())
    return options


def _named_lists(flag: str, key: str, example: str) -> Callable[[tuple[str, ...]], Any]:
    """A repeated ``--flag NAME=a,b,c`` → ``[{"name": NAME, key: [a, b, c]}, ...]``."""

    def parse(items: tuple[str, ...]) -> list[dict[str, Any]]:
        out = []
        for item in items:
            name, sep, raw = item.partition("=")
            if not sep or not name.strip():
                raise click.UsageError(f"{flag} takes NAME=a,b,c (e.g. {example}), got {item!r}")
            out.append({"name": name.strip(), key: [x.strip() for x in raw.split(",")]})
        return out

    return parse


attributes = _named_lists("--attribute", "domain", "os=android,ios")
"""``--attribute os=android,ios`` (repeated) → ``[{"name": "os", "domain": [...]}, ...]``."""

dimensions = _named_lists("--dimension", "values", "platform=ios,android,web")
"""``--dimension platform=ios,android`` (repeated) → ``[{"name": ..., "values": [...]}]``."""


@dataclass(frozen=True)
class SpecFlag:
    """One flag of ``ldp metrics create`` and the spec key it sets.

    Attributes:
        flag: the long flag, e.g. ``--permanent-epsilon``.
        path: where its value goes in the spec, e.g. ``("longitudinal", "permanent_epsilon")``.
        parse: its text → the JSON value (no checking: that is parse_spec's).
        help: what it means, for ``--help``.
        short: a one-letter alias, e.g. ``-e``.
        metavar: how ``--help`` names its value.
        multiple: given several times; ``parse`` then takes the tuple of all of them.
    """

    flag: str
    path: tuple[str, ...]
    parse: Callable[[Any], Any]
    help: str
    short: str | None = None
    metavar: str = "TEXT"
    multiple: bool = False

    @property
    def param(self) -> str:
        """The Python name click gives its value: ``--budget-period`` → ``budget_period``."""
        return "spec_" + self.flag.lstrip("-").replace("-", "_")


_ORACLES = ", ".join(n for n in mechanisms.NAMES if n != "auto")
_NUMERIC = ", ".join(n for n in mechanisms.NUMERIC_NAMES if n != "auto")

SPEC_FLAGS: tuple[SpecFlag, ...] = (
    SpecFlag(
        "--kind",
        ("kind",),
        text,
        f"One of {', '.join(KINDS)}: frequencies of --domain's labels (the default), the "
        "mean of a number within --range, strings of --max-length bytes discovered "
        "without a domain (string), or a tuple of --attribute's (joint).",
        metavar="KIND",
    ),
    SpecFlag(
        "--max-length",
        ("max_length",),
        scalar,
        "A string metric's bytes per value (--kind string; its sketch's rows and cells: "
        "--option rows=… --option cells=…).",
        metavar="BYTES",
    ),
    SpecFlag("--domain", ("domain",), labels, "Comma-separated labels, or @file.json.", "-d"),
    SpecFlag(
        "--attribute",
        ("attributes",),
        attributes,
        "NAME=a,b,c: one attribute of a joint metric (--kind joint) and its labels; "
        "repeatable, in the order a device's tuple lists them.",
        metavar="NAME=LABELS",
        multiple=True,
    ),
    SpecFlag(
        "--dimension",
        ("dimensions",),
        dimensions,
        "NAME=a,b,c: a public dimension (e.g. platform=ios,android,web) and its allowed "
        "values, sent in the clear beside each report: NOT protected by ε; repeatable "
        "(at most 64 segments: the product of the value counts).",
        metavar="NAME=VALUES",
        multiple=True,
    ),
    SpecFlag(
        "--range",
        ("range",),
        pair,
        "LO,HI: the range of a numeric metric's values (--kind numeric), e.g. 0,100.",
        metavar="LO,HI",
    ),
    SpecFlag(
        "--epsilon",
        ("epsilon",),
        scalar,
        "ε of one report: the privacy each report keeps (smaller: more private, noisier).",
        "-e",
        metavar="FLOAT",
    ),
    SpecFlag(
        "--mechanism",
        ("mechanism",),
        text,
        "Frequency oracle: auto (least variance for this ε and k; the default) or one of "
        f"{_ORACLES}. A numeric metric: auto or one of {_NUMERIC}.",
        "-m",
        metavar="NAME",
    ),
    SpecFlag(
        "--option",
        ("options",),
        option_pairs,
        "KEY=VALUE, a mechanism's option (olh: g, ss: s, rr: flip_probability, pram: "
        "matrix as JSON or @file.json, string: rows, cells...); repeatable.",
        metavar="KEY=VALUE",
        multiple=True,
    ),
    SpecFlag(
        "--permanent-epsilon",
        ("longitudinal", "permanent_epsilon"),
        scalar,
        "ε∞: makes the metric memoized (RAPPOR-style; grr/sue/oue/auto become memo-*): a "
        "device's reports of one value are together ε∞-private however many; needs a budget.",
        metavar="FLOAT",
    ),
    SpecFlag(
        "--budget-reports",
        ("budget", "reports_per_period"),
        scalar,
        "Device-side budget: at most this many reports per --budget-period.",
        metavar="INT",
    ),
    SpecFlag(
        "--budget-period",
        ("budget", "period"),
        text,
        f"The budget's period: {', '.join(BUDGET_PERIODS)} (UTC).",
        metavar="PERIOD",
    ),
    SpecFlag(
        "--shards",
        ("shards",),
        scalar,
        "Streams to spread a hot metric over (hash slots of a Redis Cluster) [default: 1].",
        metavar="INT",
    ),
    SpecFlag(
        "--description",
        ("description",),
        text,
        "What the metric measures (changing only this keeps the version).",
    ),
    SpecFlag(
        "--retention-hour",
        ("retention", "hour"),
        scalar,
        "Seconds this metric's hour windows are kept after they end "
        "[default: the deployment's, LDP_RETENTION_HOUR_SECONDS, 14 days].",
        metavar="SECONDS",
    ),
    SpecFlag(
        "--retention-day",
        ("retention", "day"),
        scalar,
        "Seconds its day windows are kept after they end "
        "[default: the deployment's, LDP_RETENTION_DAY_SECONDS, 400 days].",
        metavar="SECONDS",
    ),
)
"""Every spec key a flag can set, in ``--help``'s order."""


def flags_of(problem: str) -> list[str]:
    """The flags a parse_spec problem is about: ``"budget.period must..."`` → --budget-period,
    ``"budget must be..."`` → both budget flags; [] when it names no key."""
    key = re.split(r"[^a-z_.]", problem, maxsplit=1)[0]  # the key the problem starts with
    top = key.split(".")[0]
    if re.search(r"\bmatrix\b", problem):  # pram's matrix comes in an option
        return ["--option matrix=…"]
    named = [  # a deeper key the problem names (longitudinal.permanent_epsilon, …)
        row.flag
        for row in SPEC_FLAGS
        if len(row.path) > 1 and re.search(rf"\b{re.escape(row.path[-1])}\b", problem)
    ]
    if named and top in ("", "mechanism"):
        return named
    exact = [row.flag for row in SPEC_FLAGS if ".".join(row.path) == key]
    return exact or [row.flag for row in SPEC_FLAGS if row.path[0] == top]


def spec_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a click command with every flag of :data:`SPEC_FLAGS` (values: None/())."""
    for row in reversed(SPEC_FLAGS):
        names = [row.flag, *([row.short] if row.short else []), row.param]
        command = click.option(
            *names, default=None, multiple=row.multiple, metavar=row.metavar, help=row.help
        )(command)
    return command


def read_spec_file(path: str) -> dict[str, Any]:
    """One metric's spec from a ``.toml`` file, or JSON (any other name)."""
    try:
        raw = Path(path).read_bytes()
        if path.endswith(".toml"):
            spec: Any = tomllib.loads(raw.decode())
        else:
            spec = json.loads(raw)
    except (OSError, ValueError) as exc:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise click.UsageError(f"cannot read --spec {path}: {exc}") from None
    if not isinstance(spec, dict):
        raise click.UsageError(f"--spec {path} must hold one metric's spec (an object/table)")
    return spec


def _place(spec: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """``spec[path[0]]...[path[-1]] = value``, making (or replacing non-dict) levels."""
    node = spec
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value


def build_spec(base: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` (a --spec file's, or {}) with every given flag's value placed over it.

    Args:
        base: the spec read from ``--spec``, or empty.
        values: click's parameters, by :attr:`SpecFlag.param`; None (or ``()``) when not given.
    """
    spec = json.loads(json.dumps(base))  # a deep copy; nested tables stay dicts
    for row in SPEC_FLAGS:
        given = values.get(row.param)
        if given is None or (row.multiple and not given):
            continue
        value = row.parse(given)
        if row.multiple and isinstance(spec.get(row.path[0]), dict):
            value = {**spec[row.path[0]], **value}  # --option adds to the file's options
        _place(spec, row.path, value)
    return spec
