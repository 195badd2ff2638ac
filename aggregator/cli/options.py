"""Every option two ``ldp`` commands share, declared once: mechanism, ε, k, users,
confidence, seed, ``--json``; the string metrics' options of ``plan`` and ``simulate``;
where ``export``, ``estimates`` and ``keys`` read; what ``serve`` and ``demo`` run.

A command's own options stay beside it; an option used twice lives here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from client_sdk import mechanisms

__all__ = [
    "distribution_asks",
    "DEFAULT_URL",
    "AS_JSON",
    "CONCENTRATION",
    "DOMAIN",
    "EPSILON",
    "FIND",
    "KIND",
    "MAX_LENGTH",
    "MAX_USERS",
    "MECHANISM",
    "MEMOIZED",
    "MIN_SEGMENT_REPORTS",
    "MIN_WIDTH",
    "PERMANENT_EPSILON",
    "POWER",
    "ESTIMAND",
    "READ_CONFIDENCE",
    "SEED",
    "VOCABULARY",
    "ZIPF_S",
    "build_mechanism",
    "usage_errors",
    "confidence_option",
    "distribution_option",
    "domain_option",
    "fake_fraction_option",
    "mechanism_option",
    "ReadFrom",
    "ServerSettings",
    "grouped",
    "read_options",
    "redis_options",
    "refuse_given",
    "server_options",
    "shown",
    "trials_option",
    "users_option",
]

F = TypeVar("F", bound=Callable[..., Any])


def shown(decls: str | tuple[str, ...], default: Any, type: Any, help: str, **more: Any) -> Any:
    """An option whose default ``--help`` shows: ``decls`` (a flag, or the flag and its
    short form or parameter name), then ``default``, ``type`` and ``help`` as click takes
    them; ``more``: any other of click's settings."""
    names = (decls,) if isinstance(decls, str) else decls
    return click.option(*names, default=default, show_default=True, type=type, help=help, **more)


