"""Alert rules against the committed counts: arm, evaluate, fire, acknowledge, resolve.

A rule is *armed* at a moment: the metric's all-time sums then are its origin, and it
tests only the reports counted after it (all-time sums minus the origin), so the
confidence sequence starts with the rule and old data neither dilutes nor delays it. A
``change`` rule also freezes its baseline's interval then. The aggregator's workers call
:meth:`Alerts.evaluate` after each round that counted reports of a watched metric;
firing is one ``HSETNX`` (exactly one worker fires a rule), and a firing queues one
notification per channel (:mod:`aggregator.alerts.notify` sends them). Resolving re-arms
the rule from that moment: the guarantee (at most α of a false alert) holds per arming.

In full: ``docs/guides/alerts.md``.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import redis

from aggregator.alerts.rules import AlertSpec, check_spec, describe, observable_for
from aggregator.query.alarms import checked_alarm_rate, current_alarms, tested
from aggregator.query.suppression import hidden_groups
from aggregator.query.window import read_counts, read_numeric, read_segments
from aggregator.safe_text import comma_list
from aggregator.stats.alerting import (
    Observable,
    change_fires,
    expected_delay,
    interval,
    level_fires,
)
from aggregator.stats.codecs import Counts
from aggregator.stats.detect import DEFAULT_ALARM_RATE, Alarm
from aggregator.stats.numeric import NumericStats
from aggregator.stats.segments import DEFAULT_MIN_SEGMENT_REPORTS, group_by
from client_sdk.wire import MetricDefinition
from ldp_store import alerts as store
from ldp_store import schema
from ldp_store.registry import Registry

__all__ = ["POISONING_INTERVAL", "Alerts", "AlarmChannels", "RuleRefused", "Sums", "message_of"]

log = logging.getLogger("ldp.aggregator.alerts")

Sums = tuple[int, int, int]
"""(n, Σ, Σ²) of a rule's reports, exact integers: support counts for a share (Σ = Σ² =
C(v)), the numeric sums in units for a mean."""


POISONING_INTERVAL = 60.0
"""Seconds between two poisoning tests of one metric by one worker: the tests read every
recent window (a few ms each), and an attack shows over minutes, not per batch."""


@dataclass(frozen=True)
class AlarmChannels:
    """Where the poisoning alarms are sent (``LDP_ALARM_WEBHOOK``, ``LDP_ALARM_EMAIL``)."""

    webhook: str | None = None
    email: tuple[str, ...] = ()
    rate: float = DEFAULT_ALARM_RATE
    """The false-alarm rate per window (``LDP_ALARM_RATE``)."""

    @classmethod
    def from_environ(cls) -> AlarmChannels:
        """From the environment.

        Raises:
            ValueError: ``LDP_ALARM_RATE`` out of range.
        """
        email = os.environ.get("LDP_ALARM_EMAIL", "")
        return cls(
            webhook=os.environ.get("LDP_ALARM_WEBHOOK") or None,
            email=comma_list(email),
            rate=checked_alarm_rate(os.environ.get("LDP_ALARM_RATE", DEFAULT_ALARM_RATE)),
        )


class RuleRefused(ValueError):
    """A rule that cannot be armed (every problem in ``problems``)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Alerts:
    """The alert rules of one Redis: the operations the API, the CLI and the workers share.

    Args:
        client: Redis.
        registry: the metric registry (default: over ``client``).
        public_url: the dashboard's address, for the links in messages.
        clock: Unix time (tests pass their own).
        alarms: where the poisoning alarms of the metrics counted are sent (None: they
            are not tested here; the dashboard and ``/metrics`` still show them).
        min_segment_reports: the breakdowns' least reports of a shown group
            (``LDP_MIN_SEGMENT_REPORTS``): a rule on a group the breakdown hides waits.
    """

    def __init__(
        self,
        client: redis.Redis,
        registry: Registry | None = None,
        public_url: str = "",
        clock: Callable[[], float] = time.time,
        alarms: AlarmChannels | None = None,
        min_segment_reports: int = DEFAULT_MIN_SEGMENT_REPORTS,
    ) -> None:
        self.alarms = alarms
        self.min_segment_reports = min_segment_reports
        self._alarms_due: dict[str, float] = {}
        self.redis = client
        self.registry = registry or Registry(client)
        self.public_url = public_url.rstrip("/")
        self.clock = clock

    # -- reading a rule's reports ----------------------------------------------------------
    def _sums(self, definition: MetricDefinition, spec: AlertSpec, window: str = "all") -> Sums:
        stats: Counts | NumericStats | None
        if spec.dimension is not None:
            groups = group_by(
                definition, read_segments(self.redis, definition, window), spec.dimension
            )
            stats = groups.get(spec.group or "")
        elif definition.kind == "numeric":
            stats = read_numeric(self.redis, definition, window)
        else:
            stats = read_counts(self.redis, definition, window)
        if stats is None:
            return 0, 0, 0
        if isinstance(stats, NumericStats):
            return stats.n, stats.total, stats.total_sq
        c = int(stats.support[definition.domain.index(spec.value or "")])
        return stats.n, c, c

    @staticmethod
    def _real(definition: MetricDefinition, sums: Sums) -> tuple[int, float, float]:
        """Sums in the units an :class:`Observable` tests (numeric units → reports)."""
        n, total, total_sq = sums
        if definition.kind != "numeric":
            return n, float(total), float(total_sq)
        unit = definition.numeric.bound / definition.numeric.bound_units
        return n, total * unit, total_sq * unit * unit

    def _baseline(self, definition: MetricDefinition, spec: AlertSpec, at: float) -> Sums:
        if not spec.baseline_days:
            return self._sums(definition, spec)
        n = total = total_sq = 0
        for day in self._baseline_days(spec, at):
            dn, dt, dsq = self._sums(definition, spec, day)
            n, total, total_sq = n + dn, total + dt, total_sq + dsq
        return n, total, total_sq

    @staticmethod
    def _baseline_days(spec: AlertSpec, at: float) -> list[str]:
        today = datetime.fromtimestamp(at, tz=UTC).date()
        return [
            f"day:{today - timedelta(days=back):%Y-%m-%d}"
            for back in range(1, (spec.baseline_days or 0) + 1)
        ]

    def _hidden(
        self, definition: MetricDefinition, spec: AlertSpec, windows: Sequence[str]
    ) -> str | None:
        """Why a rule on one group cannot show its figures now: the metric's breakdown
        hides the group in one of ``windows`` (the rule's n, estimate and interval would
        disclose what the breakdown holds back); None when shown, or not a group rule."""
        if spec.dimension is None:
            return None
        hidden = hidden_groups(self.redis, definition, self.min_segment_reports, also=windows)
        for window in windows:
            why = hidden.of(window, spec.dimension).get(spec.group or "")
            if why is not None:
                return (
                    f"{spec.dimension}={spec.group} is hidden from the breakdown in {window} "
                    f"({why}: fewer than {self.min_segment_reports} reports, or held back "
                    "with such a group)"
                )
        return None

    # -- arming ---------------------------------------------------------------------------
    def arm(self, rule: dict[str, Any], definition: MetricDefinition) -> dict[str, Any]:
        """The rule armed now on ``definition``: its origin, baseline and expected delay.

        Raises:
            RuleRefused: a change rule whose baseline holds no reports.
        """
        spec = AlertSpec.model_validate(rule["spec"])
        now = self.clock()
        origin = self._sums(definition, spec)
        # A group's reports before arming must be shown or none: the figures since arming
        # and the group's all-time figure would otherwise give them.
        shown = [*self._baseline_days(spec, now), *([schema.ALL] if origin[0] else [])]
        waiting = self._hidden(definition, spec, shown) if shown else None
        if waiting is not None:  # armed once shown (see _evaluate): no figure of it kept
            waiting += ": the rule waits until it is shown"
            return {
                **rule,
                "version": definition.version,
                "armed_at": None,
                "origin": None,
                "baseline": None,
                "expected_delay": None,
                "waiting": waiting,
            }
        obs = observable_for(definition)
        armed = {
            **rule,
            "version": definition.version,
            "armed_at": now,
            "origin": list(origin),
            "baseline": None,
            "waiting": None,
        }
        if spec.kind == "change":
            n, total, total_sq = self._real(definition, self._baseline(definition, spec, now))
            if n == 0:
                raise RuleRefused(
                    [
                        "the baseline holds no reports yet: a change needs one to "
                        "compare with (or baseline_days over days with reports)"
                    ]
                )
            lo, hi = interval(obs, n, total, total_sq, spec.alpha / 2)
            armed["baseline"] = {
                "n": n,
                "estimate": float(obs.estimand_of(total / n)),
                "ci": [float(obs.estimand_of(lo)), float(obs.estimand_of(hi))],
            }
        armed["expected_delay"] = self._delay(spec, obs, armed["baseline"])
        return armed

    @staticmethod
    def _delay(spec: AlertSpec, obs: Observable, baseline: dict[str, Any] | None) -> Any:
        """Reports until the rule fires, typically, for a 2× change (see the guide)."""
        if spec.kind == "change":
            assert baseline is not None
            b = baseline["estimate"]
            truth = 2 * b if spec.value is not None else b + 0.1 * (obs.slope * 2)
            lo, hi = baseline["ci"]
            edge = hi + spec.min_change if truth > b else lo - spec.min_change
            alpha = spec.alpha / 2
        else:
            level = float(spec.level or 0.0)
            above = spec.kind.endswith("above")
            if spec.value is not None:
                truth = min(2 * level, 0.999) if above else level / 2
            else:  # a mean: a tenth of the range beyond the level
                truth = level + (0.1 if above else -0.1) * obs.slope * 2
            edge, alpha = level, spec.alpha
        if not math.isfinite(truth):
            return None
        reports = expected_delay(obs, truth, edge, alpha)
        return {"truth": truth, "reports": reports}

    def create(self, spec: AlertSpec) -> dict[str, Any]:
        """Store a new rule, armed now.

        Raises:
            RuleRefused: the rule does not fit its metric (every problem), or a change rule's
                baseline is empty.
        """
        definition = self.registry.get(spec.metric)
        problems = check_spec(spec, definition)
        if problems:
            raise RuleRefused(problems)
        assert definition is not None
        hidden_baseline = self._hidden(definition, spec, self._baseline_days(spec, self.clock()))
        if hidden_baseline is not None:  # past days: they would never show it
            raise RuleRefused(
                [f"a change against these baseline days would disclose them: {hidden_baseline}"]
            )
        rule_id = secrets.token_hex(6)
        rule = {"id": rule_id, "spec": spec.model_dump(mode="json"), "created": self.clock()}
        armed = self.arm(rule, definition)
        store.put_rule(self.redis, rule_id, armed)
        store.add_event(
            self.redis,
            {"type": "created", "rule": rule_id, "at": armed["created"], "summary": describe(spec)},
        )
        return armed

    # -- evaluating ------------------------------------------------------------------------
    def evaluate(self, metrics: Collection[str] | None = None) -> list[dict[str, Any]]:
        """Test every rule (on ``metrics`` only, if given); fire those that fail.

        Returns:
            The events of the rules that fired now.
        """
        fired: list[dict[str, Any]] = []
        if self.alarms is not None and metrics is not None:
            fired += self._poisoning(metrics, self.alarms)
        rules = store.rules(self.redis)
        if not rules:
            return fired
        states = store.states(self.redis)
        evaluations: dict[str, dict[str, Any]] = {}
        for rule_id, rule in rules.items():
            spec = AlertSpec.model_validate(rule["spec"])
            if metrics is not None and spec.metric not in metrics:
                continue
            try:
                evaluation = self._evaluate(rule, spec)
            except (ValueError, KeyError, redis.ResponseError) as exc:
                log.warning("alert %s: not evaluated: %s", rule_id, exc)
                evaluations[rule_id] = {"at": self.clock(), "error": str(exc)[:300]}
                continue
            evaluations[rule_id] = evaluation
            if evaluation["firing"] and rule_id not in states["firing"]:
                event = self._fire(rule, spec, evaluation, states["silences"].get(rule_id))
                if event is not None:
                    fired.append(event)
        store.record_evaluation(self.redis, evaluations)
        return fired

    def _poisoning(self, metrics: Collection[str], channels: AlarmChannels) -> list[dict[str, Any]]:
        """Test the counted metrics for poisoning (each at most every
        :data:`POISONING_INTERVAL`); notify each alarm once."""
        now = self.clock()
        events = []
        for name in sorted(metrics):
            if self._alarms_due.get(name, 0.0) > now:
                continue
            self._alarms_due[name] = now + POISONING_INTERVAL
            definition = self.registry.get(name)
            if definition is None or not tested(definition):
                continue
            for alarm in current_alarms(self.redis, definition, channels.rate):
                mark = f"{name}:{definition.version}:{alarm.window}:{alarm.kind}"
                if not store.first_poisoning(self.redis, mark):
                    continue
                event = self._poisoning_event(name, definition, alarm, channels.rate, now)
                event["id"] = store.add_event(self.redis, event)
                self.notify(event, channels.webhook, list(channels.email))
                events.append(event)
        return events

    def _poisoning_event(
        self, name: str, definition: MetricDefinition, alarm: Alarm, rate: float, now: float
    ) -> dict[str, Any]:
        """The event of a poisoning alarm of metric ``name`` (its current ``definition``)
        raised at false-alarm ``rate``."""
        values = [definition.domain[v] for v in alarm.values]
        event: dict[str, Any] = {
            "type": "poisoning",
            "metric": name,
            "version": definition.version,
            "summary": f"possible poisoning of {name} ({alarm.kind}, {alarm.window})",
            "kind": alarm.kind,
            "window": alarm.window,
            "evidence": alarm.evidence,
            "values": values,
            "p_value": alarm.p_value,
            "alpha": alarm.alpha,
            "at": now,
            "link": self.link(name),
        }
        flagged = f" (values: {', '.join(values)})" if values else ""
        event["message"] = (
            f"{event['summary']}: {alarm.evidence}{flagged}; p = {alarm.p_value:.3g} "
            f"at a false-alarm rate of {rate:g} per window. {event['link']}"
        )
        return event

    def _evaluate(self, rule: dict[str, Any], spec: AlertSpec) -> dict[str, Any]:
        definition = self.registry.get(spec.metric)
        if definition is None:
            raise ValueError(f"metric {spec.metric!r} no longer exists")
        if definition.version != rule["version"] or rule.get("armed_at") is None:
            rule = self.arm(rule, definition)  # a new version's parameters, or now shown
            store.put_rule(self.redis, rule["id"], rule)
        out: dict[str, Any] = {"at": self.clock(), "version": definition.version}
        waiting = rule.get("waiting") or self._hidden(definition, spec, [schema.ALL])
        if waiting is not None:  # hidden (again): nothing tested, nothing shown
            return {**out, "firing": False, "waiting": waiting}
        obs = observable_for(definition)
        now_sums = self._sums(definition, spec)
        since = tuple(a - b for a, b in zip(now_sums, rule["origin"], strict=True))
        n, total, total_sq = self._real(definition, since)
        out["n"] = n
        if n <= 0:
            return {**out, "firing": False}
        firing, alpha = _fires(spec, obs, rule, (n, total, total_sq))
        lo, hi = interval(obs, n, total, total_sq, alpha)
        return {
            **out,
            "firing": bool(firing),
            "estimate": float(obs.estimand_of(total / n)),
            "ci": [float(obs.estimand_of(lo)), float(obs.estimand_of(hi))],
            "confidence": 1 - alpha,
        }

    def _fire(
        self,
        rule: dict[str, Any],
        spec: AlertSpec,
        evaluation: dict[str, Any],
        silence: dict[str, Any] | None,
    ) -> dict[str, Any] | None:
        now = self.clock()
        event = {
            "type": "fired",
            "rule": rule["id"],
            "metric": spec.metric,
            "version": evaluation["version"],
            "summary": describe(spec),
            "description": spec.description,
            "estimate": evaluation["estimate"],
            "ci": evaluation["ci"],
            "confidence": evaluation["confidence"],
            "n": evaluation["n"],
            "armed_at": rule["armed_at"],
            "baseline": rule.get("baseline"),
            "level": spec.level,
            "alpha": spec.alpha,
            "at": now,
            "link": self.link(spec.metric),
        }
        event["message"] = message_of(event, spec)
        if not store.fire(self.redis, rule["id"], event):
            return None  # another worker fired it first
        event_id = store.add_event(self.redis, event)
        event["id"] = event_id
        silenced = silence is not None and silence.get("until", 0) > now
        if not silenced:
            self.notify(event, spec.webhook, spec.email)
        return event

    def link(self, metric: str) -> str:
        """The metric page's address."""
        return f"{self.public_url}/ui/metric/{metric}"

    def notify(self, event: dict[str, Any], webhook: str | None, email: list[str]) -> int:
        """Queue one notification per channel; how many."""
        targets = ([("webhook", webhook)] if webhook else []) + [("email", a) for a in email]
        for channel, target in targets:
            store.enqueue(
                self.redis,
                {
                    "key": f"{event['id']}:{channel}:{target}",
                    "channel": channel,
                    "target": target,
                    "attempt": 0,
                    "event": event,
                },
            )
        return len(targets)

    # -- operators --------------------------------------------------------------------------
    def _rule(self, rule_id: str) -> dict[str, Any]:
        rule = store.get_rule(self.redis, rule_id)
        if rule is None:
            raise KeyError(rule_id)
        return rule

    def acknowledge(self, rule_id: str, note: str = "") -> dict[str, Any]:
        """Acknowledge a firing rule: someone is on it (no more reminders; it stays firing).

        Raises:
            KeyError: no such rule.
            RuleRefused: the rule is not firing.
        """
        self._rule(rule_id)
        if rule_id not in store.firings(self.redis):
            raise RuleRefused([f"alert {rule_id} is not firing"])
        ack = {"at": self.clock(), "note": note[:500]}
        store.set_ack(self.redis, rule_id, ack)
        store.add_event(self.redis, {"type": "acknowledged", "rule": rule_id, **ack})
        return ack

    def resolve(self, rule_id: str, note: str = "") -> dict[str, Any]:
        """End a firing and re-arm the rule from now (a fresh test, its own α).

        Raises:
            KeyError: no such rule.
            RuleRefused: its metric is gone, or its new baseline is empty.
        """
        rule = self._rule(rule_id)
        definition = self.registry.get(rule["spec"]["metric"])
        if definition is None:
            raise RuleRefused([f"metric {rule['spec']['metric']!r} no longer exists"])
        armed = self.arm(rule, definition)
        store.put_rule(self.redis, rule_id, armed)
        store.clear_firing(self.redis, rule_id)
        store.add_event(
            self.redis,
            {"type": "resolved", "rule": rule_id, "at": self.clock(), "note": note[:500]},
        )
        return armed

    def silence(self, rule_id: str, seconds: float) -> float | None:
        """Send no notifications of a rule for ``seconds`` (0: unsilence); the end time.

        Raises:
            KeyError: no such rule.
        """
        self._rule(rule_id)
        until = self.clock() + seconds if seconds > 0 else None
        store.set_silence(self.redis, rule_id, until)
        store.add_event(
            self.redis,
            {
                "type": "silenced" if until else "unsilenced",
                "rule": rule_id,
                "at": self.clock(),
                "until": until,
            },
        )
        return until

    def delete(self, rule_id: str) -> None:
        """Forget a rule.

        Raises:
            KeyError: no such rule.
        """
        if not store.delete_rule(self.redis, rule_id):
            raise KeyError(rule_id)
        store.add_event(self.redis, {"type": "deleted", "rule": rule_id, "at": self.clock()})

    def listing(self) -> list[dict[str, Any]]:
        """Every rule with its state (firing, acknowledged, silenced, last evaluation)."""
        states = store.states(self.redis)
        now = self.clock()
        out = []
        for rule_id, rule in sorted(
            store.rules(self.redis).items(), key=lambda kv: kv[1]["created"]
        ):
            silence = states["silences"].get(rule_id)
            until = silence["until"] if silence and silence["until"] > now else None
            firing = states["firing"].get(rule_id)
            status = (
                "ok"
                if firing is None
                else ("acknowledged" if rule_id in states["acks"] else "firing")
            )
            out.append(
                {
                    **rule,
                    "summary": describe(rule["spec"]),
                    "status": status,
                    "firing": firing,
                    "acknowledged": states["acks"].get(rule_id),
                    "silenced_until": until,
                    "last": states["last"].get(rule_id),
                }
            )
        return out


