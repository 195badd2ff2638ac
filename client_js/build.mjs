// The module `ldp serve` serves: src/index.js (the client and every mechanism) and
// src/ohttp.js (the relay option, loaded only by pages that use it), each bundled into ONE
// minified ES module by the pinned esbuild of package.json, and Brotli-compressed beside
// it (the collector gzips it itself). dist/ is committed, so a fresh clone and a pip-installed
// collector serve it without Node; tests/collector/test_sdk_module.py rebuilds and compares.
//
//   npm run build            write dist/
//   node build.mjs --check   exit 1 when dist/ is not what the sources build to
//
// See docs/reference/sdk-module.md.

import { build, version } from "esbuild";
import { readFileSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { brotliCompressSync, brotliDecompressSync, constants } from "node:zlib";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const ENTRIES = { "index.js": "src/index.js", "ohttp.js": "src/ohttp.js" };
const pkg = JSON.parse(readFileSync(`${here}package.json`, "utf8"));

/** The bundle of one entry point, as bytes. @param {string} entry */
async function bundle(entry) {
  const result = await build({
    entryPoints: [`${here}${entry}`],
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    legalComments: "none",
    // Members named _like_this are private to the SDK's classes (no API has one): they get
    // short names, as local variables do.
    mangleProps: /^_[a-z]/,
    charset: "utf8",
    write: false,
    banner: { js: `/* ${pkg.name} ${pkg.version}: ${entry}, built by esbuild ${version} (npm run build) */` },
  });
  return result.outputFiles[0].contents;
}

const brotli = (/** @type {Uint8Array} */ bytes) => brotliCompressSync(bytes, {
  params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length },
});

const check = process.argv.includes("--check");
const stale = [];
mkdirSync(`${here}dist`, { recursive: true });
for (const [name, entry] of Object.entries(ENTRIES)) {
  const js = await bundle(entry);
  const path = `${here}dist/${name}`;
  if (check) {
    const same = existsSync(path) && Buffer.compare(readFileSync(path), js) === 0;
    const br = existsSync(`${path}.br`) && Buffer.compare(brotliDecompressSync(readFileSync(`${path}.br`)), js) === 0;
    if (!same || !br) stale.push(same ? `dist/${name}.br` : `dist/${name}`);
  } else {
    writeFileSync(path, js);
    writeFileSync(`${path}.br`, brotli(js));
    console.log(`dist/${name}: ${js.length} bytes, ${readFileSync(`${path}.br`).length} with Brotli`);
  }
}
if (stale.length) {
  console.error(`${stale.join(", ")}: not what client_js/src builds to (esbuild ${version}): run \`npm run build\` in client_js/ and commit dist/`);
  process.exit(1);
}
