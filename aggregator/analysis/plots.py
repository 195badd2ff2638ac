"""The tradeoff sweep's figures: error against ε and N, binary RR, users needed.

The one module that imports matplotlib (Agg canvas: no display, no pyplot global state);
:func:`run_tradeoff` runs the sweep and writes its CSV and plots (``ldp tradeoff``). Each
plot takes the sweep's :class:`~aggregator.analysis.tradeoff.TradeoffPoint` rows (or
computes its grid with the mechanisms' own variance) and writes one 150 dpi PNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

from aggregator.analysis import tradeoff
from aggregator.analysis.tradeoff import (
    BINARY,
    COIN_FLIP,
    MECHANISMS,
    TradeoffPoint,
    theory_variance,
    users_needed_grid,
)
from aggregator.stats.planning import central_laplace_std
from aggregator.stats.shuffling import shuffled_epsilon
from client_sdk import mechanisms
from client_sdk.mechanisms import BinaryRR

__all__ = [
    "nearest",
    "plot_binary_rr",
    "plot_latency_quantiles",
    "plot_error_vs_epsilon",
    "plot_error_vs_users",
    "plot_reconstruction",
    "plot_shuffled_epsilon",
    "plot_users_needed",
    "run_tradeoff",
]

SURVEY_USERS: tuple[int, ...] = (10**3, 10**5)
"""N of the binary-RR plot: a survey-sized population and a deployment-sized one."""

FLIP_PROBABILITIES: tuple[float, ...] = (0.45, 0.4, 0.25, 0.1, 0.01, 0.001)
"""Ticks of the binary-RR plot's flip-probability axis (the seeds' other form)."""

HEATMAP_DOMAINS: tuple[int, ...] = tuple(2**j for j in range(1, 13))
"""k of the users-needed map: powers of two, 2 to 4096 (a flag to a large enum)."""

THEORY_CURVE_POINTS = 60
"""Points of the dense theory curves (the sweep's ε grid is too coarse for a smooth line)."""

COLORS: dict[str, str] = {
    "grr": "#1f77b4",
    "sue": "#ff7f0e",
    "oue": "#2ca02c",
    "olh": "#d62728",
    "hr": "#9467bd",
    "ss": "#8c564b",
    "rr": "#17becf",
    "central": "#222222",
}
"""One color per mechanism in every plot (matplotlib's tab10), central Laplace near-black."""

MARKERS: dict[str, str] = {
    "grr": "o",
    "sue": "s",
    "oue": "^",
    "olh": "v",
    "hr": "D",
    "ss": "P",
    "rr": "o",
}

MARKER_SIZES: dict[str, float] = {
    "grr": 10,
    "sue": 7,
    "oue": 9.5,
    "olh": 6.5,
    "hr": 7,
    "ss": 6.5,
    "rr": 7,
}
"""Mechanisms whose points coincide (oue/olh; grr/ss at large ε, where ss has s = 1) get
a large and a small marker: the later, smaller one sits inside the earlier one."""

LINESTYLES: dict[str, Any] = {"olh": (0, (6, 2))}
"""olh's theory line is dashed-short so it stays visible where it coincides with oue's."""

DPI = 150

SLIDE_RC: dict[str, Any] = {
    "font.size": 12,
    "axes.titlesize": 15,
    "axes.labelsize": 13,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 10.5,
    "figure.titlesize": 16,
    "axes.grid": True,
    "grid.alpha": 0.35,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "savefig.dpi": DPI,
}

PP = 100.0
"""Plots show errors in percentage points of the population (1 pp = 0.01)."""


def nearest(grid: Sequence[float], target: float) -> float:
    """The grid value closest to ``target`` on a log scale."""
    return min(grid, key=lambda x: abs(math.log(x / target)))


def _round2(x: float) -> str:
    """Two significant digits without an exponent: 447.3 → "450", 0.0412 → "0.041"."""
    return f"{float(f'{x:.2g}'):,g}"


def _fmt_users(n: float, exact_below: float = 1e4) -> str:
    """Compact user counts: 2,901 → "2,901"; 28,123 → "28k"; 2.5·10⁶ → "2.5M"."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (exact_below, "k")):
        if n >= size:
            scale = 1e3 if suffix == "k" else size
            return f"{_round2(n / scale)}{suffix}"
    return f"{n:,.0f}"


def _slide_style(overrides: dict[str, Any] | None = None) -> AbstractContextManager[Any]:
    """:data:`SLIDE_RC` (plus ``overrides``) for the figures drawn inside the ``with``."""

    rc: Any = {**SLIDE_RC, **(overrides or {})}
    return matplotlib.rc_context(rc)


def _new_figure(width: float = 12.0, height: float = 6.6) -> Any:
    """A Figure on an Agg canvas: no pyplot, no display, no global backend switch."""

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _titles(fig: Any, ax: Any, message: str, setting: str) -> None:
    """The slide's message as the figure title, the experimental setting under it."""
    fig.suptitle(message, fontsize=15, fontweight="bold")
    ax.set_title(setting, fontsize=11.5, color="0.3")


def _log_axes(ax: Any, xticks: Sequence[float], xlabels: Sequence[str]) -> None:
    """Log-log axes; x ticks at the swept values; y in percentage points (0.01, 0.1, 1)."""

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(xticks), list(xlabels))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(LogLocator(base=10))
    ax.yaxis.set_major_formatter(
        FuncFormatter(lambda y, _pos: np.format_float_positional(y, precision=6, trim="-"))
    )
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", axis="y", alpha=0.1)


