"""Metric definitions shipped with the app: the file ``ldp serve --metrics`` reads.

One file serves both sides, as Glean's ``metrics.yaml`` does: the server creates the
metrics from it, and the app bundles it (``Client(url, definitions=path)``) so that a
device that has never reached the collector still perturbs and queues its reports.

The file is JSON, or TOML when its name ends in ``.toml``::

    [metrics."app.theme"]
    domain = ["light", "dark", "auto"]
    epsilon = 1.0
    version = 1          # optional: the version the server has for this spec

The file is also the app's *metrics registry* (``ldp lint``, ``ldp generate``; see
``docs/guides/metrics-as-code.md``): an ``[app]`` table (the device's privacy budget)
and, per metric, the governance fields :data:`GOVERNANCE_FIELDS` (owners, a data-review
link, an expiry date). Neither reaches the server's spec: the SDK and ``ldp serve``
leave them out (:func:`split_version`), the linter reads them.

Each table is a spec as ``PUT /v1/metrics/<name>`` takes it, plus an optional
``version``: the version number the server gives this spec. It defaults to 1, the
version a server creates when ``ldp serve --metrics`` registers the file's spec for the
first time. ``ldp serve --metrics`` checks a declared version against the one the
registry holds, so the file cannot silently claim another version's parameters; the SDK
checks it again before sending (see :class:`~client_sdk.client.Client`).

Standard library only (``tomllib`` is in the standard library from Python 3.11).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from client_sdk import wire
from client_sdk.errors import DefinitionError
from client_sdk.numbers import is_count
from client_sdk.wire.spec import DISTRIBUTION_SPEC_FIELDS

__all__ = [
    "BUNDLE_VERSION",
    "GOVERNANCE_FIELDS",
    "load_bundle",
    "load_metrics_file",
    "load_text",
    "metrics_of",
    "parse_metrics_text",
    "split_version",
]

GOVERNANCE_FIELDS = ("owners", "data_review", "expires")
"""A metric's registry fields for people, not for the protocol: who answers for it
(``owners``: a list of e-mail addresses or handles), where its data review is
(``data_review``: an https link), and when it stops being collected (``expires``: a date,
``2027-06-30``, or ``"never"``). :func:`split_version` leaves them out of the spec."""

BUNDLE_VERSION = 1
"""The version a spec without ``version`` stands for: the one a server creates when it
registers the spec first (``registry.put`` numbers a metric's versions from 1)."""


def load_metrics_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``{name: spec}`` from a JSON or TOML file (``[metrics."app.theme"]`` tables).

    Args:
        path: the file; TOML when its name ends in ``.toml``, JSON otherwise.

    Returns:
        Each metric's table as written (``version`` included, if any).

    Raises:
        ValueError: unreadable file or wrong shape.
    """
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise ValueError(f"cannot read metrics file {file}: {exc}") from None
    return parse_metrics_text(text, toml=file.suffix == ".toml", where=str(file))


def parse_metrics_text(text: str, toml: bool, where: str) -> dict[str, Any]:
    """:func:`load_metrics_file` of a file's text (``where``: its name, for messages).

    Raises:
        ValueError: not TOML (or JSON), or the wrong shape.
    """
    return metrics_of(load_text(text, toml, where), toml, where)


def load_text(text: str, toml: bool, where: str) -> Any:
    """A metrics file's text as data: TOML, or JSON.

    Raises:
        ValueError: not valid TOML (or JSON).
    """
    try:
        if toml:
            import tomllib  # here: only apps and servers that bundle TOML load it

            return tomllib.loads(text)
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"cannot read metrics file {where}: {exc}") from None


def metrics_of(data: Any, toml: bool, where: str) -> dict[str, Any]:
    """The ``{name: table}`` of a metrics file's data (its ``metrics`` table, or the whole).

    Raises:
        ValueError: the wrong shape, or a dotted TOML name split into tables.
    """
    metrics = data.get("metrics", data) if isinstance(data, dict) else None
    if not isinstance(metrics, dict) or not all(isinstance(v, dict) for v in metrics.values()):
        raise ValueError(f"{where}: expected an object of metric name → definition")
    if toml:
        for name, table in metrics.items():
            dotted = _split_name(name, table)
            if dotted:
                raise ValueError(
                    f"{where}: metric {name!r} holds a table {dotted[len(name) + 1 :]!r}, which "
                    f"no metric spec has: TOML reads [metrics.{dotted}] as nested tables; "
                    f'quote a dotted name: [metrics."{dotted}"]'
                )
    return metrics


_SPEC_KEYS = frozenset(
    {
        *wire.SPEC_FIELDS,
        *wire.NUMERIC_SPEC_FIELDS,
        *wire.STRING_SPEC_FIELDS,
        *wire.JOINT_SPEC_FIELDS,
        *DISTRIBUTION_SPEC_FIELDS,
        *GOVERNANCE_FIELDS,
        "version",
    }
)
"""Every key a file's metric table may hold (of any kind, and its ``version``)."""


def _split_name(name: str, table: Mapping[str, Any]) -> str | None:
    """The dotted name TOML split into nested tables (``[metrics.app.theme]`` is a table
    ``theme`` in a metric ``app``): a key no spec has whose value is a table, followed
    down to the table that holds none; None when the table has no such key."""
    for key, value in table.items():
        if key not in _SPEC_KEYS and isinstance(value, Mapping):
            return _split_name(f"{name}.{key}", value) or f"{name}.{key}"
    return None


def split_version(name: str, table: Mapping[str, Any]) -> tuple[dict[str, Any], int | None]:
    """A file's table as the spec the registry takes (without :data:`GOVERNANCE_FIELDS`),
    and the version it declares.

    Raises:
        ValueError: ``version`` is not a positive integer.
    """
    spec = {key: value for key, value in table.items() if key not in GOVERNANCE_FIELDS}
    version = spec.pop("version", None)
    if version is not None and not is_count(version):
        raise ValueError(f"metric {name!r}: version must be a positive integer, got {version!r}")
    return spec, version


def load_bundle(
    source: str | os.PathLike[str] | Mapping[str, Mapping[str, Any]],
) -> dict[str, wire.MetricDefinition]:
    """The definitions an app ships: each spec resolved as the server resolves it.

    Args:
        source: the metrics file, or its content already read (``{name: table}``).

    Returns:
        Each metric's definition, numbered with its declared version (default
        :data:`BUNDLE_VERSION`).

    Raises:
        ValueError: an unreadable file, or a spec the server would refuse (every problem
            named, with the metric).
    """
    tables = source if isinstance(source, Mapping) else load_metrics_file(source)
    bundle: dict[str, wire.MetricDefinition] = {}
    for name, table in tables.items():
        if not isinstance(table, Mapping):
            raise ValueError(f"metric {name!r}: expected a table of its definition")
        spec, version = split_version(name, table)
        try:
            bundle[name] = wire.parse_spec(name, spec, version or BUNDLE_VERSION)
        except DefinitionError as exc:
            raise ValueError(f"bundled metric {name!r}: {exc}") from None
    return bundle
