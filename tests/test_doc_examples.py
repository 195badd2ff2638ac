"""The README's and the documentation's examples, run as written (issue 36, item 5).

Every fenced ``console``/``bash``/``sh``/``shell`` and ``python`` block of ``README.md``
and ``docs/**/*.md`` runs, page by page, in its order, in one bash script in a fresh
folder (a ``python`` block as ``python3 <file>`` at its place, so a shell block's
``export`` reaches the blocks after it). A block that cannot run in a test says why in the
Markdown, on the line right before it::

    <!-- not-run: the 100,000-user demo serves until Ctrl-C -->

What the harness adds, and nothing else:

* a real server on a free port: the examples' ``localhost:8000``, ``127.0.0.1:8000`` and
  ``--port 8000`` are rewritten to it, and ``LDP_URL`` (the CLI's default URL) points at
  it. A page whose blocks run ``ldp serve`` starts its own (the README); the others that
  talk to a server share one the harness runs (the one ``ldp serve`` runs; its data
  folder is the page's ``./ldp-data``), and get its ``LDP_ADMIN_TOKEN`` exported, the
  precondition the docs state. Shared, because a start costs seconds; the pages' metrics
  have names of their own;
* the project's environment: ``.venv`` in the folder is the one running the tests, and
  its ``bin`` leads ``PATH`` (``ldp``, ``python3``);
* ``set -e -o pipefail``, and ``curl`` with ``--fail-with-body``: an HTTP error (a 415
  for a body without ``Content-Type``) fails the page as an exit status would. Background
  jobs (``ldp serve &``) get SIGTERM when the script ends.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ldp_server.serve import Server
from ldp_store.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELL = frozenset({"console", "bash", "sh", "shell"})
PYTHON = frozenset({"python", "py"})
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
MARK = re.compile(r"^\s*<!--\s*not-run\b:?(?P<reason>.*?)-->\s*$")
PORT = re.compile(r"(localhost:|127\.0\.0\.1:|--port[ =])8000\b")
NEEDS_SERVER = re.compile(
    r"localhost:8000|127\.0\.0\.1:8000|LDP_ADMIN_TOKEN|ldp-data|ldp (metrics|estimates|export)"
)
OWN_SERVER = re.compile(r"^\s*ldp serve\b", re.MULTILINE)

PAGE_TIMEOUT = 600.0
"""A page that has not finished by then is stuck (a server that never answers): stop it
rather than hang the suite. Not a speed limit: a page takes a few seconds."""


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where, its language, its text, why it does not run."""

    page: Path
    line: int
    lang: str
    text: str
    skip: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The shell and Python blocks of ``page``, each with its not-run reason (None: runs).

    Raises:
        AssertionError: a not-run mark without a reason, or one that no block follows.
    """
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            mark = MARK.match(lines[i])
            following = next((x for x in lines[i + 1 :] if x.strip()), "")
            assert mark is None or FENCE.match(following), (
                f"{page.relative_to(ROOT)}:{i + 1}: a not-run mark must come right before a "
                "fenced block"
            )
            i += 1
            continue
        indent, fence = opened["indent"], opened["fence"]
        lang = (opened["info"].split() or [""])[0].lower()
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence) and not lines[end].strip().strip(fence[0])
        ):
            end += 1
        body = "\n".join(
            x[len(indent) :] if x.startswith(indent) else x for x in lines[i + 1 : end]
        )
        if lang in SHELL | PYTHON:
            before = next((x for x in reversed(lines[:i]) if x.strip()), "")
            mark = MARK.match(before)
            skip = None
            if mark:
                skip = mark["reason"].strip()
                assert skip, f"{page.relative_to(ROOT)}:{i + 1}: say why the block does not run"
            found.append(Block(page, i + 1, lang, body + "\n", skip))
        i = end + 1
    return found


def runnable_pages() -> list[Path]:
    return [p for p in PAGES if any(b.skip is None for b in blocks(p))]


PRELUDE = """set -e -o pipefail
trap 'status=$?; pids=$(jobs -p); [ -z "$pids" ] || kill $pids 2>/dev/null; wait; exit $status' EXIT
curl() { command curl --fail-with-body "$@"; }
"""


def script(page_blocks: list[Block], port: int, folder: Path) -> str:
    """The page's runnable blocks as one bash script (Python blocks written beside it)."""
    parts = [PRELUDE]
    for n, block in enumerate(b for b in page_blocks if b.skip is None):
        text = PORT.sub(lambda m: m.group(1) + str(port), block.text)
        parts.append(f"echo '### {block.where} ({block.lang})'")
        if block.lang in PYTHON:
            source = folder / f"block-{n}.py"
            source.write_text(text)
            parts.append(f"python3 {source.name}")
        else:
            parts.append(text)
    return "\n".join(parts) + "\n"


def environment(port: int, token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_") and k != "REDIS_URL"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["LDP_URL"] = f"http://127.0.0.1:{port}"
    if token is not None:
        env["LDP_ADMIN_TOKEN"] = token
    return env


def run(folder: Path, text: str, env: dict[str, str]) -> tuple[int, str]:
    """Run the script in its own process group; its output (to a file: a background
    server must not hold a pipe open) and its exit status."""
    (folder / "examples.sh").write_text(text)
    log = folder / "examples.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "examples.sh"],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=PAGE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            code = proc.wait()
    return code, log.read_text(errors="replace")


@pytest.fixture(scope="session")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The server the pages without one of their own talk to (one per test process)."""
    data = tmp_path_factory.mktemp("docs-server") / "ldp-data"
    with pytest.MonkeyPatch.context() as env:
        env.delenv("LDP_ADMIN_TOKEN", raising=False)  # it writes its own, as ldp serve does
        server = Server(port=0, data_dir=data, web_workers=1, quiet=True)
    with server:
        yield server


@pytest.mark.parametrize("page", runnable_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_of_the_page_run_as_written(
    page: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    page_blocks = blocks(page)
    runnable = [b for b in page_blocks if b.skip is None]
    shell = "".join(b.text for b in runnable if b.lang in SHELL)
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)  # README: activate
    port, token = free_port(), None
    if OWN_SERVER.search(shell) is None and any(NEEDS_SERVER.search(b.text) for b in runnable):
        server: Server = request.getfixturevalue("docs_server")
        port, token = server.port, server.admin_token
        (tmp_path / "ldp-data").symlink_to(server.data_dir, target_is_directory=True)
    code, output = run(tmp_path, script(page_blocks, port, tmp_path), environment(port, token))
    assert code == 0, f"the examples of {page.relative_to(ROOT)} failed (exit {code}):\n{output}"


def test_the_readme_example_runs_and_every_skip_is_said() -> None:
    """The README's example (serve, define, report, read) is run, not marked away; every
    page parses (a not-run mark has its reason and its block)."""
    readme = [b for b in blocks(ROOT / "README.md") if b.skip is None]
    assert [b.lang for b in readme] == ["console", "python", "console"]
    assert "ldp serve" in readme[0].text and "Client(" in readme[1].text
    every = [b for page in PAGES for b in blocks(page)]
    assert sum(b.skip is None for b in every) >= 10