def _legend(ax: Any, handles: list[Any]) -> None:
    """Legend outside the axes on the right, so it never hides a line."""
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0.0,
        framealpha=0.95,
    )


def _style_handles(reps: int) -> list[Any]:
    """Legend entries explaining lines (theory) and markers (simulation)."""

    return [
        Line2D([], [], color="0.45", lw=2, label="line: theory (exact variance)"),
        Line2D(
            [],
            [],
            color="0.45",
            marker="o",
            ls="none",
            markersize=7,
            label=f"marker: simulation\n({reps} populations per point)",
        ),
    ]


def _mechanism_handles(names: Sequence[str]) -> list[Any]:
    """Legend entries: one per mechanism (its color, marker and line), then central Laplace."""

    # OLH's exact variance (its hash family's collision rate, not the ideal 1/g) is within
    # 7 % of OUE's up to ε = 2 and falls below it beyond (0.63× at ε = 4, k = 64)
    labels = {"olh": "OLH (≈ OUE's Var for ε ≤ 2, lower above)", "ss": "SS (= GRR when s = 1)"}
    return [
        Line2D(
            [],
            [],
            color=COLORS[n],
            marker=MARKERS[n],
            markersize=MARKER_SIZES[n] - 1,
            ls=LINESTYLES.get(n, "-"),
            lw=2,
            label=labels.get(n, n.upper()),
        )
        for n in names
    ] + [
        Line2D(
            [],
            [],
            color=COLORS["central"],
            ls="--",
            lw=2,
            label="central Laplace √2/(Nε)\n(trusted curator)",
        )
    ]


def _markers(ax: Any, name: str, x: Sequence[float], se: Sequence[float], **kw: Any) -> None:
    """Simulated points of one mechanism, in percentage points."""
    style: dict[str, Any] = {
        "ls": "none",
        "marker": MARKERS.get(name, "o"),
        "color": COLORS.get(name),
        "markersize": MARKER_SIZES.get(name, 7),
        "markeredgecolor": "white",
        "markeredgewidth": 0.8,
        "zorder": 3,
    }
    ax.plot(list(x), [PP * v for v in se], **{**style, **kw})


