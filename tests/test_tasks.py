"""``tasks.py``, the one entry point: what it does to the machine, it says first.

New-user finding (issue 36, item 9): ``python3 tasks.py test`` ran ``apt-get install
nginx-light`` (and chromium) as root with nothing but the command line itself. It now
says what it installs, why and how to avoid it, before apt-get runs. apt-get itself is a
stand-in here (a script on ``PATH`` that records its call): a test must not install
packages on the machine it runs on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or not Path("/usr/bin/apt-get").exists(),
    reason="tasks.py installs Debian packages only as root with apt-get",
)
def test_it_says_what_it_installs_and_why_before_apt_get_runs(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-get").write_text('#!/bin/sh\necho "apt-get ran: $*"\n')
    (fake / "apt-get").chmod(0o755)
    missing = tmp_path / "no" / "nginx"
    code = (
        "from pathlib import Path; import tasks; "
        f"tasks._apt_install(Path({str(missing)!r}), 'nginx-light', 'the proxy test')"
    )
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    lines = result.stdout.splitlines()
    said = next(i for i, line in enumerate(lines) if "installing Debian's nginx-light" in line)
    ran = next(i for i, line in enumerate(lines) if line.startswith("apt-get ran:"))
    assert said < ran, result.stdout
    assert (
        f"{missing} is missing: installing Debian's nginx-light for the proxy test" in lines[said]
    )
    assert "as root" in lines[said] and "to install nothing" in lines[said]
    assert [x for x in lines if x.startswith("apt-get ran:")] == [
        "apt-get ran: update -qq",
        "apt-get ran: install -y -qq nginx-light",
    ]


def test_nothing_is_said_or_installed_when_the_binary_is_there(tmp_path: Path) -> None:
    present = tmp_path / "nginx"
    present.touch()
    code = (
        "from pathlib import Path; import tasks; "
        f"tasks._apt_install(Path({str(present)!r}), 'nginx-light', 'the proxy test')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout == ""
