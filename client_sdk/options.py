"""The client's settings, checked once: :class:`ClientOptions`.

``Client(url, **settings)`` builds a :class:`ClientOptions` from its keyword arguments
before it does anything else, so a bad setting raises ``ValueError`` at construction —
the only time the SDK raises into the host app at all — and the message gives the valid
range (as sentry-python's ``ClientConstructor`` and OpenDP's constructors do). The
options are frozen: a running client's settings cannot drift from the ones checked.

>>> ClientOptions(flush_at=0)
Traceback (most recent call last):
    ...
ValueError: flush_at must be an integer >= 1, got 0

The URL is checked by the transport that uses it
(:class:`~client_sdk.transport.HTTPTransport`), the quotas again by the queue.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypedDict

from client_sdk.device import DeviceCaps
from client_sdk.numbers import is_count
from client_sdk.queue import DEFAULT_MAX_BYTES, DEFAULT_MAX_COUNT
from client_sdk.transport import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    import requests

    from client_sdk.mechanisms.randomness import RandomSource
    from client_sdk.queue import ReportQueue
    from client_sdk.transport import Transport

__all__ = ["MIN_BATCH_BYTES", "ClientOptions", "ClientSettings"]

MIN_BATCH_BYTES = 128
"""Smallest ``max_batch_bytes``: a compact report of the smallest mechanism with its
envelope is about 90 bytes. A report larger than the limit is still sent, alone."""


@dataclass(frozen=True)
class ClientOptions:
    """Every setting of a :class:`~client_sdk.client.Client` but its URL, validated.

    This class is where the settings are declared, once: ``Client(url, **settings)``
    takes exactly these fields by name, with these defaults.

    Attributes:
        transport: how to reach the collector; None for an
            :class:`~client_sdk.transport.HTTPTransport` to the URL.
        flush_at: queued reports that trigger an upload; an integer >= 1.
        flush_interval: seconds after which queued reports are uploaded anyway;
            finite and > 0 (kept as a float).
        max_queue: most reports queued; beyond it the oldest are dropped (counted as
            ``queue_full``); an integer >= 1.
        max_queue_bytes: most bytes queued, likewise; an integer >= 1.
        max_batch_reports: most reports per upload; an integer >= 1.
        max_batch_bytes: most bytes per upload body; an integer >= :data:`MIN_BATCH_BYTES`.
        metrics_ttl: seconds a fetched definition is used before it is fetched again;
            finite and >= 0 (a float; 0 fetches before every report).
        timeout: seconds to connect and to wait for each answer; finite and > 0 (a float);
            default :data:`~client_sdk.transport.DEFAULT_TIMEOUT`, above the collector's
            longest answer.
        rng: perturbation randomness (tests); None for the process CSPRNG.
        sleep: called with each upload backoff delay instead of waiting (tests);
            callable, or None for a wait that ``shutdown`` interrupts.
        clock: monotonic seconds, for definition TTLs and the flush interval; callable.
        queue: where reports wait; None for a :class:`~client_sdk.queue.MemoryQueue` with
            the quotas above (a durable queue can be given instead).
        storage_dir: a directory for the durable store (queue, ledger, opt-out, device
            secret), a ``str`` or ``os.PathLike``; it may be shared by several processes.
            None keeps all of it in memory, for this process only. Not together with
            ``queue``.
        wallclock: Unix time, for ledger days (UTC), leases and ``Retry-After`` dates;
            callable.
        definitions: the metric definitions the app ships: the TOML or JSON file
            ``ldp serve --metrics`` reads (see :mod:`client_sdk.bundle`), or its
            ``{name: spec}`` content; None: none shipped. A metric whose definition was
            never fetched is perturbed with its bundled one while the collector cannot be
            asked, so a device that starts offline still reports; fetched definitions
            replace it. A bad file raises ``ValueError`` at construction.
        session: a ``requests.Session`` the HTTP transport sends through (mTLS client
            certificates, a corporate proxy, a CA bundle, custom adapters); None: the
            transport's own. Not together with ``transport``.
        device_budget: the app's cap on the total ε this device spends over all metrics,
            ``{"epsilon_per_day": ε, "epsilon_lifetime": ε}`` (either may be left out;
            positive numbers), or None; kept as a :class:`~client_sdk.device.DeviceCaps`.
            The stricter of it and the collector's published caps applies.
        relay: the URL of an Oblivious HTTP relay (``ldp relay``; RFC 9458): each upload
            and each definition fetch is sealed to the collector's gateway key and sent
            through it, so the collector never sees the device's address (except on the
            key fetches, apart from the uploads); None: all go to the collector directly.
            Needs the ``ldp-telemetry[ohttp]`` extra. Not together with ``transport``.
        relay_keys: the gateway's ``application/ohttp-keys`` bytes shipped with the app,
            for ``relay``: then the keys are never fetched (a rotated-out key leaves the
            batches queued until the app ships the new ones); None: fetched from the
            collector when the client is made and refreshed apart from the uploads.
        ingest_key: the app's ingest key (``ldp tokens create NAME --kind ingest``;
            public, shipped in the app): sent as ``Authorization: Bearer <key>`` on every
            definition fetch and upload, inside the sealed request with ``relay`` (never
            to the relay in the clear). It picks the project of the metrics and, where
            the collector requires keys, admits the reports; a 401 or 403 drops the
            batch. Printable ASCII without spaces; None: no key. Not together with
            ``transport`` (a transport of the app's own sends what it sends).

    Raises:
        ValueError: a setting outside its range, or both ``storage_dir`` and ``queue``,
            or both ``session`` (or ``ingest_key``) and ``transport``, or both ``relay``
            and ``transport``,
            or ``relay`` without the ``ohttp`` extra installed.
    """

    transport: Transport | None = None
    flush_at: int = 100
    flush_interval: float = 5.0
    max_queue: int = DEFAULT_MAX_COUNT
    max_queue_bytes: int = DEFAULT_MAX_BYTES
    max_batch_reports: int = 500
    max_batch_bytes: int = 512 * 1024
    metrics_ttl: float = 300.0
    timeout: float = DEFAULT_TIMEOUT
    rng: RandomSource | None = None
    sleep: Callable[[float], None] | None = None
    clock: Callable[[], float] = time.monotonic
    queue: ReportQueue | None = None
    storage_dir: str | os.PathLike[str] | None = None
    wallclock: Callable[[], float] = time.time
    definitions: str | os.PathLike[str] | Mapping[str, Mapping[str, Any]] | None = None
    session: requests.Session | None = None
    device_budget: DeviceCaps | Mapping[str, Any] | None = None
    relay: str | None = None
    relay_keys: bytes | None = None
    ingest_key: str | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ClientOptions:
        """The options from ``Client``'s keyword arguments.

        Raises:
            TypeError: a name that is not a setting, with the settings there are.
            ValueError: a setting outside its range.
        """
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(settings) - set(names))
        if unknown:
            raise TypeError(
                f"Client got unknown setting(s) {', '.join(map(repr, unknown))}; "
                f"the settings are: {', '.join(names)}"
            )
        return cls(**settings)

    def __post_init__(self) -> None:
        for name, check in _CHECKS:
            object.__setattr__(self, name, check(name, getattr(self, name), self))


class ClientSettings(TypedDict, total=False):
    """``Client(url, **settings)``'s keyword arguments, for type checkers: the fields of
    :class:`ClientOptions` (which documents each), every one optional. A misspelt or
    mistyped setting is then an error in mypy before it is a ``TypeError`` or
    ``ValueError`` at run time; ``tests/client_sdk/test_client_options.py`` keeps the
    two declarations the same."""

    transport: Transport | None
    flush_at: int
    flush_interval: float
    max_queue: int
    max_queue_bytes: int
    max_batch_reports: int
    max_batch_bytes: int
    metrics_ttl: float
    timeout: float
    rng: RandomSource | None
    sleep: Callable[[float], None] | None
    clock: Callable[[], float]
    queue: ReportQueue | None
    storage_dir: str | os.PathLike[str] | None
    wallclock: Callable[[], float]
    definitions: str | os.PathLike[str] | Mapping[str, Mapping[str, Any]] | None
    session: requests.Session | None
    device_budget: DeviceCaps | Mapping[str, Any] | None
    relay: str | None
    relay_keys: bytes | None
    ingest_key: str | None


Check = Callable[[str, Any, ClientOptions], Any]
"""A setting's check: its name, value and all the options → the value to keep.

Raises:
    ValueError: the value is outside its range (the message gives the range).
"""


def _count(low: int) -> Check:
    """An integer >= ``low`` (not a bool)."""

    def check(name: str, value: Any, options: ClientOptions) -> Any:
        if not is_count(value, low):
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        return value

    return check


def _seconds(positive: bool) -> Check:
    """A finite duration, > 0 if ``positive`` else >= 0, kept as a float."""
    bound = "> 0" if positive else ">= 0"

    def check(name: str, number: Any, options: ClientOptions) -> Any:
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise ValueError(
                f"{name} must be a number of seconds (finite and {bound}), got {number!r}"
            )
        if not math.isfinite(number) or not (number > 0 if positive else number >= 0):
            raise ValueError(f"{name} must be finite and {bound}, got {number!r}")
        return float(number)

    return check


def _callable(or_none: bool) -> Check:
    """A function, or None (``or_none``: None is a documented value, and the message
    says so)."""

    def check(name: str, fn: Any, options: ClientOptions) -> Any:
        if fn is not None and not callable(fn):
            said = " or None" if or_none else ""
            raise ValueError(f"{name} must be callable{said}, got {type(fn).__name__}")
        return fn

    return check


def _caps(name: str, value: Any, options: ClientOptions) -> Any:
    return value if isinstance(value, DeviceCaps) else DeviceCaps.parse(value)


def _storage_dir(name: str, value: Any, options: ClientOptions) -> Any:
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise ValueError(
            f"storage_dir must be a path (str or os.PathLike) or None, got {type(value).__name__}"
        )
    if value is not None and options.queue is not None:
        raise ValueError("give storage_dir or queue, not both")
    return value


def _definitions(name: str, value: Any, options: ClientOptions) -> Any:
    if value is not None and not isinstance(value, (str, os.PathLike, Mapping)):
        raise ValueError(
            "definitions must be a path (str or os.PathLike), a mapping or None, "
            f"got {type(value).__name__}"
        )
    return value


def _relay(name: str, value: Any, options: ClientOptions) -> Any:
    if value is not None:
        _check_relay(value, options.transport)
    return value


def _relay_keys(name: str, value: Any, options: ClientOptions) -> Any:
    if value is None:
        return value
    if options.relay is None:
        raise ValueError("relay_keys needs relay")
    if not isinstance(value, bytes):
        raise ValueError(
            f"relay_keys must be the application/ohttp-keys bytes, got {type(value).__name__}"
        )
    return value


def _ingest_key(name: str, value: Any, options: ClientOptions) -> Any:
    if value is None:
        return value
    if not isinstance(value, str) or not _KEY.fullmatch(value):
        shown = type(value).__name__ if not isinstance(value, str) else "a string with spaces"
        raise ValueError(
            "ingest_key must be the key's text (printable ASCII, no spaces: "
            f"ldp tokens create NAME --kind ingest), got {shown}"
        )
    if options.transport is not None:
        raise ValueError("give ingest_key or transport, not both")
    return value


_KEY = re.compile(r"[!-~]{1,1024}")
"""An ingest key as a header may carry it: printable ASCII without spaces, not huge."""


def _session(name: str, value: Any, options: ClientOptions) -> Any:
    if value is None:
        return value
    if options.transport is not None:
        raise ValueError("give session or transport, not both")
    if not callable(getattr(value, "request", None)):
        raise ValueError(f"session must be a requests.Session, got {type(value).__name__}")
    return value


_CHECKS: tuple[tuple[str, Check], ...] = (
    ("device_budget", _caps),
    ("flush_at", _count(1)),
    ("max_queue", _count(1)),
    ("max_queue_bytes", _count(1)),
    ("max_batch_reports", _count(1)),
    ("max_batch_bytes", _count(MIN_BATCH_BYTES)),
    ("flush_interval", _seconds(positive=True)),
    ("metrics_ttl", _seconds(positive=False)),  # 0: fetch the definition before every report
    ("timeout", _seconds(positive=True)),  # 0 would make every socket non-blocking
    ("sleep", _callable(or_none=True)),
    ("clock", _callable(or_none=False)),
    ("wallclock", _callable(or_none=False)),
    ("storage_dir", _storage_dir),
    ("definitions", _definitions),
    ("relay", _relay),
    ("relay_keys", _relay_keys),
    ("session", _session),
    ("ingest_key", _ingest_key),
)
"""Each setting that is checked, in the order checked, and its check."""


def _check_relay(relay: object, transport: object) -> None:
    """A relay URL is a string, comes without ``transport``, and needs the HPKE extra."""
    if not isinstance(relay, str) or not relay.startswith(("http://", "https://")):
        raise ValueError(f"relay must be an http:// or https:// URL, got {relay!r}")
    if transport is not None:
        raise ValueError("give relay or transport, not both")
    if importlib.util.find_spec("pyhpke") is None:
        raise ValueError(
            "relay= needs the Oblivious HTTP extra: pip install 'ldp-telemetry[ohttp]'"
        )