def _theory_se(name: str, domain_size: int, users: int, eps: Any, dist: str) -> list[float]:
    """√(theory variance) of ``name`` at each ε (dense curves for the plots)."""
    return [
        math.sqrt(
            theory_variance(
                mechanisms.create(name, epsilon=float(e), domain_size=domain_size), users, dist
            )
        )
        for e in eps
    ]


def _rows(points: Sequence[TradeoffPoint], name: str, **match: Any) -> list[TradeoffPoint]:
    """The ``form="epsilon"`` points of ``name`` matching ``match``, by ε then N."""
    found = [
        p
        for p in points
        if p.mechanism == name
        and p.form == "epsilon"
        and all(getattr(p, key) == value for key, value in match.items())
    ]
    return sorted(found, key=lambda p: (p.epsilon, p.users))


def _gap(points: Sequence[TradeoffPoint], epsilon: float, users: int) -> float:
    """The best mechanism's theoretical error at (ε, N) over a trusted curator's."""
    best = min(
        p.theory_se
        for p in points
        if p.form == "epsilon"
        and p.mechanism in MECHANISMS
        and p.epsilon == epsilon
        and p.users == users
    )
    return best / central_laplace_std(users, epsilon)


def _theory_line(ax: Any, name: str, x: Iterable[float], se: Iterable[float]) -> None:
    """A mechanism's theoretical standard error, in percentage points."""
    ax.plot(
        x,
        [PP * v for v in se],
        color=COLORS[name],
        lw=2,
        ls=LINESTYLES.get(name, "-"),
        zorder=2,
    )


def _central_line(ax: Any, x: Iterable[float], se: Iterable[float]) -> None:
    """The trusted curator's (central Laplace) standard error, in percentage points."""
    ax.plot(x, [PP * v for v in se], color=COLORS["central"], ls="--", lw=2)


def _finish_error_plot(fig: Any, ax: Any, path: Path, reps: int, title: str, given: str) -> None:
    """The y axis, titles (``given``: the setting; then the simulation's seeding), legend
    and file of a standard-error plot."""
    ax.set_ylabel("standard error of one frequency\n(percentage points, log scale)")
    _titles(fig, ax, title, f"{given}; simulation: numpy PCG64, seeded")
    _legend(ax, _mechanism_handles(MECHANISMS) + _style_handles(reps))
    fig.savefig(path, dpi=DPI)


def plot_error_vs_epsilon(
    points: Sequence[TradeoffPoint], path: Path, domain_size: int, users: int
) -> Path:
    """Plot 1: standard error vs ε at fixed N, theory lines and simulated markers."""
    eps_grid = sorted({p.epsilon for p in _rows(points, MECHANISMS[0])})
    dense = np.geomspace(eps_grid[0], eps_grid[-1], THEORY_CURVE_POINTS)
    dist = points[0].distribution
    reps = _rows(points, MECHANISMS[0])[0].simulated_reps
    gaps = [_gap(points, e, users) for e in eps_grid]
    with _slide_style():
        fig = _new_figure()
        ax = fig.add_subplot()
        for name in MECHANISMS:
            _theory_line(ax, name, dense, _theory_se(name, domain_size, users, dense, dist))
            sim = _rows(points, name, users=users)
            _markers(ax, name, [p.epsilon for p in sim], [p.simulated_rmse for p in sim])
        _central_line(ax, dense, [central_laplace_std(users, float(e)) for e in dense])
        _log_axes(ax, eps_grid, [f"{e:g}" for e in eps_grid])
        ax.set_xlabel("privacy parameter ε per report (log scale; smaller = more private)")
        title = (
            f"Local DP: {_round2(min(gaps))}–{_round2(max(gaps))}× the error of a trusted "
            f"curator at N = {users:,}"
        )
        given = f"N = {users:,} users, k = {domain_size} values, {dist} population"
        _finish_error_plot(fig, ax, path, reps, title, given)
    return path


