"""The hidden groups of a metric's breakdowns in every served window at once: each live
window's reports per segment read in one pipeline, grouped per dimension, and decided
together by :func:`aggregator.stats.suppression.hide_across_windows` (all time holds
its days and any hour whose day is gone; a day holds its hours).

In full: ``docs/statistics/suppression.md``.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis

from aggregator.query.window import list_windows, read_segment_sizes
from aggregator.stats.suppression import Why, Window, hide_across_windows
from client_sdk.wire import MetricDefinition, segment_labels
from ldp_store import schema

__all__ = ["HiddenGroups", "hidden_groups"]


class HiddenGroups:
    """Every served window's hidden groups, per dimension, of one metric version as read
    at one moment (decided on first use of a dimension)."""

    def __init__(
        self, definition: MetricDefinition, sizes: dict[str, list[int]], minimum: int
    ) -> None:
        self.definition = definition
        self.sizes = sizes
        self.minimum = minimum
        self._decided: dict[str, dict[str, dict[str, Why]]] = {}
        self._holder: dict[str, str] = {}

    def of(self, window: str, dimension: str) -> dict[str, Why]:
        """The hidden groups of ``dimension`` in ``window`` (one of those read), and why.

        Raises:
            KeyError: a window that was not read, or a dimension the metric lacks.
        """
        if dimension not in self._decided:
            self._decided[dimension] = hide_across_windows(self._tree(dimension), self.minimum)
        return self._decided[dimension][window]

    def holder(self, window: str) -> str | None:
        """The served window directly holding ``window`` (None for all time)."""
        if not self._holder:
            self._tree(next(iter(dict(self.definition.dimensions))))
        return self._holder.get(window)

    def _groups(self, window: str, labels: list[str], values: tuple[str, ...]) -> dict[str, int]:
        out = dict.fromkeys(values, 0)
        for label, n in zip(labels, self.sizes[window], strict=True):
            out[label] += n
        return out

    def _tree(self, dimension: str) -> Window:
        dimensions = self.definition.dimensions
        labels = [segment_labels(dimensions, s)[dimension] for s in range(self.definition.segments)]
        values = dict(dimensions)[dimension]
        days = [w for w in self.sizes if w.startswith("day:")]
        inside: dict[str, list[Window]] = {schema.ALL: [], **{d: [] for d in days}}
        for window in self.sizes:
            if window.startswith("hour:"):
                day = schema.day_of(window)
                holder = day if day in inside else schema.ALL
                inside[holder].append(Window(window, self._groups(window, labels, values)))
                self._holder[window] = holder
        for day in days:
            inside[schema.ALL].append(
                Window(day, self._groups(day, labels, values), tuple(inside[day]))
            )
            self._holder[day] = schema.ALL
        return Window(
            schema.ALL, self._groups(schema.ALL, labels, values), tuple(inside[schema.ALL])
        )


def hidden_groups(
    client: redis.Redis, definition: MetricDefinition, minimum: int, also: Iterable[str] = ()
) -> HiddenGroups:
    """Read every live window of a version (and ``also``: a window asked for that is not
    listed yet) and return their hidden groups.

    Args:
        client: a redis-py client.
        definition: a metric version with public dimensions.
        minimum: the least reports a shown group has.
        also: windows to decide beside the live ones.
    """
    windows = list_windows(client, definition)
    windows += [w for w in (schema.ALL, *also) if w not in windows]
    return HiddenGroups(definition, read_segment_sizes(client, definition, windows), minimum)
