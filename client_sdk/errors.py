"""Every exception the SDK defines, in one place.

The host app meets few of them: ``Client.report()``, ``flush()``, ``stats()``,
``privacy()``, ``disable()`` and ``enable()`` never raise, and turn what goes wrong into a
drop counted in ``client.stats()["dropped"]``. Only a configuration error raises, at
construction (a plain ``ValueError``), and the explicit ``Client.definition()`` and
``Client.build_report()`` raise the errors their docstrings list. The others are raised
and caught inside the SDK, or are the protocol's verdicts for the collector and the
aggregator (``wire/`` and ``mechanisms/`` are shared with them).

This module imports nothing from the rest of ``client_sdk`` (and only the standard
library), so the stdlib-only ``client_sdk.mechanisms`` may import it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BudgetExhaustedError",
    "BudgetNotSharedError",
    "DefinitionError",
    "DeviceBudgetExhaustedError",
    "MetricsUnavailableError",
    "ObliviousError",
    "PayloadError",
    "QueueFullError",
    "ReportError",
    "ReportRefused",
    "ReportingDisabledError",
    "StoreError",
    "UnknownKeyIdError",
    "UnknownMetricError",
]

# -- the client: definitions ------------------------------------------------------------


class UnknownMetricError(ValueError):
    """The collector has no (usable) definition of this metric.

    Raised by ``Client.definition()`` and ``Client.build_report()``, which the host app
    calls explicitly; ``report()`` counts it as ``unknown_metric`` instead.
    """


class MetricsUnavailableError(ConnectionError):
    """The metric's definition could not be fetched (network error or server trouble).

    Raised by ``Client.definition()`` and ``Client.build_report()``; ``report()`` counts it
    as ``unreachable`` instead.
    """


# -- the ledger and the queues: raised and caught inside the SDK ------------------------


class BudgetExhaustedError(Exception):
    """The metric's budget for the current period is spent: the report is refused.

    Raised by the ledger (``ledger.Tally.check``, through ``MemoryLedger.enqueue`` and
    ``store.Store.put``); ``report()`` counts it as ``budget``. Never reaches the host app.
    """


class DeviceBudgetExhaustedError(BudgetExhaustedError):
    """The device-wide budget (``client_sdk.device``) would be exceeded: the report is
    refused. ``report()`` counts it as ``device_budget``."""


class BudgetNotSharedError(BudgetExhaustedError):
    """A forked child of a client without ``storage_dir`` would spend a budget it cannot
    share with its parent (the ledger is in the parent's memory): the report is refused.
    ``report()`` counts it as ``budget_not_shared_after_fork``."""


class ReportingDisabledError(Exception):
    """The user opted out (``Client.disable()``): nothing is reported.

    Raised by the ledger and the store when a report is queued or the device secret is
    read after an opt-out; ``report()`` counts it as ``disabled``. Reaches the host app
    only from ``Client.build_report()`` of a longitudinal metric (it needs the secret).
    """


class QueueFullError(Exception):
    """An item larger than the queue's whole byte quota (it could never be kept).

    Raised by ``queue.MemoryQueue.put`` and ``store.Store.put``; ``report()`` counts it as
    ``queue_full``. Never reaches the host app.
    """


class StoreError(Exception):
    """A durable queue could not be read or written (locked, full, read-only, corrupt).

    Raised by every SQLite or fsync failure of ``client_sdk.store``; ``report()`` counts it
    as ``storage_error``, the uploader pauses and tries again. Reaches the host app
    only from ``Client.build_report()`` of a longitudinal metric whose device secret could
    not be read.
    """


# -- the protocol: verdicts for the collector and the aggregator ------------------------


class PayloadError(ValueError):
    """A report payload that does not fit the mechanism's wire format.

    Raised by the mechanisms' ``check_payload`` (``client_sdk.mechanisms``), which the
    collector validates with (through :func:`~client_sdk.wire.check_report`) and the
    aggregator decodes with. Never raised on the device: the SDK only makes payloads.
    """


class DefinitionError(ValueError):
    """A metric definition or specification with problems, all of them listed.

    Raised by ``wire.parse_spec`` (the collector answers 400 with ``problems``) and
    ``wire.MetricDefinition.from_dict`` (the SDK turns a fetched definition it cannot use
    into :class:`UnknownMetricError`). Never reaches the host app.

    Args:
        problems: every problem found, in words an operator can act on.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


class ReportError(ValueError):
    """A report that will never be valid (the client should drop it, not retry).

    Raised by ``wire.check_report``, with which the collector validates each uploaded
    report (and lists it in its 202 answer's ``rejected``, which the SDK drops). Never
    raised on the device.
    """


# -- Oblivious HTTP (client_sdk.ohttp): the device's and the gateway's verdicts -----------


class ObliviousError(ValueError):
    """A Binary HTTP message, key configuration or encapsulated message that cannot be
    read: malformed, an algorithm not offered, or a ciphertext that fails authentication.

    Raised by ``client_sdk.ohttp`` on both sides: the collector's gateway answers 400 to
    it; the SDK's oblivious transport treats an answer it cannot decapsulate as a
    network error (retried).
    """


class UnknownKeyIdError(ObliviousError):
    """An encapsulated request under a key identifier the gateway does not hold (a key
    configuration fetched before a rotation). The gateway answers it with the
    ``ohttp-key`` problem of RFC 9458 §5.3; the SDK then fetches the keys again.

    Args:
        key_id: the request's key identifier.
    """

    def __init__(self, key_id: int) -> None:
        super().__init__(f"key identifier {key_id} unknown")
        self.key_id = key_id


class ReportRefused(Exception):
    """Inside ``Client.report()`` only, never raised into the app: a report not made,
    dropped for ``reason`` with ``detail``; ``misuse``, the app got it wrong (warned about
    naming the metric)."""

    def __init__(self, reason: str, detail: str = "", misuse: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.detail, self.misuse = reason, detail, misuse