def plot_error_vs_users(
    points: Sequence[TradeoffPoint], path: Path, domain_size: int, epsilon: float
) -> Path:
    """Plot 2: standard error vs N at fixed ε, theory lines and simulated markers."""
    dist = points[0].distribution
    users = sorted({p.users for p in _rows(points, MECHANISMS[0])})
    reps = _rows(points, MECHANISMS[0])[0].simulated_reps
    best = [_gap(points, epsilon, n) for n in (users[0], users[-1])]
    with _slide_style():
        fig = _new_figure()
        ax = fig.add_subplot()
        for name in MECHANISMS:
            row = _rows(points, name, epsilon=epsilon)
            _theory_line(ax, name, [p.users for p in row], [p.theory_se for p in row])
            _markers(ax, name, [p.users for p in row], [p.simulated_rmse for p in row])
        _central_line(ax, users, [central_laplace_std(n, epsilon) for n in users])
        _log_axes(ax, users, [_fmt_users(n, exact_below=1e3) for n in users])
        ax.set_xlabel("users N (log scale)")
        title = (
            "Local error falls as 1/√N, central as 1/N: the gap grows from "
            f"{_round2(best[0])}× ({_fmt_users(users[0], 1e3)} users) to "
            f"{_round2(best[1])}× ({_fmt_users(users[-1], 1e3)})"
        )
        given = f"ε = {epsilon:g} per report, k = {domain_size} values, {dist} population"
        _finish_error_plot(fig, ax, path, reps, title, given)
    return path


def plot_binary_rr(points: Sequence[TradeoffPoint], path: Path) -> Path:
    """Plot 3: the seeds' binary randomized response vs central Laplace, by ε.

    Marks the coin-flip design (keep 3/4, ε = ln 3) and labels a top axis with the flip
    probability p of the seeds' "flip with probability p" form (ε = ln((1−p)/p), computed
    by ``BinaryRR.from_flip_probability``).
    """

    rr_points = _rows(points, BINARY)
    eps_grid = sorted({p.epsilon for p in rr_points})
    swept = sorted({p.users for p in rr_points})
    survey = [n for n in SURVEY_USERS if n in swept] or sorted({swept[0], swept[-1]})
    dense = np.geomspace(eps_grid[0], eps_grid[-1], THEORY_CURVE_POINTS)
    dist = rr_points[0].distribution
    shades = ("#0b7285", "#e8590c", "#5f3dc4")
    with _slide_style():
        fig = _new_figure()
        ax = fig.add_subplot()
        handles: list[Any] = []
        for n, shade in zip(survey, shades, strict=False):
            handles += _binary_rr_at(ax, points, n, dense, dist, shade)
        _coin_flip_line(ax, BinaryRR.coin_flip())
        handles += [
            Line2D(
                [],
                [],
                color="0.5",
                marker="*",
                markersize=14,
                ls="none",
                markeredgecolor="black",
                label="seeds' coin-flip design",
            ),
            *_style_handles(rr_points[0].simulated_reps),
        ]
        _log_axes(ax, eps_grid, [f"{e:g}" for e in eps_grid])
        xlim = (eps_grid[0] * 0.9, eps_grid[-1] * 1.1)
        ax.set_xlim(*xlim)
        ax.set_xlabel("privacy parameter ε per answer (log scale)")
        ax.set_ylabel('standard error of the "yes" share\n(percentage points, log scale)')
        _flip_probability_axis(ax, xlim)
        _titles(
            fig,
            ax,
            "Warner's randomized response vs a trusted curator",
            f"one yes/no question, {dist} population; simulation: numpy PCG64, seeded",
        )
        _legend(ax, handles)
        fig.savefig(path, dpi=DPI)
    return path


