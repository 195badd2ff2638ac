"""Where ``ldp export`` and ``ldp estimates`` read: a Redis, or the HTTP API.

Both hold the same rows (:mod:`aggregator.query.export` computes them either way). In
order: ``--redis-url`` (or ``REDIS_URL``) reads that Redis; ``--url`` (or ``LDP_URL``)
reads the API of the ``ldp serve`` there, with ``--token`` (or ``LDP_READ_TOKEN``; the
admin token reads too) when it has a read token; else the embedded Redis of the ``ldp
serve`` running on ``--data-dir`` (``ldp-data`` in the current folder); else the API at
the default address. When nothing answers, the message says everything that was tried.
Docs: docs/guides/data-lifecycle.md.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol

import click
import redis

from aggregator.cli import remote
from aggregator.cli.options import DEFAULT_URL, EstimateAsks, ReadFrom
from aggregator.query.estimators import Reader, estimator_for
from aggregator.query.export import export_windows, window_rows
from aggregator.query.relayed import relayed_waiting
from aggregator.query.suppression import HiddenGroups, hidden_groups
from aggregator.stats.segments import DEFAULT_MIN_SEGMENT_REPORTS
from client_sdk.wire import MetricDefinition, check_name
from ldp_store.connection import connect
from ldp_store.embedded import REDIS_URL_FILE
from ldp_store.registry import Registry

__all__ = [
    "Api",
    "Asked",
    "Local",
    "Planned",
    "Source",
    "checked_name",
    "local_minimum",
    "reading",
    "source_of",
]


@dataclass(frozen=True)
class Planned:
    """A metric version's windows to read, oldest first."""

    metric: str
    version: int
    windows: list[str]


@dataclass(frozen=True)
class Asked:
    """A window as asked for: its intervals' level; ``minimum``, a breakdown group's least
    reports (None: the reader's default); ``together``, every window of the version the
    caller reads, whose hidden groups are then decided once, as one snapshot; ``estimand``,
    whose share the intervals are for, named in every row."""

    window: str
    confidence: float
    minimum: int | None
    together: Sequence[str] = ()
    estimand: str = "reporters"
    ranges: Sequence[tuple[float, float]] = ()
    """A distribution's ranges to add rows for (other kinds ignore them)."""
    quantiles: Sequence[float] | None = None
    """A distribution's quantiles (None: p50, p90, p95, p99)."""

    @classmethod
    def of(cls, window: str, asks: EstimateAsks, minimum: int | None) -> Asked:
        """``window`` as the command's options ask for it, read one by one."""
        ranges, quantiles = asks.ranges, asks.quantiles
        return cls(window, asks.confidence, minimum, (), asks.estimand, ranges, quantiles)


class Source(Protocol):
    """What the two commands read, wherever it comes from."""

    where: str
    """Said in messages: the Redis or the URL read."""

    def definition(self, name: str, version: int | None) -> MetricDefinition | None:
        """A metric version (None: no such metric or version)."""
        ...

    def plan(
        self, name: str | None, version: int | None, granularity: str | None, since: date | None
    ) -> list[Planned]:
        """Each version's windows (every metric's when ``name`` is None)."""
        ...

    def rows(self, definition: MetricDefinition, asked: Asked) -> tuple[int, list[dict[str, Any]]]:
        """The window's reports and rows.

        Raises:
            click.ClickException: an estimand the metric's kind does not offer.
        """
        ...

    def waiting_note(self, definition: MetricDefinition) -> str | None:
        """What says how many relayed reports of the version wait for a shuffled batch,
        and until when (None: none wait)."""
        ...


@dataclass
class Local:
    """A Redis read directly (an ``ldp serve``'s embedded one, or ``--redis-url``)."""

    client: redis.Redis
    registry: Registry
    where: str
    hidden: dict[tuple[str, int], HiddenGroups] = field(default_factory=dict)
    """Each version's hidden groups, read once for all the windows read."""

    def definition(self, name: str, version: int | None) -> MetricDefinition | None:  # noqa: D102
        return self.registry.get(name, version)

    def plan(  # noqa: D102
        self, name: str | None, version: int | None, granularity: str | None, since: date | None
    ) -> list[Planned]:
        found = []
        for metric in [name] if name is not None else self.registry.names():
            versions = [version] if version else self.registry.versions(metric)
            if name is not None and not versions:
                raise click.ClickException(f"unknown metric {metric!r}")
            for v in versions:
                definition = self.registry.get(metric, v)
                if definition is None:
                    if name is not None:
                        raise click.ClickException(f"unknown metric {metric!r} version {v}")
                    continue
                windows = export_windows(self.client, definition, granularity, since)
                found.append(Planned(metric, v, windows))
        return found

    def rows(self, definition: MetricDefinition, asked: Asked) -> tuple[int, list[dict[str, Any]]]:  # noqa: D102
        reader = Reader(self.client, self.registry)
        stats = estimator_for(definition).read(reader, definition, asked.window)
        ident = (definition.name, definition.version)
        if definition.dimensions and asked.together and ident not in self.hidden:
            least = asked.minimum or DEFAULT_MIN_SEGMENT_REPORTS
            found = hidden_groups(self.client, definition, least, asked.together)
            self.hidden[ident] = found
        try:
            rows = window_rows(
                reader,
                definition,
                asked.window,
                asked.confidence,
                asked.minimum,
                stats,
                self.hidden.get(ident),
                asked.estimand,
                asked.ranges,
                asked.quantiles,
            )
            return stats.n, list(rows)
        except ValueError as exc:  # an estimand this kind does not offer
            raise click.ClickException(str(exc)) from None

    def waiting_note(self, definition: MetricDefinition) -> str | None:  # noqa: D102
        waiting = relayed_waiting(self.client, definition)
        return None if waiting is None else waiting.note


