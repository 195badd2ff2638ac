"""The order tests/conftest.py gives the suite under ``tasks.py test`` (xdist, work
stealing): each worker's first run of tests starts with its share of the slow modules.

xdist's work stealing sends each worker a run of consecutive tests, then moves tests from
the end of a busy worker's run to an idle one. The old order put every slow module first,
so all of them went to the first worker, one after another, while the other two ran the
quick tests and then waited for it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent


def suite_conftest() -> ModuleType:
    """tests/conftest.py, loaded as a module of its own (pytest's copy is a plugin)."""
    spec = importlib.util.spec_from_file_location("suite_conftest", HERE / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Item:
    nodeid: str


def collection(conftest: ModuleType) -> list[Item]:
    """A suite's items: three tests of each slow module among 3,000 quick ones."""
    items = [Item(f"tests/test_quick_{i // 10}.py::test_{i}") for i in range(3_000)]
    for n, module in enumerate(conftest.SLOW_FIRST):
        for t in range(3):
            items.insert(97 * n + 31 * t, Item(f"{module}::test_{t}"))
    return items


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_each_worker_starts_with_a_fair_share_of_the_slow_modules(workers: int) -> None:
    conftest = suite_conftest()
    slow, split = conftest.SLOW_FIRST, conftest.SPLIT
    items = collection(conftest)
    dealt = conftest._dealt(items, workers)
    assert sorted(i.nodeid for i in dealt) == sorted(i.nodeid for i in items)  # all, once

    def module(item: Item) -> str:
        return item.nodeid.split("::")[0]

    def cost(item: Item) -> float:  # three tests a module
        return slow[module(item)] / 3 if module(item) in slow else 0.0

    start, seconds, holder = 0, [], {}
    for size in conftest._chunks(len(items), workers):
        run = dealt[start : start + size]
        start += size
        flags = [module(i) in slow for i in run]
        assert flags == sorted(flags, reverse=True), "a quick test before a slow one"
        seconds.append(sum(cost(i) for i in run))
        for i in run:
            if module(i) in slow and module(i) not in split:  # a module stays together
                assert holder.setdefault(module(i), len(seconds)) == len(seconds), module(i)
    assert sum(seconds) == pytest.approx(sum(slow.values()))
    # Greedy (the slowest first, to the least loaded): within one module of each other.
    largest = max(s if m not in split else s / 3 for m, s in slow.items())
    assert max(seconds) - min(seconds) <= largest


def test_the_sizes_are_those_xdist_sends_first() -> None:
    assert suite_conftest()._chunks(3_565, 3) == [1_188, 1_188, 1_189]


def test_only_a_work_stealing_run_is_dealt() -> None:
    stealing = suite_conftest()._work_stealing
    assert stealing(["pytest", "-n", "3", "--dist", "worksteal", "--durations=15"])
    assert stealing(["pytest", "-n", "3", "--dist=worksteal"])
    assert not stealing(["pytest", "-n", "3", "--dist", "load"])
    assert not stealing(["pytest", "-n", "3"])


def test_the_slow_modules_exist_and_the_split_ones_share_no_module_fixture() -> None:
    conftest = suite_conftest()
    root = HERE.parent
    for path in conftest.SLOW_FIRST:
        assert (root / path).is_file(), f"{path} is gone: update tests/conftest.py"
    for path in conftest.SPLIT:
        assert path in conftest.SLOW_FIRST
        text = (root / path).read_text()
        assert 'scope="module"' not in text and 'scope="class"' not in text, path
        assert not path.startswith("tests/browser/")  # their browser is module-scoped
