"""The privacy dictionary: every metric of a registry, what it asks, its ε and share of
the budget, owner, expiry, and what one report can and cannot reveal, in plain words.

One HTML fragment (:func:`render_body`) for the dashboard's ``/ui/dictionary`` and a
standalone page (:func:`render_page`) for ``ldp dictionary`` / ``ldp lint --html``.
See ``docs/guides/metrics-as-code.md``.
"""

from __future__ import annotations

import math
from html import escape

from aggregator.catalog.lint import LintResult
from aggregator.catalog.registry_file import MetricEntry

__all__ = ["guess_bound", "render_body", "render_page", "reveals"]

MAX_SHOWN_VALUES = 12
"""Values of a domain listed before "… and N more": a reviewer reads the gist."""


def guess_bound(loss: float) -> float:
    """The best a guess between two values, each equally likely beforehand, can do from
    reports that are together ``loss``-LDP: e^ε / (1 + e^ε) (a coin: 0.5)."""
    return 1.0 / (1.0 + math.exp(-loss))


def reveals(entry: MetricEntry) -> tuple[list[str], list[str]]:
    """What one report of the metric can and cannot reveal, in plain words."""
    d = entry.definition
    assert d is not None
    bounds = d.privacy_bounds()
    one = float(bounds["per_report"])
    can = [
        f"It can tilt a guess: between any two values, equally likely beforehand, one "
        f"report makes the right guess at most {guess_bound(one):.0%} likely (a coin toss "
        f"is 50 %); each value is at most {math.exp(one):.3g} times as likely as any other "
        f"to have produced what was sent (ε = {one:g}).",
        "Many devices' reports together reveal how common each value is: that is the "
        "purpose, and the dashboard shows it with its uncertainty.",
    ]
    if bounds["memoized"]:
        forever = float(bounds["unlimited_same_value"])
        can.append(
            f"Reports of an unchanged value repeat one randomized answer kept on the "
            f"device: together they reveal at most ε∞ = {forever:g} (a guess right at most "
            f"{guess_bound(forever):.0%}), but whoever can link reports could recognise the "
            "device by that answer."
        )
    elif d.budget is not None:
        r, period = d.budget.reports_per_period, d.budget.period
        can.append(
            f"Up to {r} report(s) per {period} add up: a {period}'s reports are together "
            f"at most {r * one:g}-LDP."
        )
    if d.dimensions:
        names = ", ".join(name for name, _ in d.dimensions)
        can.append(f"Its public dimensions ({names}) travel in the clear: NOT protected by ε.")
    cannot = [
        "It cannot reveal the true value for certain: every value could have produced it.",
        "It carries no device id, address, user agent or time of its own: the collector "
        "stores none, so reports of different metrics cannot be joined by them.",
    ]
    return can, cannot


def _asks(entry: MetricEntry) -> str:
    d = entry.definition
    assert d is not None
    if d.kind == "categorical":
        shown = ", ".join(d.domain[:MAX_SHOWN_VALUES])
        more = len(d.domain) - MAX_SHOWN_VALUES
        return f"one of {len(d.domain)} values: {shown}" + (
            f", … and {more} more" if more > 0 else ""
        )
    if d.kind in ("numeric", "distribution") and d.value_range:
        lo, hi = d.value_range
        return f"a number in [{lo:g}, {hi:g}]" + (
            " (its distribution)" if d.kind == "distribution" else ""
        )
    if d.kind == "joint":
        return "a tuple: " + "; ".join(f"{a} ({len(v)} values)" for a, v in d.attributes)
    return "a short text value (discovered, not listed)"


def _eps(value: float) -> str:
    return "unbounded" if math.isinf(value) else f"{value:.3g}"


def render_body(result: LintResult) -> str:
    """The dictionary as an HTML fragment (every text escaped)."""
    reg = result.registry
    head = "".join(f"<th>per {w}</th>" for w in result.windows())
    parts = [f'<section class="dictionary" data-registry="{escape(reg.path)}">']
    parts += _summary(result, head)
    for entry in reg.entries:
        parts += _metric(result, entry, head)
    parts.append("</section>")
    return "\n".join(parts)


