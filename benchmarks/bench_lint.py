"""``ldp lint`` of a 200-metric registry: the goal is under a second.

    .venv/bin/python benchmarks/bench_lint.py [--metrics 200] [--repeats 7]

The registry mixes what apps declare: categorical metrics of 4 to 256 values (a fifth of
them memoized), numeric, distribution, string and joint metrics, each with governance
fields and a budget, and an app budget with a δ (advanced composition computed too). It
prints the median of ``--repeats`` runs of each stage — reading the TOML alone (tomllib,
the yardstick), reading the registry (every spec resolved as the server would), linting
(rules and the privacy account) — and the ``ldp lint`` command end to end in a fresh
process (interpreter start included) beside ``ldp --version`` (the start alone), with the load
average at start and end. Figures:
``docs/benchmarks/performance.md#lint``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aggregator.catalog.lint import lint  # noqa: E402
from aggregator.catalog.registry_file import read_registry  # noqa: E402

TODAY = date(2026, 12, 2)

HEAD = """[app]
name = "bench"
[app.budget]
epsilon_per_day = 1000.0
epsilon_per_period = 5000.0
period = "week"
epsilon_lifetime = 100000.0
delta = 1e-9
"""

GOVERNANCE = """description = "A benchmark metric."
owners = ["bench@example.org"]
data_review = "https://example.org/reviews/1"
expires = 2027-06-30
"""


def metric(i: int) -> str:
    """The i-th metric's table: kinds in turn."""
    head = f'[metrics."bench.m{i:03d}"]\n'
    budget = 'budget = { reports_per_period = 1, period = "day" }\n'
    kind = i % 10
    if kind < 6:
        k = (4, 16, 64, 256)[i % 4]
        values = ", ".join(f'"v{j}"' for j in range(k))
        memo = "longitudinal = { permanent_epsilon = 4.0 }\n" if kind == 5 else ""
        return f"{head}domain = [{values}]\nepsilon = 1.0\n{memo}{budget}{GOVERNANCE}"
    if kind == 6:
        return f'{head}kind = "numeric"\nrange = [0, 100]\nepsilon = 1.0\n{budget}{GOVERNANCE}'
    if kind == 7:
        return (
            f'{head}kind = "numeric"\nrange = [0, 1000]\nepsilon = 2.0\n'
            f"distribution = {{ bins = 256 }}\n{budget}{GOVERNANCE}"
        )
    if kind == 8:
        return f'{head}kind = "string"\nmax_length = 16\nepsilon = 4.0\n{budget}{GOVERNANCE}'
    return (
        f'{head}kind = "joint"\nattributes = [{{ name = "os", domain = ["a", "b", "c"] }}, '
        f'{{ name = "tier", domain = ["x", "y"] }}]\nepsilon = 2.0\n{budget}{GOVERNANCE}'
    )


def median_seconds(run: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "metrics.toml"
        path.write_text(HEAD + "\n".join(metric(i) for i in range(args.metrics)))
        text = path.read_text()
        reg = read_registry(path)
        result = lint(reg, TODAY)
        assert not result.failed(), [str(f) for f in result.findings][:5]
        toml = median_seconds(lambda: tomllib.loads(text), args.repeats)
        read = median_seconds(lambda: read_registry(path), args.repeats)
        check = median_seconds(lambda: lint(reg, TODAY), args.repeats)
        ldp = Path(sys.executable).with_name("ldp")
        cli = median_seconds(
            lambda: subprocess.run(
                [str(ldp), "lint", str(path), "--today", TODAY.isoformat(), "-q"],
                check=True,
                capture_output=True,
            ),
            max(3, args.repeats // 2),
        )
        boot = median_seconds(
            lambda: subprocess.run([str(ldp), "--version"], check=True, capture_output=True),
            max(3, args.repeats // 2),
        )
    size = len(text.encode())
    print(f"{args.metrics} metrics, {size / 1024:.0f} KiB of TOML, medians of {args.repeats}:")
    print(f"  tomllib.loads alone (yardstick)   {toml * 1000:8.1f} ms   1.0×")
    print(f"  read registry (specs resolved)    {read * 1000:8.1f} ms   {read / toml:.1f}×")
    print(f"  lint (rules + privacy account)    {check * 1000:8.1f} ms   {check / toml:.1f}×")
    total = read + check
    print(f"  read + lint in process            {total * 1000:8.1f} ms   {total / toml:.1f}×")
    print(f"  `ldp lint` end to end (new proc)  {cli * 1000:8.1f} ms   {cli / toml:.1f}×")
    print(f"  `ldp --version` (start-up alone)  {boot * 1000:8.1f} ms   {boot / toml:.1f}×")
    print(f"goal: under 1 s in process: {'met' if total < 1 else 'MISSED'}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