def _binary_rr_at(
    ax: Any, points: Sequence[TradeoffPoint], n: int, dense: Any, dist: str, shade: str
) -> list[Any]:
    """Binary RR's error at N = ``n`` by ε (theory, simulation, the coin-flip star) beside
    central Laplace's, in one shade; returns their legend handles."""
    ax.plot(dense, [PP * v for v in _theory_se(BINARY, 2, n, dense, dist)], color=shade, lw=2.2)
    sim = _rows(points, BINARY, users=n)
    _markers(ax, BINARY, [p.epsilon for p in sim], [p.simulated_rmse for p in sim], color=shade)
    ax.plot(
        dense,
        [PP * central_laplace_std(n, float(e)) for e in dense],
        color=shade,
        ls="--",
        lw=2,
    )
    (cf,) = [p for p in points if p.form == COIN_FLIP and p.users == n]
    _coin_flip_star(ax, cf, shade)
    return [
        Line2D([], [], color=shade, lw=2.2, marker="o", label=f"binary RR, N = {n:,}"),
        Line2D([], [], color=shade, lw=2, ls="--", label=f"central Laplace, N = {n:,}"),
    ]


def _coin_flip_star(ax: Any, cf: TradeoffPoint, shade: str) -> None:
    """The coin-flip design's point, with its 95 % margin and central Laplace's beside."""
    ax.plot(
        [cf.epsilon],
        [PP * cf.theory_se],
        marker="*",
        markersize=18,
        color=shade,
        markeredgecolor="black",
        markeredgewidth=0.8,
        ls="none",
        zorder=4,
    )
    ax.annotate(
        f"95%: ±{_round2(PP * 1.96 * cf.theory_se)} pp\n"
        f"central: ±{_round2(PP * 1.96 * cf.central_laplace_se)} pp",
        xy=(cf.epsilon, PP * cf.theory_se),
        xytext=(14, 6),
        textcoords="offset points",
        fontsize=10.5,
        color=shade,
        va="bottom",
        fontweight="bold",
    )


def _coin_flip_line(ax: Any, coin: BinaryRR) -> None:
    """A dotted line at the seeds' coin-flip ε, labelled."""
    ax.axvline(coin.epsilon, color="0.3", ls=":", lw=1.5, zorder=1)
    ax.text(
        coin.epsilon * 1.04,
        0.02,
        f"seeds' coin flip:\nkeep the truth w.p. 3/4,\nε = ln 3 ≈ {coin.epsilon:.3g}",
        transform=ax.get_xaxis_transform(),
        fontsize=10.5,
        color="0.25",
        va="bottom",
    )


def _flip_probability_axis(ax: Any, xlim: tuple[float, float]) -> None:
    """A top axis naming, at their ε, the flip probabilities p within ``xlim``."""
    top = ax.twiny()
    top.set_xscale("log")
    top.set_xlim(*xlim)
    flips = [(BinaryRR.from_flip_probability(p).epsilon, p) for p in FLIP_PROBABILITIES]
    flips = [(e, p) for e, p in flips if xlim[0] <= e <= xlim[1]]
    top.set_xticks([e for e, _ in flips], [f"{p:g}" for _, p in flips])
    top.xaxis.set_minor_locator(NullLocator())
    top.grid(False)
    top.spines["top"].set_visible(True)
    top.set_xlabel(
        "the same design as a flip probability p   (ε = ln((1 − p)/p))",
        fontsize=11.5,
        labelpad=6,
    )


