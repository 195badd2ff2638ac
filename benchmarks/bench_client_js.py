"""The JavaScript SDK's cost on a page: bundle size and report() time (under Node).

* Bundle size: ``client_js/src/index.js`` (every mechanism) bundled and minified by the
  pinned esbuild of ``client_js/package.json``, then gzipped (level 9); and a page that
  imports only GRR's factory, as a tree-shaking bundler leaves it.
* ``report()`` time: one perturbation + report of OUE at k = 1,024 and of a string
  metric (max_length 16, the automatic sketch at ε = 4), in Node 20 with the CSPRNG,
  beside the Python SDK's ``build_report`` for the same definitions as a yardstick.

Run: ``python benchmarks/bench_client_js.py`` (after ``npm ci`` in client_js/). Prints
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

GRR_ONLY = 'import { grr } from "./src/mechanisms.js"; export const m = grr(1.0, 4);\n'

OUE = {"domain": [f"v{i}" for i in range(1024)], "epsilon": 1.0, "mechanism": "oue"}
STRING = {"kind": "string", "max_length": 16, "epsilon": 4.0}

NODE_TIMING = """
import { buildReport } from "./src/index.js";
const defs = JSON.parse(process.argv[2]);
for (const d of defs) {
  const values = d.kind === "string" ? ["café au lait", "ldp", "search term"] : [0, 17, 1023];
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


def bundle_sizes() -> tuple[tuple[int, int], tuple[int, int]]:
    """(minified, gzipped) bytes of the whole module and of a GRR-only page."""
    if not ESBUILD.exists():
        sys.exit("run `npm ci` in client_js/ first (esbuild is a pinned dev dependency)")
    full = bundle(JS / "src" / "index.js")
    with tempfile.NamedTemporaryFile("w", suffix=".js", dir=JS, delete=False) as f:
        f.write(GRR_ONLY)
    try:
        grr_only = bundle(Path(f.name))
    finally:
        os.unlink(f.name)
    return full, grr_only


def main() -> None:
    print(f"load average at the start {os.getloadavg()[0]:.2f}")
    full, grr_only = bundle_sizes()
    print(f"bundle, every mechanism: {full[0]:,} B minified, {full[1]:,} B min+gzip")
    print(f"bundle, GRR only (tree-shaken): {grr_only[0]:,} B minified, {grr_only[1]:,} B min+gzip")

    defs = [
        wire.parse_spec("bench.oue", OUE).to_dict(),
        wire.parse_spec("bench.string", STRING).to_dict(),
    ]
    script = JS / "_bench_timing.mjs"
    script.write_text(NODE_TIMING)
    try:
        lines = subprocess.run(
            ["node", str(script), json.dumps(defs)],
            cwd=JS,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
    finally:
        script.unlink()
    js = dict(zip(lines[::2], lines[1::2], strict=True))
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    for d, spec in zip(defs, (OUE, STRING), strict=True):
        definition = wire.parse_spec(d["name"], spec)
        values = ["café au lait", "ldp", "search term"] if spec is STRING else [0, 17, 1023]
        n = 5000
        t0 = time.perf_counter()
        for i in range(n):
            wire.build_report(definition, values[i % 3])
        py = (time.perf_counter() - t0) / n * 1e6
        print(f"report() {d['name']}: JS (Node {node}) {js[d['name']]} µs, Python {py:.1f} µs")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
