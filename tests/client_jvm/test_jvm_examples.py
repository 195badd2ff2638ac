"""Every Java and Kotlin block of the README and the documentation, compiled against the
JVM SDK's jar and run (those with a ``main``) against a real ``ldp serve``.

tests/test_doc_examples.py runs the shell and Python blocks; these are its JVM half. A
block is a whole source file, so it works as pasted; ``127.0.0.1:8000`` and
``localhost:8000`` become the test server's address. The server has the README's metric
(``app.theme``: light, dark, auto at ε = 1). A block that cannot run says why in a
``<!-- not-run: … -->`` comment right before it, as there. Kotlin is compiled by Debian's
``kotlinc`` (1.3.31) when it is installed; without it the Kotlin blocks skip and say why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from jvm_helpers import ROOT, built

from ldp_server.serve import Server
from tests.http_helpers import call as api

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<lang>java|kotlin)\s*$")
MARK = re.compile(r"^\s*<!--\s*not-run\b:?(?P<reason>.*?)-->\s*$")
PORT = re.compile(r"(localhost|127\.0\.0\.1):8000\b")
KOTLINC = shutil.which("kotlinc")
KOTLIN_STDLIB = [
    Path("/usr/share/java/kotlin-stdlib.jar"),
    Path("/usr/share/java/kotlin-stdlib-jdk7.jar"),
]


def blocks(lang: str) -> list[tuple[str, str]]:
    """(where, source) of every runnable ``lang`` block."""
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            opened = FENCE.match(lines[i])
            if opened and opened["lang"] == lang:
                end = next(
                    j for j in range(i + 1, len(lines)) if lines[j].strip() == opened["fence"]
                )
                before = next((x for x in reversed(lines[:i]) if x.strip()), "")
                if not MARK.match(before):
                    where = f"{page.relative_to(ROOT)}:{i + 1}"
                    found.append((where, "\n".join(lines[i + 1 : end]) + "\n"))
                i = end
            i += 1
    return found


def test_the_readme_shows_java_and_kotlin() -> None:
    readme = {w.split(":")[0] for lang in ("java", "kotlin") for w, _ in blocks(lang)}
    assert "README.md" in readme
    assert len(blocks("java")) >= 3 and len(blocks("kotlin")) >= 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("LDP_ADMIN_TOKEN", raising=False)
        data = tmp_path_factory.mktemp("jvm-examples")
        with Server(port=0, data_dir=data, web_workers=1, aggregators=1, quiet=True) as s:
            spec = {"domain": ["light", "dark", "auto"], "epsilon": 1.0}
            api(f"{s.url}/v1/metrics/app.theme", "PUT", spec, s.admin_token)
            yield s


def _sources(lang: str, server: Server) -> list[tuple[str, str]]:
    address = server.url.removeprefix("http://")
    return [(where, PORT.sub(address, text)) for where, text in blocks(lang)]


def _run(cmd: list[str], cwd: Path, where: str) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, (
        f"{where}: {' '.join(cmd[:2])} … failed:\n{done.stdout}{done.stderr}"
    )
    return done.stdout


def _check_output(where: str, text: str, out: str) -> None:
    """An example that flushes prints flush()'s answer first: everything delivered."""
    if "flush(" in text:
        assert out.split()[0] == "true", f"{where}: {out}"


def test_the_java_examples_compile_and_run(server: Server, tmp_path: Path) -> None:
    build = built()
    sources = _sources("java", server)
    files = []
    for where, text in sources:
        name = re.search(r"public\s+(?:final\s+)?class\s+(\w+)", text)
        assert name, f"{where}: a Java block is a whole file with a public class"
        path = tmp_path / f"{name[1]}.java"
        assert not path.exists(), f"{where}: two blocks name the class {name[1]}"
        path.write_text(text)
        files.append((where, name[1], text))
    javac, java = build.jdk_tool("javac"), build.jdk_tool("java")
    _run(
        [javac, "-cp", str(build.JAR), "-d", str(tmp_path), *(f"{n}.java" for _, n, _ in files)],
        tmp_path,
        "javac",
    )
    for where, name, text in files:
        if "static void main(" in text:
            out = _run([java, "-cp", f"{tmp_path}:{build.JAR}", name], tmp_path, where)
            _check_output(where, text, out)


@pytest.mark.skipif(KOTLINC is None, reason="Debian's kotlin (kotlinc) is not installed")
def test_the_kotlin_examples_compile_and_run(server: Server, tmp_path: Path) -> None:
    build = built()
    assert KOTLINC is not None
    files = []
    for n, (where, text) in enumerate(_sources("kotlin", server)):
        path = tmp_path / f"Example{n}.kt"
        path.write_text(text)
        files.append((where, f"Example{n}Kt", text))
    out_jar = tmp_path / "examples.jar"
    _run(
        [
            KOTLINC,
            "-cp",
            str(build.JAR),
            "-d",
            str(out_jar),
            *(f"Example{n}.kt" for n in range(len(files))),
        ],
        tmp_path,
        "kotlinc",
    )
    classpath = ":".join(str(p) for p in [out_jar, build.JAR, *KOTLIN_STDLIB])
    for where, main, text in files:
        if "fun main(" in text:
            out = _run([build.jdk_tool("java"), "-cp", classpath, main], tmp_path, where)
            _check_output(where, text, out)