_SHARE_WORDS = ("the share", 100, ".2f", "%", " points")
_MEAN_WORDS = ("the mean", 1, ".4g", "", "")
"""How :func:`message_of` names a share and a mean, scales and formats them, and the
unit of a difference."""


def _fires(
    spec: AlertSpec, obs: Observable, rule: dict[str, Any], sums: tuple[int, float, float]
) -> tuple[bool, float]:
    """Whether a rule fires on the reports' sums since it was armed, and the level of the
    interval it reads (each side of a change rule's test has half its alpha)."""
    n, total, total_sq = sums
    if spec.kind == "change":
        b_lo, b_hi = (float(obs.mean_of(x)) for x in rule["baseline"]["ci"])
        return change_fires(obs, sums, (b_lo, b_hi), spec.min_change, spec.alpha), spec.alpha / 2
    above = spec.kind.endswith("above")
    level = float(spec.level or 0.0)
    return level_fires(obs, n, total, total_sq, level, above, spec.alpha), spec.alpha


def message_of(event: dict[str, Any], spec: AlertSpec) -> str:
    """What changed, by how much, with its interval, and where to look."""
    noun, scale, spec_fmt, sign, unit = _SHARE_WORDS if spec.value is not None else _MEAN_WORDS

    def fmt(x: float) -> str:
        return f"{scale * x:{spec_fmt}}{sign}"

    est, (lo, hi) = event["estimate"], event["ci"]
    conf = f"{100 * event['confidence']:.4g}%"
    now = f"{fmt(est)} ({conf} anytime interval {fmt(lo)} to {fmt(hi)})"
    if spec.kind == "change":
        base = event["baseline"]
        b_lo, b_hi = base["ci"]
        diff = est - base["estimate"]
        what = (
            f"changed from {fmt(base['estimate'])} (baseline, {fmt(b_lo)} to {fmt(b_hi)}, "
            f"{base['n']:,} reports) to {now}: {scale * diff:+.3g}{unit}"
        )
    else:
        level = float(spec.level or 0.0)
        side = "above" if spec.kind.endswith("above") else "below"
        gap = scale * abs(est - level)
        what = f"is {side} {fmt(level)}: now {now}, {gap:.3g}{unit} {side} the level"
    return (
        f"{event['summary']}: {noun} {what}; from "
        f"{event['n']:,} reports since {_utc(event['armed_at'])} (version {event['version']}). "
        f"{event['link']}"
    )