def plot_users_needed(path: Path, epsilons: Sequence[float]) -> Path:
    """Plot 4: heatmap of the users ``auto``'s mechanism needs for ±1 pp at 95 %, by (ε, k)."""

    domains = HEATMAP_DOMAINS
    needed, names = users_needed_grid(epsilons, domains)
    with _slide_style({"axes.grid": False}):
        fig = _new_figure(10.0, 7.0)
        ax = fig.add_subplot()
        norm = LogNorm(vmin=needed.min(), vmax=needed.max())
        mesh = ax.imshow(needed, norm=norm, cmap="viridis_r", aspect="auto", origin="lower")
        cmap = mesh.get_cmap()
        for i in range(len(domains)):
            for j in range(len(epsilons)):
                r, g, b, _ = cmap(norm(needed[i, j]))
                ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                ax.text(
                    j,
                    i + 0.14,
                    _fmt_users(needed[i, j]),
                    ha="center",
                    va="center",
                    fontsize=9.5,
                    fontweight="bold",
                    color=ink,
                )
                ax.text(j, i - 0.2, names[i][j], ha="center", va="center", fontsize=8.5, color=ink)
        ax.set_xticks(range(len(epsilons)), [f"{e:g}" for e in epsilons])
        ax.set_yticks(range(len(domains)), [f"{k:,}" for k in domains])
        ax.set_xlabel("privacy parameter ε per report")
        ax.set_ylabel("domain size k (number of values)")
        _titles(
            fig,
            ax,
            "Users needed for a ±1 percentage-point 95% interval",
            "mechanism: what auto picks for (ε, k); a frequency near 0; "
            "from aggregator.stats.planning",
        )
        bar = fig.colorbar(mesh, ax=ax, pad=0.02)
        bar.set_label("users N (log scale)")
        fig.savefig(path, dpi=DPI)
    return path


# -- privacy lessons: the reconstruction attack, amplification by shuffling ------------------

KIND_STYLES: dict[str, dict[str, Any]] = {
    "exact": {"color": "#d62728", "marker": "*", "markersize": 16},
    "bounded": {"color": "#1f77b4", "marker": "o", "markersize": 7},
    "laplace": {"color": "#222222", "marker": "s", "markersize": 8},
    "ldp": {"color": "#2ca02c", "marker": "D", "markersize": 8},
}
"""One style per protection of the reconstruction plot."""


def plot_reconstruction(result: Any, path: Path) -> Path:
    """Fraction of secret bits recovered against the answers' noise, with √n and the LDP
    bounds marked (a :class:`~aggregator.analysis.reconstruction.ReconstructionResult`)."""
    n, points = result.users, result.points
    floor = 0.3  # where exact answers (noise 0) sit on the log axis
    with _slide_style():
        fig = _new_figure(12.0, 6.6)
        ax = fig.add_subplot()
        labels = {
            "exact": "exact answers (plotted at noise 0.3)",
            "bounded": "noise bounded by E (uniform in ±E)",
            "laplace": "central Laplace, ε per answer (m answers compose to m·ε)",
            "ldp": "local DP: ε-randomized bits, debiased sums",
        }
        for kind in KIND_STYLES:
            rows = [p for p in points if p.kind == kind]
            if rows:
                _recovered_by(ax, kind, rows, labels[kind], floor)
        ax.axvline(math.sqrt(n), color="0.4", ls="--", lw=1.5)
        ax.text(math.sqrt(n) * 1.05, 0.47, "√n", color="0.3", fontsize=12)
        ax.axhline(0.5, color="0.6", ls=":", lw=1.5)
        ax.plot(
            [],
            [],
            color=KIND_STYLES["ldp"]["color"],
            lw=2.5,
            alpha=0.5,
            label="LDP bound e^ε/(e^ε+1): what one report reveals",
        )
        ax.set_xscale("log")
        ax.set_ylim(0.4, 1.02)
        ax.set_xlabel("noise of one answer (standard deviation; log scale)")
        ax.set_ylabel("fraction of the n secret bits recovered")
        _titles(
            fig,
            ax,
            "Exact or lightly-noised answers give the data back; LDP caps what leaks",
            f"n = {n} secret bits, m = {result.queries} random subset-sum queries, L1 decoding"
            f" (linear program) rounded at ½\n{result.trials} databases per point (±1.96 se);"
            " simulation: numpy PCG64",
        )
        ax.legend(loc="lower left", framealpha=0.95)
        fig.savefig(path)
    return path


