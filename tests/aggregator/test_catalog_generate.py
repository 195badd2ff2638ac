"""``ldp generate``: the typed APIs type-check a right use and reject a value outside the
domain, with the real checkers (mypy, tsc, javac); the Python API reports through the SDK."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from aggregator.catalog.generate import constant, generate, snake
from aggregator.catalog.registry_file import read_registry
from ldp_server.cli import main

ROOT = Path(__file__).resolve().parents[2]
CLIENT_JS = ROOT / "client_js"

REGISTRY = """[app]
name = "notes"
[app.budget]
epsilon_per_day = 8.0

[metrics."notes.theme"]
domain = ["light", "dark", "high-contrast"]
epsilon = 1.0
budget = { reports_per_period = 1, period = "day" }
description = "The colour theme."
owners = ["ana@example.org"]
data_review = "https://example.org/r/1"
expires = 2099-01-01

[metrics."notes.size"]
kind = "numeric"
range = [0, 100]
epsilon = 1.0
budget = { reports_per_period = 1, period = "day" }
expires = 2000-01-01
dimensions = [{ name = "platform", values = ["web", "app"] }]

[metrics."notes.pair"]
kind = "joint"
attributes = [
    { name = "os", domain = ["ios", "android"] },
    { name = "tier", domain = ["free", "paid"] },
]
epsilon = 2.0
budget = { reports_per_period = 1, period = "week" }
"""


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    path = tmp_path / "metrics.toml"
    path.write_text(REGISTRY)
    return path


def generated(registry: Path, language: str, out: Path) -> None:
    result = CliRunner().invoke(main, ["generate", language, str(registry), "-o", str(out)])
    assert result.exit_code == 0, result.output


def test_identifiers() -> None:
    assert snake("app.theme") == "app_theme" and snake("class") == "class_"
    assert constant("high-contrast") == "HIGH_CONTRAST" and constant("5.10") == "V5_10"


def test_two_names_one_identifier_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    table = '\ndomain = ["x", "y"]\nepsilon = 1.0\n'
    path.write_text(f'[metrics."a.b"]{table}[metrics."a_b"]{table}')
    with pytest.raises(ValueError, match="both become 'a_b'"):
        generate("python", read_registry(path), "m.toml")
    result = CliRunner().invoke(main, ["generate", "python", str(path), "-o", str(tmp_path)])
    assert result.exit_code == 1 and "rename one" in result.output


def mypy(folder: Path, uses: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One mypy run (it is slow to start) over several uses of the generated module."""
    for name, code in uses.items():
        (folder / name).write_text(code)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental"]
        + [*uses, "notes_metrics.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MYPYPATH": str(ROOT)},  # the SDK as the app sees it (py.typed)
    )


RIGHT_PY = """from client_sdk import Client
from notes_metrics import Metrics

metrics = Metrics(Client("http://127.0.0.1:9", definitions="metrics.toml"))
assert metrics.notes_theme("high-contrast")
assert not metrics.notes_size(42.0, {"platform": "web"})  # expired in 2000: not reported
assert metrics.notes_pair({"os": "ios", "tier": "paid"})
"""