def stacked(*options: Any) -> Callable[[F], F]:
    """One decorator for ``options`` in the order ``--help`` lists them."""

    def apply(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def grouped(into: str, make: type) -> Callable[[F], F]:
    """Hand the command the values of the options named by the fields of the dataclass
    ``make`` as one argument, ``into``: a block of options arrives as one value."""
    names = [f.name for f in fields(make)]

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def with_group(*args: Any, **kwargs: Any) -> Any:
            kwargs[into] = make(**{name: kwargs.pop(name) for name in names})
            return command(*args, **kwargs)

        return with_group  # type: ignore[return-value]

    return decorate


MAX_USERS = 2**62
"""Populations are drawn with numpy's int64 multinomial: 4.6·10¹⁸ users is beyond any use."""

MIN_WIDTH = 1e-9
"""A half-width of 10⁻⁹ already needs ~10¹⁸ users; smaller ones only underflow."""


@contextmanager
def usage_errors(refused: tuple[type[Exception], ...] = (ValueError,)) -> Iterator[None]:
    """Report the ``refused`` errors raised inside as a usage error with their message:
    the options given do not make a valid call."""
    try:
        yield
    except refused as exc:
        raise click.UsageError(str(exc)) from None


def build_mechanism(
    name: str, epsilon: float, domain_size: int, permanent_epsilon: float | None = None
) -> mechanisms.FrequencyOracle:
    """``mechanisms.create`` with errors turned into CLI usage errors."""
    memoized = name in MEMOIZED
    if memoized and permanent_epsilon is None:
        raise click.UsageError(
            f"{name} needs --permanent-epsilon (ε∞, the bound for repeated reports; "
            "--epsilon is ε₁, one report's)"
        )
    if permanent_epsilon is not None and not memoized and name != "auto":
        raise click.UsageError(
            f"--permanent-epsilon is for the memoized mechanisms ({', '.join(MEMOIZED)}), "
            f"not {name}"
        )
    options = {} if permanent_epsilon is None else {"permanent_epsilon": permanent_epsilon}
    with usage_errors():
        return mechanisms.create(name, epsilon=epsilon, domain_size=domain_size, **options)


MEMOIZED = tuple(n for n in mechanisms.NAMES if n.startswith("memo-"))
"""Mechanisms that take ``--permanent-epsilon``."""


def users_option(help: str, required: bool) -> Any:
    """``--users``, 1 to MAX_USERS; the max is checked, not shown (nobody needs to read it)."""

    def check(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
        if value is not None and value > MAX_USERS:
            raise click.BadParameter(f"{value} is more than {MAX_USERS:.1e} users", ctx, param)
        return value

    return click.option(
        "--users",
        "-n",
        required=required,
        type=click.IntRange(min=1),
        callback=check,
        help=help,
    )


def confidence_option(default: float) -> Any:
    """``--confidence``, a level in (0, 1)."""
    return shown(
        "--confidence",
        default,
        click.FloatRange(0, 1, min_open=True, max_open=True),
        "Level of the intervals.",
    )


def mechanism_option(required: bool = True) -> Any:
    """``--mechanism``; optional where another ``--kind`` needs none."""
    return click.option(
        "--mechanism",
        "-m",
        required=required,
        type=click.Choice(list(mechanisms.NAMES)),
        help="Frequency oracle the devices use; auto: the least variance for this ε and k; "
        "memo-*: memoized (RAPPOR-style), needing --permanent-epsilon.",
    )


MECHANISM = mechanism_option()
EPSILON = click.option(
    "--epsilon",
    "-e",
    required=True,
    type=float,
    help="ε of one report: the privacy each report keeps (smaller: more private, noisier).",
)
PERMANENT_EPSILON = click.option(
    "--permanent-epsilon",
    type=float,
    default=None,
    help="ε∞ of a memoized mechanism (memo-grr, memo-sue, memo-oue): the bound however many "
    "times a device reports; required by them.",
)


def domain_option(required: bool = True) -> Any:
    """``--domain-size``; optional where another ``--kind`` needs none."""
    return click.option(
        "--domain-size", "-k", required=required, type=int, help="k, number of values."
    )


DOMAIN = domain_option()
KIND = shown(
    "--kind",
    "categorical",
    click.Choice(["categorical", "string"]),
    "categorical: k known values (a frequency oracle); string: values without a "
    "dictionary, found by discovery (a string sketch).",
)


PLAN_KIND = shown(
    "--kind",
    "categorical",
    click.Choice(["categorical", "string", "joint", "distribution"]),
    "categorical: k known values (a frequency oracle); string: values without a "
    "dictionary, found by discovery (a string sketch); joint: a tuple of attributes "
    "(--sizes), its 1- and 2-way marginals; distribution: a number's quantiles (--bins; "
    "--width: the p95's half-width as a share of the range).",
)


def refuse_given(ctx: click.Context, names: Iterable[str], why: str) -> None:
    """A usage error for the first of the parameters ``names`` given on the command line
    (or in the environment): an option that means nothing for the command as asked.

    Raises:
        click.UsageError: ``"<option> <why>"``.
    """
    for name in names:
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT):
            option = next(p for p in ctx.command.params if p.name == name)
            raise click.UsageError(f"{option.opts[0]} {why}")


SEED = click.option("--seed", type=int, default=None, help="Seed of the simulation generator.")
AS_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
OPEN_UNIT = click.FloatRange(0, 1, min_open=True, max_open=True)
"""A share strictly between 0 and 1."""


def distribution_option(whose: str) -> Any:
    """``--distribution``: the true values' law in a simulation (``whose``: the users')."""
    return shown(
        ("--distribution", "-d", "dist"),
        "zipf",
        click.Choice(["zipf", "uniform", "geometric", "two-point", "point"]),
        f"Distribution of the {whose} true values.",
    )


def trials_option(short: str, default: int, least: int, help: str) -> Any:
    """``--trials``: how many times a study repeats (``least``: its smallest count)."""
    return shown(("--trials", short), default, click.IntRange(min=least), help)


def fake_fraction_option(default: float | None, help: str) -> Any:
    """``--fake-fraction`` (-b, β): the fake clients' share of the reports."""
    return click.option(
        "--fake-fraction",
        "-b",
        "beta",
        type=OPEN_UNIT,
        default=default,
        show_default=default is not None,
        help=help,
    )


MAX_LENGTH = shown(
    ("--max-length", "-L"),
    16,
    click.IntRange(1, 64),
    "String metrics: bytes per value (after NFC and UTF-8).",
)
FIND = click.option(
    "--find",
    "frequency",
    type=OPEN_UNIT,
    help="String metrics: a frequency (0.005 = 0.5 %): print the users needed to find it.",
)
CONCENTRATION = shown(
    "--concentration",
    0.0,
    click.FloatRange(0, 1),
    "String metrics: Σf² of the values left unfound (sets the collision floor).",
)
POWER = shown(
    "--power",
    0.5,
    click.FloatRange(0.01, 0.99),
    "String metrics: probability of finding a value at that frequency.",
)
VOCABULARY = shown(
    "--vocabulary",
    100_000,
    click.IntRange(10, 10**6),
    "String metrics: synthetic words (3..max-length lowercase letters).",
)
ZIPF_S = shown(
    "--zipf-s", 1.1, click.FloatRange(0.1, 5), "String metrics: Zipf exponent of the words' shares."
)

READ_CONFIDENCE = shown(
    "--confidence", 0.95, click.FloatRange(0.5, 0.9999), "Level of the intervals."
)
"""The intervals' level, as ``ldp export`` and ``ldp estimates`` take it."""

ESTIMAND = shown(
    "--estimand",
    "reporters",
    click.Choice(["reporters", "population"]),
    "Whose share (or mean) the intervals are for: reporters, the devices that "
    "reported, or population, a larger population they are a random sample of (wider; "
    "as the API's ?estimand=). Every row names it; string metrics offer reporters only.",
)
"""Whose share the intervals are for, as ``ldp export`` and ``ldp estimates`` take it."""


def _ranges(ctx: click.Context, param: click.Parameter, value: Any) -> list[tuple[float, float]]:
    out = []
    for text in value:
        try:
            low, high = (float(x) for x in text.split(","))
        except ValueError:
            raise click.BadParameter(f"two numbers LOW,HIGH, got {text!r}") from None
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise click.BadParameter(f"two finite numbers LOW <= HIGH, got {text!r}")
        out.append((low, high))
    if len(out) > 20:
        raise click.BadParameter("at most 20 ranges (as the API's ?range=)")
    return out


def _quantiles(ctx: click.Context, param: click.Parameter, value: Any) -> list[float] | None:
    if value is None:
        return None
    try:
        ps = [float(x) for x in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"comma-separated numbers in (0, 1), got {value!r}") from None
    if not ps or len(ps) > 20 or not all(0 < p < 1 for p in ps):
        raise click.BadParameter(f"at most 20 comma-separated numbers in (0, 1), got {value!r}")
    return ps


def distribution_asks(f: Any) -> Any:
    """``--range LOW,HIGH`` (repeatable) and ``--quantiles P,…``: a distribution metric's
    rows, as the API's ``?range=`` and ``?quantiles=`` (other kinds ignore them)."""
    f = click.option(
        "--quantiles",
        callback=_quantiles,
        metavar="P,…",
        help="Distribution metrics: the quantiles' rows (default 0.5,0.9,0.95,0.99).",
    )(f)
    return click.option(
        "--range",
        "ranges",
        multiple=True,
        callback=_ranges,
        metavar="LOW,HIGH",
        help="Distribution metrics: add a row with the share of values in [LOW, HIGH] "
        "(widened outward to bin edges) and its interval; repeatable.",
    )(f)


MIN_SEGMENT_REPORTS = click.option(
    "--min-segment-reports",
    type=click.IntRange(min=1),
    envvar="LDP_MIN_SEGMENT_REPORTS",
    help="Reports a group of a breakdown by a public dimension needs to be shown "
    "(default: the API's LDP_MIN_SEGMENT_REPORTS, read from the same variable, else 50).",
)
"""The least reports of a shown group, as the API reads it: ``ldp export`` and ``ldp
estimates`` never release a group the API hides."""


@dataclass(frozen=True)
class EstimateAsks:
    """What ``ldp export`` and ``ldp estimates`` ask of each window's estimates, as given."""

    ranges: list[tuple[float, float]]
    quantiles: list[float] | None
    confidence: float
    estimand: str
    min_segment_reports: int | None


def estimate_asks(command: F) -> F:
    """:func:`distribution_asks`, ``--confidence``, ``--estimand`` and
    ``--min-segment-reports``, handed to the command as ``asks``, an :class:`EstimateAsks`."""
    options = stacked(distribution_asks, READ_CONFIDENCE, ESTIMAND, MIN_SEGMENT_REPORTS)
    return options(grouped("asks", EstimateAsks)(command))


REDIS_ENV = ["REDIS_URL", "LDP_REDIS_URL"]
"""Where ``--redis-url`` of the commands that read counts or streams is taken from."""


def _data_dir(help: str) -> Any:
    return shown("--data-dir", "ldp-data", click.Path(file_okay=False, path_type=Path), help)


@dataclass(frozen=True)
class ReadFrom:
    """Where ``ldp export`` and ``ldp estimates`` read, as given (resolved by
    :func:`aggregator.cli.source.source_of`)."""

    url: str | None
    token: str | None
    redis_url: str | None
    data_dir: Path


DEFAULT_URL = "http://127.0.0.1:8000"
"""Where ``ldp serve`` listens by default, and where the commands that talk to it go."""


def read_options(command: F) -> F:
    """``--url``, ``--token``, ``--redis-url`` and ``--data-dir``: where ``ldp export`` and
    ``ldp estimates`` read, handed to the command as ``read_from``, a :class:`ReadFrom`."""
    return stacked(
        click.option(
            "--url",
            envvar="LDP_URL",
            default=None,
            help=f"An ldp serve to read through its API (or LDP_URL; default "
            f"{DEFAULT_URL} when no local one is found).",
        ),
        click.option(
            "--token",
            envvar=["LDP_READ_TOKEN", "LDP_ADMIN_TOKEN"],
            default=None,
            help="Its read token, if it has one (or LDP_READ_TOKEN; the admin token, "
            "LDP_ADMIN_TOKEN, reads too).",
        ),
        click.option(
            "--redis-url",
            envvar=REDIS_ENV,
            default=None,
            help="Read this Redis directly (or $REDIS_URL, then $LDP_REDIS_URL).",
        ),
        _data_dir(
            "Data dir of an ldp serve running here, whose embedded Redis is read "
            "when neither --redis-url nor --url is given."
        ),
    )(grouped("read_from", ReadFrom)(command))


def redis_options(command: F) -> F:
    """``--redis-url`` and ``--data-dir``: the Redis ``ldp keys`` works on (resolve them
    with :func:`aggregator.cli.keys.redis_url_of`)."""
    return stacked(
        click.option(
            "--redis-url",
            envvar=REDIS_ENV,
            default=None,
            help="Redis holding the counts (default: $REDIS_URL, then $LDP_REDIS_URL, then "
            "the embedded Redis of the ldp serve running on --data-dir).",
        ),
        _data_dir(
            "Data dir of a running ldp serve, whose embedded Redis is read without --redis-url."
        ),
    )(command)


@dataclass(frozen=True)
class ServerSettings:
    """What ``ldp serve`` and ``ldp demo`` run: where they listen, which Redis, where
    their files go, how many processes."""

    host: str
    port: int
    redis_url: str | None
    data_dir: str
    web_workers: int
    aggregators: int


def server_options(data_dir: str) -> Callable[[F], F]:
    """The options ``ldp serve`` and ``ldp demo`` share, with their own default data
    folder (the demo's metrics and counts must not land in the folder ``ldp serve``
    keeps); handed to the command as ``settings``, a :class:`ServerSettings`."""
    options = stacked(
        shown("--host", "127.0.0.1", None, "Address to listen on."),
        shown("--port", 8000, click.IntRange(0, 65535), "0: a free port."),
        click.option(
            "--redis-url",
            envvar="REDIS_URL",
            default=None,
            help="Use this Redis (or REDIS_URL); default: start an embedded redis-server.",
        ),
        shown(
            "--data-dir",
            data_dir,
            click.Path(file_okay=False),
            "Kept here: the embedded Redis's AOF and snapshots (redis/), the generated admin "
            "token (admin-token, unless LDP_ADMIN_TOKEN is set) and the services' logs "
            "(web.log, read.log, aggregator-N.log, redis/redis.log, and supervisor.log: each "
            "restart of a crashed child).",
        ),
        shown(
            "--web-workers",
            2,
            click.IntRange(1, 64),
            "Gunicorn worker processes of the web service (ingest; it forwards the "
            "estimates API and dashboard to a read service of its own).",
        ),
        shown(
            "--aggregators",
            1,
            click.IntRange(1, 64),
            "Aggregator worker processes counting the report streams (as `ldp aggregate`).",
        ),
    )

    def apply(command: F) -> F:
        return options(grouped("settings", ServerSettings)(command))

    return apply
