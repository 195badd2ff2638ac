"""The JavaScript SDK's cost on a page: bundle size and report() time (under Node).

* The SDK as ``ldp serve`` serves it: a real ``ldp serve`` (embedded Redis) is started and
  ``/sdk/ldp-telemetry/index.js`` (and ``ohttp.js``) fetched the way a browser does, with
  ``Accept-Encoding: gzip`` and with ``br``, and without: the bytes on the wire, and how
  many files a page's import fetches (the module and the relative imports it names: a
  bundle names none). Goal: one file, at most 15,000 B gzipped as served.
* Bundle size: ``client_js/src/index.js`` (every mechanism) bundled and minified by the
  pinned esbuild of ``client_js/package.json``, then gzipped (level 9); and a page that
  imports only GRR's factory, as a tree-shaking bundler leaves it.
* The Oblivious HTTP module (``client_js/src/ohttp.js``): what a page that sends through
  a relay adds (it imports ``Relay`` only), bundled the same way; the core bundle is the
  one above (it does not import it).
* OHTTP's cost per batch on the device: encoding a batch of GRR reports as Binary HTTP,
  encapsulating it (a fresh X25519 key pair, the HPKE key schedule, AES-128-GCM) and
  decapsulating the gateway's answer, in Node 20 (Web Crypto), for batches of 20 (the
  client's ``flushAt``) and 100 reports (its ``maxBatchReports``): the median of 7 blocks'
  means of 50 batches, after one untimed block; per report amortised. The timing is
  ``client_js/bench/ohttp_timing.js``; the gateway's work (the test gateway of
  ``client_js/test``) is outside the timing.
* ``report()`` time: one perturbation + report of OUE at k = 1,024 and of a string
  metric (max_length 16, the automatic sketch at ε = 4), in Node 20 with the CSPRNG,
  beside the Python SDK's ``build_report`` for the same definitions as a yardstick.

  And the distributions (1,024 log bins, ε = 1): the hierarchical histogram
  (``bench.hh``) and HaarHRR (``bench.haar``).

Run: ``python benchmarks/bench_client_js.py`` (after ``npm ci`` in client_js/;
``--timing``: report() alone, which needs only Node). Prints
the load average before and after.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from client_sdk import wire

ROOT = Path(__file__).resolve().parent.parent
JS = ROOT / "client_js"
ESBUILD = JS / "node_modules" / ".bin" / "esbuild"

OHTTP_ONLY = 'export { Relay } from "./src/ohttp.js";\n'

NODE_OHTTP = """
import { timeOhttp } from "./bench/ohttp_timing.js";
for (const size of [100, 20]) console.log(JSON.stringify({ size, ...await timeOhttp(size, 50) }));
"""

GRR_ONLY = 'import { grr } from "./src/mechanisms.js"; export const m = grr(1.0, 4);\n'

OUE = {"domain": [f"v{i}" for i in range(1024)], "epsilon": 1.0, "mechanism": "oue"}
STRING = {"kind": "string", "max_length": 16, "epsilon": 4.0}
HH = {"kind": "numeric", "range": [1, 60000], "epsilon": 1.0,
      "distribution": {"bins": 1024, "scale": "log"}}  # fmt: skip
HAAR = {**HH, "mechanism": "haar"}
TIMED = {"bench.oue": OUE, "bench.string": STRING, "bench.hh": HH, "bench.haar": HAAR}
VALUES: dict[str, list[object]] = {
    "bench.oue": [0, 17, 1023],
    "bench.string": ["café au lait", "ldp", "search term"],
    "bench.hh": [17.0, 1023.0, 42000.0],
    "bench.haar": [17.0, 1023.0, 42000.0],
}

NODE_TIMING = """
import { buildReport } from "./src/index.js";
const defs = JSON.parse(process.argv[2]);
const valuesOf = JSON.parse(process.argv[3]);
for (const d of defs) {
  const values = valuesOf[d.name];
  for (let i = 0; i < 5000; i++) await buildReport(d, values[i % 3]);  // warm up
  const n = 5000;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await buildReport(d, values[i % 3]);
  console.log(`${d.name} ${((performance.now() - t0) * 1000 / n).toFixed(1)}`);
}
"""


def bundle(entry: Path) -> tuple[int, int]:
    """(minified bytes, gzipped bytes) of ``entry`` bundled as an ES module."""
    out = subprocess.run(
        [str(ESBUILD), str(entry), "--bundle", "--minify", "--format=esm", "--target=es2020"],
        cwd=JS,
        check=True,
        capture_output=True,
    ).stdout
    return len(out), len(gzip.compress(out, 9))


def node_lines(script: str) -> list[str]:
    """The lines a Node script (an ES module in client_js/) prints."""
    main_script = JS / "_bench_script.mjs"
    main_script.write_text(script)
    try:
        return subprocess.run(
            ["node", str(main_script)], cwd=JS, check=True, capture_output=True, text=True
        ).stdout.splitlines()
    finally:
        main_script.unlink()


def bundle_of(source: str) -> tuple[int, int]:
    """(minified, gzipped) bytes of a page whose module is ``source``."""
    with tempfile.NamedTemporaryFile("w", suffix=".js", dir=JS, delete=False) as f:
        f.write(source)
    try:
        return bundle(Path(f.name))
    finally:
        os.unlink(f.name)


def bundle_sizes() -> tuple[tuple[int, int], tuple[int, int]]:
    """(minified, gzipped) bytes of the whole module and of a GRR-only page."""
    if not ESBUILD.exists():
        sys.exit("run `npm ci` in client_js/ first (esbuild is a pinned dev dependency)")
    return bundle(JS / "src" / "index.js"), bundle_of(GRR_ONLY)


def served_sizes() -> list[tuple[str, int, int, int, int]]:
    """(module, files a page fetches, identity, gzip, br bytes) as ``ldp serve`` serves."""
    import re
    import urllib.request

    from ldp_server.serve import Server

    def get(url: str, encoding: str) -> tuple[bytes, str]:
        request = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.read(), r.headers.get("Content-Encoding") or "identity"

    out = []
    with tempfile.TemporaryDirectory() as data, Server(port=0, data_dir=data, quiet=True) as s:
        base = f"{s.url}/sdk/ldp-telemetry/"
        for name in ("index.js", "ohttp.js"):
            sizes = {}
            for encoding in ("identity", "gzip", "br"):
                body, served = get(base + name, encoding)
                assert served == encoding, (name, encoding, served)
                sizes[encoding] = len(body)
            text = get(base + name, "identity")[0].decode()
            imports = re.findall(r'(?:import|from)\s*"(\./[^"]+)"', text)
            out.append((name, 1 + len(imports), sizes["identity"], sizes["gzip"], sizes["br"]))
    return out


def main() -> None:
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    if "--timing" not in sys.argv:
        size_figures()
    timing()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


def size_figures() -> None:
    """The served, bundled and OHTTP figures."""
    for name, files, plain, gz, br in served_sizes():
        print(
            f"served by ldp serve, {name}: {files} file(s), {plain:,} B, {gz:,} B gzip, "
            f"{br:,} B br as served (goal for index.js: 1 file, <= 15,000 B gzip)"
        )
    full, grr_only = bundle_sizes()
    ohttp_only = bundle_of(OHTTP_ONLY)
    print(f"bundle, every mechanism: {full[0]:,} B minified, {full[1]:,} B min+gzip")
    print(f"bundle, GRR only (tree-shaken): {grr_only[0]:,} B minified, {grr_only[1]:,} B min+gzip")
    print(
        f"bundle, the OHTTP module (Relay; loaded only with a relay): {ohttp_only[0]:,} B "
        f"minified, {ohttp_only[1]:,} B min+gzip"
    )
    for line in node_lines(NODE_OHTTP):
        r = json.loads(line)
        print(
            f"OHTTP, batch of {r['size']} GRR reports ({r['bytes']:,} B of JSON), Node: "
            f"encapsulate {r['seal']:.0f} µs + decapsulate the answer {r['open']:.0f} µs "
            f"= {(r['seal'] + r['open']) / r['size']:.1f} µs per report"
        )


def timing() -> None:
    """report() in Node beside Python's build_report."""
    defs = [wire.parse_spec(name, spec).to_dict() for name, spec in TIMED.items()]
    script = JS / "_bench_timing.mjs"
    script.write_text(NODE_TIMING)
    try:
        lines = subprocess.run(
            ["node", str(script), json.dumps(defs), json.dumps(VALUES)],
            cwd=JS,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
    finally:
        script.unlink()
    js = dict(zip(lines[::2], lines[1::2], strict=True))
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    for d in defs:
        definition = wire.parse_spec(d["name"], TIMED[d["name"]])
        values = VALUES[d["name"]]
        n = 5000
        t0 = time.perf_counter()
        for i in range(n):
            wire.build_report(definition, values[i % 3])
        py = (time.perf_counter() - t0) / n * 1e6
        print(f"report() {d['name']}: JS (Node {node}) {js[d['name']]} µs, Python {py:.1f} µs")


if __name__ == "__main__":
    main()