@dataclass
class Api:
    """The read API of an ``ldp serve`` (``GET /v1/export…``, ``GET /v1/metrics/<name>``).

    ``fallback``: why this URL is read at all when no one named it (the local paths that
    were tried), said if it does not answer either.
    """

    url: str
    token: str | None
    fallback: str = ""
    where: str = field(init=False)

    def __post_init__(self) -> None:
        self.where = self.url

    def _get(self, path: str, query: dict[str, Any] | None = None) -> Any:
        asked = {k: v for k, v in (query or {}).items() if v is not None}
        url = f"{self.url.rstrip('/')}{path}" + (
            f"?{urllib.parse.urlencode(asked, doseq=True)}" if asked else ""
        )
        try:
            return remote.request_json(url, token=self.token)
        except remote.Unreachable as exc:
            if not self.fallback:
                raise
            raise click.UsageError(
                f"{self.fallback}; and no ldp serve answered at {exc.where} ({exc.why}). "
                "Point at a running one with --url (or LDP_URL; its read token with --token "
                "or LDP_READ_TOKEN), run this where its data dir is (--data-dir), or pass "
                "--redis-url"
            ) from None
        except click.ClickException as exc:
            if exc.message.startswith("401"):
                raise click.ClickException(
                    f"{exc.message.splitlines()[0]} by {self.where}: pass its read token with "
                    "--token or LDP_READ_TOKEN (the admin token reads too)"
                ) from None
            raise

    def definition(self, name: str, version: int | None) -> MetricDefinition | None:  # noqa: D102
        try:
            body = self._get(f"/v1/metrics/{_quoted(name)}", {"version": version})
        except click.ClickException as exc:
            if exc.message.startswith("404"):
                return None
            raise
        return MetricDefinition.from_dict(body)

    def plan(  # noqa: D102
        self, name: str | None, version: int | None, granularity: str | None, since: date | None
    ) -> list[Planned]:
        body = self._get(
            "/v1/export",
            {
                "metric": name,
                "version": version,
                "granularity": granularity,
                "since": since.isoformat() if since else None,
            },
        )
        return [Planned(v["metric"], v["version"], v["windows"]) for v in body["versions"]]

    def rows(self, definition: MetricDefinition, asked: Asked) -> tuple[int, list[dict[str, Any]]]:  # noqa: D102
        # The server decides each window's hidden groups against every live window, as
        # its ?by= answers do; it applies its own minimum.
        version, window, confidence = definition.version, asked.window, asked.confidence
        query = {"version": version, "window": window, "confidence": confidence}
        query["estimand"] = asked.estimand
        if definition.kind == "distribution":
            query["range"] = [f"{a!r},{b!r}" for a, b in asked.ranges]
            if asked.quantiles is not None:
                query["quantiles"] = ",".join(repr(p) for p in asked.quantiles)
        body = self._get(f"/v1/export/{_quoted(definition.name)}", query)
        return int(body["n"]), list(body["rows"])

    def waiting_note(self, definition: MetricDefinition) -> str | None:  # noqa: D102
        query = {"version": definition.version}
        body = self._get(f"/v1/estimates/{_quoted(definition.name)}", query)
        waiting = body.get("relayed_waiting")
        return None if not waiting else str(waiting["note"])


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def source_of(read_from: ReadFrom) -> Source:
    """Where to read, in the order of the module: a Redis named, a URL named, the local
    ``ldp serve``'s Redis, the default URL.

    Raises:
        click.ClickException: a Redis named or found that does not answer.
    """
    if read_from.redis_url:
        return _local(read_from.redis_url)
    if read_from.url:
        return Api(read_from.url, read_from.token)
    found = read_from.data_dir / REDIS_URL_FILE
    if found.is_file():
        return _local(found.read_text().strip())
    tried = (
        f"no Redis to read: no ldp serve is running on {read_from.data_dir} (no {found}) and "
        "no --redis-url or REDIS_URL"
    )
    return Api(DEFAULT_URL, read_from.token, fallback=tried)


@contextmanager
def reading(
    ctx: click.Context, read_from: ReadFrom, min_segment_reports: int | None
) -> Iterator[tuple[Source, int | None]]:
    """The source to read and the least reports of a shown group to apply here (see
    :func:`local_minimum`); a Redis that stops answering meanwhile is a clear error.

    Raises:
        click.ClickException: Redis is unreachable.
    """
    try:
        source = source_of(read_from)
        yield source, local_minimum(ctx, source, min_segment_reports)
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        raise click.ClickException(f"Redis is unreachable: {exc}") from None


def local_minimum(ctx: click.Context, source: Source, minimum: int | None) -> int | None:
    """``--min-segment-reports`` for a Redis read here; the API applies the server's own
    ``LDP_MIN_SEGMENT_REPORTS`` (a client cannot lower it).

    Raises:
        click.UsageError: the option given on the command line with the API as source.
    """
    if not isinstance(source, Api):
        return minimum
    given = ctx.get_parameter_source("min_segment_reports")
    if given == click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError(
            f"--min-segment-reports is for a Redis read here; {source.where} applies its own "
            "LDP_MIN_SEGMENT_REPORTS"
        )
    return None


def checked_name(name: str) -> str:
    """A metric's name as the commands take it.

    Raises:
        click.BadParameter: not a metric name.
    """

    try:
        check_name(name)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    return name


def _local(redis_url: str) -> Local:
    client = connect(redis_url)
    return Local(client, Registry(client), redis_url.rpartition("@")[2])
