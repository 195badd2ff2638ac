"""The JavaScript SDK's own tests (client_js/test, Node's built-in runner), run from pytest
so that they count in the suite's summary and fail the test command when one fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CLIENT_JS = Path(__file__).resolve().parent.parent / "client_js"
NODE = shutil.which("node")

TEST_FILES = sorted(p.name for p in (CLIENT_JS / "test").glob("*.test.js"))


def _node_major() -> int:
    if NODE is None:
        return 0
    out = subprocess.run([NODE, "--version"], capture_output=True, text=True, check=False).stdout
    return int(out.strip().lstrip("v").split(".")[0] or 0)


pytestmark = pytest.mark.skipif(
    _node_major() < 20, reason="Node 20 or later is not installed (node --test, Web Crypto)"
)


def test_the_js_tests_are_found() -> None:
    assert {
        "conformance.test.js",
        "distribution.test.js",
        "client.test.js",
        "ohttp.test.js",
        "random.test.js",
    } <= set(TEST_FILES)


@pytest.mark.parametrize("name", TEST_FILES)
def test_js_sdk(name: str) -> None:
    assert NODE is not None
    # A generous deadline: the machine may be shared; the tests take seconds when idle.
    result = subprocess.run(
        [NODE, "--test", "--test-reporter=tap", f"test/{name}"],
        cwd=CLIENT_JS,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    failed = [line for line in result.stdout.splitlines() if line.startswith("not ok")]
    # what a run drew (random.test.js: its seed and how many definitions it compared)
    for line in result.stdout.splitlines():
        if line.startswith(("# random", "# compared")):
            print(line)
    assert result.returncode == 0, (
        f"node --test test/{name} failed: {failed}\n"
        + result.stdout[-6000:]
        + result.stderr[-2000:]
    )


def test_the_sdk_type_checks_and_its_declarations_match_the_code() -> None:
    """``tsc`` (pinned in client_js/package.json) checks the sources' JSDoc strictly
    (``--checkJs --noEmit``, client_js/tsconfig.json) and that index.d.ts and ohttp.d.ts,
    what an app's TypeScript sees, declare exactly what the code exports, with types the
    code satisfies (client_js/test/declarations.ts)."""
    tsc = CLIENT_JS / "node_modules" / ".bin" / "tsc"
    if not tsc.exists():
        pytest.skip("needs `npm ci` in client_js/ (python3 tasks.py test runs it)")
    result = subprocess.run(
        [str(tsc), "-p", "."], cwd=CLIENT_JS, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