def _summary(result: LintResult, head: str) -> list[str]:
    """The title, the lint status (and findings, when any is an error), the totals."""
    reg, windows = result.registry, result.windows()
    app = escape(str(reg.app.get("name", reg.path)))
    errors = [f for f in result.findings if not f.warning]
    status = (
        f"lints clean ({len(result.findings)} warnings)"
        if not errors
        else f"{len(errors)} lint errors: not ready for review"
    )
    parts = [
        f"<h1>Privacy dictionary: {app}</h1>",
        f'<p class="lint-status" data-ok="{str(not errors).lower()}">As of '
        f"{result.today.isoformat()}: {escape(status)}. Worst case per device, by "
        f"{escape(result.account.theorem)}.</p>",
    ]
    if errors:
        parts.append("<ul class='findings'>")
        parts += [f"<li><code>{escape(str(f))}</code></li>" for f in result.findings]
        parts.append("</ul>")
    worst = "".join(f"<td>{_eps(result.account.windows[w].total)}</td>" for w in windows)
    limits = [result.limit(w) for w in windows]
    budget = "".join(f"<td>{'—' if x is None else f'{x:g}'}</td>" for x in limits)
    return parts + [
        f'<div class="table-wrap"><table class="totals"><thead><tr><th></th>{head}</tr>'
        "</thead><tbody>",
        f"<tr><th>worst-case ε, all metrics</th>{worst}</tr>",
        f"<tr><th>the app's budget</th>{budget}</tr></tbody></table></div>",
    ]


def _metric(result: LintResult, entry: MetricEntry, head: str) -> list[str]:
    """One metric's article: what it asks, its settings, its share of the budget, and
    what one report can and cannot reveal."""
    d = entry.definition
    name = escape(entry.name)
    parts = [f'<article class="metric" id="{name}"><h2>{name}</h2>']
    if d is None:
        return parts + [f"<p>Refused: {escape('; '.join(entry.problems))}</p></article>"]
    budget_text = f"{d.budget.reports_per_period} per {d.budget.period}" if d.budget else "no limit"
    can, cannot = reveals(entry)
    return [
        *parts,
        f"<p class='asks'><strong>Asks:</strong> {escape(d.description or '(no description)')}"
        f" — {escape(_asks(entry))}.</p>",
        "<dl>",
        f"<dt>ε per report</dt><dd>{d.mechanism.epsilon:g} ({escape(d.mechanism.name)})</dd>",
        f"<dt>reports</dt><dd>{escape(budget_text)}</dd>",
        f"<dt>owners</dt><dd>{escape(', '.join(entry.owners) or 'none')}</dd>",
        f"<dt>expires</dt><dd>{escape(str(entry.expires or 'not set'))}</dd>",
        f"<dt>data review</dt><dd>{_review_link(entry)}</dd>",
        "</dl>",
        f"<div class='table-wrap'><table class='share'><thead><tr>{head}</tr></thead>"
        f"<tbody><tr>{''.join(_shares(result, entry.name))}</tr></tbody></table></div>",
        "<h3>What one report can reveal</h3><ul>",
        *[f"<li>{escape(line)}</li>" for line in can],
        "</ul><h3>What it cannot reveal</h3><ul>",
        *[f"<li>{escape(line)}</li>" for line in cannot],
        "</ul></article>",
    ]


def _review_link(entry: MetricEntry) -> str:
    """The metric's data review as a link (an https URL only), else ``none``."""
    review = entry.table.get("data_review")
    if isinstance(review, str) and review.startswith("https://"):
        return f'<a href="{escape(review)}" rel="noreferrer">{escape(review)}</a>'
    return "none"


def _shares(result: LintResult, name: str) -> list[str]:
    """A metric's worst-case ε per window, with its share of the budget where there is one."""
    cells = []
    for w in result.windows():
        value = result.account.windows[w].per_metric.get(name, 0.0)
        share = result.share(name, w)
        cells.append(
            f"<td>{_eps(value)}" + ("" if share is None else f" ({share:.0%} of budget)") + "</td>"
        )
    return cells


STYLE = """body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #ccc;padding:.2rem .5rem}
article{border-top:1px solid #999;margin-top:1.5rem}dt{font-weight:600;float:left;width:9rem}
dd{margin-left:9.5rem}"""


def render_page(result: LintResult) -> str:
    """The dictionary as one standalone HTML page (no script, nothing from elsewhere)."""
    title = escape(str(result.registry.app.get("name", result.registry.path)))
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Privacy dictionary: {title}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{STYLE}</style></head><body>\n{render_body(result)}\n</body></html>\n"
    )
