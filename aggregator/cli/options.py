"""Options shared by the ``ldp`` study commands: mechanism, ε, k, users, confidence."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from click.core import ParameterSource

from client_sdk import mechanisms

__all__ = [
    "DOMAIN",
    "EPSILON",
    "KIND",
    "MAX_USERS",
    "MECHANISM",
    "MEMOIZED",
    "MIN_WIDTH",
    "PERMANENT_EPSILON",
    "build_mechanism",
    "confidence_option",
    "domain_option",
    "mechanism_option",
    "refuse_given",
    "users_option",
]

MAX_USERS = 2**62
"""Populations are drawn with numpy's int64 multinomial: 4.6·10¹⁸ users is beyond any use."""

MIN_WIDTH = 1e-9
"""A half-width of 10⁻⁹ already needs ~10¹⁸ users; smaller ones only underflow."""


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
    try:
        return mechanisms.create(name, epsilon=epsilon, domain_size=domain_size, **options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


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
    return click.option(
        "--confidence",
        default=default,
        show_default=True,
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        help="Level of the intervals.",
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
KIND = click.option(
    "--kind",
    default="categorical",
    show_default=True,
    type=click.Choice(["categorical", "string"]),
    help="categorical: k known values (a frequency oracle); string: values without a "
    "dictionary, found by discovery (a string sketch).",
)


PLAN_KIND = click.option(
    "--kind",
    default="categorical",
    show_default=True,
    type=click.Choice(["categorical", "string", "joint"]),
    help="categorical: k known values (a frequency oracle); string: values without a "
    "dictionary, found by discovery (a string sketch); joint: a tuple of attributes "
    "(--sizes), its 1- and 2-way marginals.",
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