def _recovered_by(ax: Any, kind: str, rows: Sequence[Any], label: str, floor: float) -> None:
    """One protection's fraction recovered against noise (±1.96 se; noise 0 drawn at
    ``floor``), each ε written beside its point and LDP's per-report bound marked."""
    style = KIND_STYLES[kind]
    x = [max(p.noise_std, floor) for p in rows]
    ax.errorbar(
        x,
        [p.recovered for p in rows],
        yerr=[1.96 * p.recovered_se for p in rows],
        ls="-" if kind == "bounded" else "none",
        lw=1.5,
        capsize=3,
        label=label,
        **style,
    )
    for p, xi in zip(rows, x, strict=True):
        if kind in ("laplace", "ldp"):
            ax.annotate(
                f"ε={p.level:g}",
                (xi, p.recovered),
                textcoords="offset points",
                xytext=(6, -12),
                fontsize=9,
                color=style["color"],
            )
        if kind == "ldp" and p.bound is not None:
            ax.hlines(p.bound, xi / 1.6, xi * 1.6, color=style["color"], lw=2.5, alpha=0.5)


def plot_shuffled_epsilon(
    path: Path,
    epsilons: Sequence[float],
    users: Sequence[int],
    progress: Callable[[int], None] | None = None,
) -> Path:
    """ε_c (δ = 1/n²) of n shuffled ε₀-LDP reports against n, one line per ε₀ (Feldman,
    McMillan & Talwar's numerical bound, :mod:`aggregator.stats.shuffling`).

    ``progress`` is called with 1 after each line: the bound is computed numerically at
    25 values of n per line, seconds in all (``ldp tradeoff``'s bar follows it)."""
    grid = np.unique(np.geomspace(min(users), max(users), 25).astype(int))
    with _slide_style():
        fig = _new_figure(12.0, 6.6)
        ax = fig.add_subplot()
        for i, eps0 in enumerate(epsilons):
            color = list(COLORS.values())[i % len(COLORS)]
            values = [shuffled_epsilon(eps0, int(n), 1.0 / float(n) ** 2) for n in grid]
            ax.plot(grid, values, color=color, lw=2, label=f"ε₀ = {eps0:g} per report")
            ax.axhline(eps0, color=color, ls=":", lw=1)
            if progress:
                progress(1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n, reports shuffled together (one per device)")
        ax.set_ylabel("central ε of the shuffled release (δ = 1/n²)")
        _titles(
            fig,
            ax,
            "Seen only through the estimates, n reports at ε₀ are (ε_c, δ)-DP with ε_c ≪ ε₀",
            "Feldman, McMillan & Talwar's numerical bound (FOCS 2021); dotted: ε₀ itself. "
            "The server and Redis still see each report at ε₀",
        )
        _legend(ax, ax.get_legend_handles_labels()[0])
        fig.savefig(path)
    return path


def plot_latency_quantiles(rows: Sequence[dict[str, Any]], path: Path, setting: str) -> Path:
    """A latency sample's p50 and p95 estimates with their intervals against the truth,
    one panel per quantile, a group per ε and a point per n (the distributions benchmark,
    ``rows``: ``epsilon``, ``n``, ``p``, ``truth``, ``value``, ``ci_low``, ``ci_high``)."""
    quantiles = sorted({r["p"] for r in rows})
    epsilons = sorted({r["epsilon"] for r in rows})
    sizes = sorted({r["n"] for r in rows})
    with _slide_style():
        fig = _new_figure(12.0, 5.6)
        axes = fig.subplots(1, len(quantiles))
        for ax, p in zip(np.atleast_1d(axes), quantiles, strict=True):
            _quantile_panel(ax, [r for r in rows if r["p"] == p], p, epsilons, sizes)
        fig.suptitle(setting, fontsize=12)
        fig.savefig(path)
    return path


def _quantile_panel(
    ax: Any, rows: Sequence[dict[str, Any]], p: float, epsilons: list[Any], sizes: list[Any]
) -> None:
    """The quantile ``p``'s panel: a group per ε, a point per n, the truth a black bar."""
    for i, eps in enumerate(epsilons):
        for j, n in enumerate(sizes):
            (r,) = [x for x in rows if (x["epsilon"], x["n"]) == (eps, n)]
            x = i + (j - (len(sizes) - 1) / 2) * 0.28
            color = list(COLORS.values())[j % len(COLORS)]
            low, high = r["value"] - r["ci_low"], r["ci_high"] - r["value"]
            ax.errorbar(
                [x], [r["value"]], yerr=[[low], [high]], fmt="o", color=color,
                capsize=5, lw=2, label=f"n = {n:,}" if i == 0 else None,
            )  # fmt: skip
            ax.plot([x - 0.12, x + 0.12], [r["truth"]] * 2, color="0.15", lw=2.5)
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_xticks(range(len(epsilons)), [f"ε = {e:g}" for e in epsilons])
    ax.set_xlim(-0.6, len(epsilons) - 0.4)
    ax.set_ylabel("seconds")
    ax.set_title(f"p{100 * p:g}: estimate and 95 % interval (black: the truth)")
    ax.legend(loc="upper right", fontsize=10)


def run_tradeoff(
    out_dir: str | Path,
    domain_size: int = 64,
    reps: int = 20,
    seed: int = 2017,
    progress: Callable[[int], None] | None = None,
    *,
    epsilons: Sequence[float] = tradeoff.EPSILONS,
    users: Sequence[int] = tradeoff.USERS,
    dist: str = "zipf",
) -> list[Path]:
    """Run the sweep and write ``tradeoff.csv`` and the five PNG plots into ``out_dir``
    (the fifth: ε_c of shuffled reports against N, :mod:`aggregator.stats.shuffling`).

    Args:
        out_dir: output folder (created if missing).
        domain_size: k of the k-ary mechanisms.
        reps: simulated populations per point.
        seed: master seed of the simulation (numpy; reproducible).
        progress: called with the number of steps just finished (1 after each sweep
            point, each file written and each line of the shuffled-ε plot); the first
            :func:`~aggregator.analysis.tradeoff.total_points` are the sweep's, and the sum reaches
            :func:`~aggregator.analysis.tradeoff.total_steps` of the grids when the last file
            is written.
        epsilons: ε grid (sorted; the plots use the swept ε nearest to 1).
        users: N grid (the error-vs-ε plot uses the swept N nearest to 10⁵).
        dist: population distribution.

    Returns:
        The files written: the CSV first, then the PNGs.

    Raises:
        ValueError: a parameter out of range.
    """
    if not epsilons or not users:
        raise ValueError("epsilons and users must not be empty")
    epsilons = sorted(float(e) for e in epsilons)
    users = sorted(int(n) for n in users)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    points = tradeoff.sweep(
        domain_size, reps, seed, epsilons=epsilons, users=users, dist=dist, progress=progress
    )
    # The sweep's ε are the SDK's floats; look the slide's ε up among them.
    swept_eps = sorted({p.epsilon for p in points if p.mechanism in MECHANISMS})
    users_at = int(nearest(users, tradeoff.SLIDE_USERS))
    eps_at = nearest(swept_eps, tradeoff.SLIDE_EPSILON)

    step = progress or (lambda n: None)
    written = [tradeoff.write_csv(points, out / "tradeoff.csv")]
    step(1)
    for draw in (
        lambda: plot_error_vs_epsilon(points, out / "error_vs_epsilon.png", domain_size, users_at),
        lambda: plot_error_vs_users(points, out / "error_vs_users.png", domain_size, eps_at),
        lambda: plot_binary_rr(points, out / "binary_rr_vs_central.png"),
        lambda: plot_users_needed(out / "users_needed.png", epsilons),
        lambda: plot_shuffled_epsilon(  # a step per line: its slow part
            out / "shuffled_epsilon.png", tradeoff.SHUFFLED_EPSILONS, users, progress=step
        ),
    ):
        written.append(draw())
        step(1)
    return written