def test_python_api_type_checks_and_reports(registry: Path, tmp_path: Path) -> None:
    out = tmp_path / "gen"
    generated(registry, "python", out)
    (out / "metrics.toml").write_text(REGISTRY)
    right = mypy(out, {"use.py": RIGHT_PY})
    assert right.returncode == 0, right.stdout
    ran = subprocess.run(
        [sys.executable, "use.py"], cwd=out, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    uses = {
        "purple.py": RIGHT_PY.replace('"high-contrast"', '"purple"'),
        "gold.py": RIGHT_PY.replace('"tier": "paid"', '"tier": "gold"'),
    }
    wrong = mypy(out, uses)
    assert wrong.returncode == 1
    errors = [line for line in wrong.stdout.splitlines() if ": error:" in line]
    assert {line.split(":")[0] for line in errors} == set(uses), wrong.stdout
    assert any('Argument 1 to "notes_theme"' in line for line in errors)


def tsc(folder: Path, uses: dict[str, str]) -> subprocess.CompletedProcess[str]:
    tool = CLIENT_JS / "node_modules" / ".bin" / "tsc"
    if not tool.exists():
        pytest.skip("needs `npm ci` in client_js/ (python3 tasks.py test runs it)")
    for name, code in uses.items():
        (folder / name).write_text(code)
    config = {
        "compilerOptions": {
            "strict": True,
            "noEmit": True,
            "target": "es2022",
            "module": "esnext",
            "moduleResolution": "bundler",
            "lib": ["es2022", "dom"],
            "types": [],
            "paths": {"ldp-telemetry-client": [str(CLIENT_JS / "index.d.ts")]},
        },
        "files": [*uses, "notes_metrics.ts"],
    }
    (folder / "tsconfig.json").write_text(json.dumps(config))
    return subprocess.run(
        [str(tool), "-p", "."], cwd=folder, capture_output=True, text=True, timeout=300
    )


RIGHT_TS = """import { Client } from "ldp-telemetry-client";
import { Metrics } from "./notes_metrics";

const metrics = new Metrics(new Client("https://telemetry.example.org"));
export const sent: Promise<boolean>[] = [
  metrics.notesTheme("high-contrast"),
  metrics.notesSize(42, { platform: "web" }),
  metrics.notesPair({ os: "ios", tier: "paid" }),
];
"""


def test_typescript_api_type_checks(registry: Path, tmp_path: Path) -> None:
    """One tsc run: the right use compiles, the wrong one fails, and only it."""
    generated(registry, "ts", tmp_path)
    wrong = RIGHT_TS.replace('"high-contrast"', '"purple"')
    checked = tsc(tmp_path, {"right.ts": RIGHT_TS, "wrong.ts": wrong})
    assert checked.returncode != 0
    errors = [line for line in checked.stdout.splitlines() if "error TS" in line]
    assert errors and all(line.startswith("wrong.ts(") for line in errors), checked.stdout
    assert "purple" in checked.stdout


RIGHT_JAVA = """import ldp.generated.NotesMetrics;
import java.util.Map;
import org.ldptelemetry.Client;

public class Use {
  static boolean use(Client client) {
    NotesMetrics metrics = new NotesMetrics(client);
    return metrics.notesTheme(NotesMetrics.NotesTheme.HIGH_CONTRAST)
        && metrics.notesSize(42.0, Map.of("platform", "web"))
        && metrics.notesPair(NotesMetrics.NotesPairOs.IOS, NotesMetrics.NotesPairTier.PAID);
  }
}
"""


def javac(folder: Path, code: str) -> subprocess.CompletedProcess[str]:
    sys.path.insert(0, str(ROOT / "client_jvm"))
    try:
        import build  # type: ignore[import-not-found]  # noqa: PLC0415
    finally:
        sys.path.pop(0)
    if build.jdk_tool("javac") is None:
        pytest.skip("the JDK's javac is not installed")
    jar = build.build_jar()
    (folder / "Use.java").write_text(code)
    sources = [str(p) for p in folder.rglob("*.java")]
    return subprocess.run(
        [
            build.jdk_tool("javac"),
            "--release",
            "17",
            "-Xlint:all",
            "-Werror",
            "-cp",
            str(jar),
            "-d",
            str(folder / "classes"),
            *sources,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_java_api_compiles(registry: Path, tmp_path: Path) -> None:
    generated(registry, "java", tmp_path)
    checked = javac(tmp_path, RIGHT_JAVA)
    assert checked.returncode == 0, checked.stderr
    wrong = javac(tmp_path, RIGHT_JAVA.replace("HIGH_CONTRAST", "PURPLE"))
    assert wrong.returncode != 0 and "PURPLE" in wrong.stderr


def test_generated_code_calls_only_the_public_report(registry: Path) -> None:
    reg = read_registry(registry)
    for language in ("python", "ts", "java"):
        text = generate(language, reg, "metrics.toml")[0].text
        assert set(re.findall(r"client\.(\w+)\(", text)) == {"report"}, language
