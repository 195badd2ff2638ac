// Random cross-SDK cases (conformance/random_cases.py): the Python SDK draws random
// definitions of every kind and mechanism, values and random bytes from a seed that changes
// every run, and writes what it puts on the wire; this SDK replays the same bytes and must
// write the same bytes: each report, the batch a real Client posts, each sealed request.
// LDP_CONFORMANCE_SEED replays a run (the seed is printed); LDP_CONFORMANCE_COUNT sets the
// number of definitions (300); LDP_PYTHON the interpreter (../.venv/bin/python, else python3).

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { Rng, fixedBytes } from "../src/randomness.js";
import { buildReport, encodeBatch, encodeReport } from "../src/wire.js";
import { Client } from "../src/client.js";
import { MemoryStorage } from "../src/storage.js";
import { importPrivateKey } from "../src/hpke.js";
import { binaryRequest, encapsulate, parseKeyConfigs } from "../src/ohttp.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const hex = (/** @type {string} */ h) => Uint8Array.from(Buffer.from(h, "hex"));
const toHex = (/** @type {Uint8Array} */ b) => Buffer.from(b).toString("hex");

const seed = Number(process.env.LDP_CONFORMANCE_SEED ?? Math.floor(Math.random() * 2 ** 31));
const count = Number(process.env.LDP_CONFORMANCE_COUNT ?? 300);
const python = process.env.LDP_PYTHON ?? (existsSync(`${root}.venv/bin/python`) ? `${root}.venv/bin/python` : "python3");
console.log(`random cross-SDK cases: seed ${seed} (LDP_CONFORMANCE_SEED=${seed} replays it), ${count} definitions`);
const run = JSON.parse(execFileSync(python, [`${root}conformance/random_cases.py`, "--seed", String(seed), "--count", String(count)], { encoding: "utf8", maxBuffer: 1 << 28 }));
const replay = `(seed ${seed}: LDP_CONFORMANCE_SEED=${seed} node --test test/random.test.js)`;

/** Fail with where two texts first differ (not both whole: a batch is tens of kB).
 *  @param {string} actual @param {string} expected @param {string} where */
function sameText(actual, expected, where) {
  if (actual === expected) return;
  let i = 0;
  while (i < actual.length && actual[i] === expected[i]) i++;
  const near = (/** @type {string} */ t) => JSON.stringify(t.slice(Math.max(0, i - 60), i + 60));
  assert.fail(`differs at ${i} of ${expected.length}: ${where}\n  this SDK: ${near(actual)}\n  Python:   ${near(expected)}`);
}

/** What a case is, for a failure message. @param {any} c */
const what = (c) => `${c.definition.kind} ${JSON.stringify(c.definition.mechanism).slice(0, 160)} value ${JSON.stringify(c.value)} ${replay}`;

test("random definitions: each report's bytes equal the Python SDK's, every random byte consumed", async () => {
  assert.ok(run.cases.length >= 200, `at least 200 random definitions a run, got ${run.cases.length}`);
  const encoded = [];
  for (const c of run.cases) {
    const take = fixedBytes(hex(c.random));
    const report = await buildReport(c.definition, c.value, { rng: new Rng(take), secret: hex(run.secret), id: c.id, dimensions: c.dimensions });
    encoded.push(encodeReport(report, c.definition));
    sameText(/** @type {string} */ (encoded.at(-1)), c.report_json, what(c));
    assert.equal(take.used(), c.random.length / 2, `every random byte is consumed: ${what(c)}`);
  }
  sameText(encodeBatch(encoded), run.batch, replay);
  const kinds = new Set(run.cases.map((/** @type {any} */ c) => c.definition.kind));
  assert.deepEqual([...kinds].sort(), ["categorical", "distribution", "joint", "numeric", "string"], replay);
  console.log(`compared ${run.cases.length} random definitions' reports and their batch (${run.batch.length} bytes), byte for byte`);
});

test("random definitions: a real Client posts the Python SDK's batch (but for the ids it draws)", async () => {
  const definitions = new Map(run.cases.map((/** @type {any} */ c) => [c.definition.name, c.definition]));
  const random = run.cases.map((/** @type {any} */ c) => c.random).join("");
  const take = fixedBytes(hex(random));
  /** @type {string[]} */ const posted = [];
  /** @type {typeof fetch} */
  const fetchImpl = async (url, init) => {
    if (init?.method === "POST") {
      posted.push(/** @type {string} */ (init.body));
      return new Response(JSON.stringify({ accepted: run.cases.length }), { status: 202 });
    }
    const name = decodeURIComponent(new URL(String(url)).pathname.split("/").pop() ?? "");
    return new Response(JSON.stringify(definitions.get(name)));
  };
  const storage = new MemoryStorage({ state: new Map([["secret", hex(run.secret)]]) });
  const client = new Client("https://collector.example", { fetch: fetchImpl, storage, rng: new Rng(take), flushAt: 100_000, flushInterval: 86_400_000, maxBatchReports: 100_000 });
  for (const c of run.cases) assert.equal(await client.report(c.definition.name, c.value, c.dimensions), true, what(c));
  assert.equal(take.used(), random.length / 2, replay);
  assert.equal(await client.flush(), true);
  await client.shutdown();
  assert.equal(posted.length, 1);
  const ids = [...posted[0].matchAll(/"id":"([0-9a-f]{32})"/g)].map((m) => m[1]);
  assert.equal(ids.length, run.cases.length);
  sameText(ids.reduce((t, id, i) => t.replace(id, run.cases[i].id), posted[0]), run.batch, replay);
});

test("random Oblivious HTTP requests: the Binary HTTP request and its sealed body equal the Python SDK's", async () => {
  assert.ok(run.ohttp.length >= 10);
  for (const r of run.ohttp) {
    const [config] = parseKeyConfigs(hex(r.keys));
    const init = r.method === "POST" ? { method: "POST", headers: { "Content-Type": "application/json" }, body: r.body } : { method: "GET" };
    const request = binaryRequest(r.collector.replace(/\/+$/, "") + r.path, init);
    const where = `${r.method} ${r.collector} ${r.path} ${replay}`;
    sameText(toHex(request), r.binary_request, where);
    const ephemeral = { privateKey: await importPrivateKey(hex(r.ephemeral_private_key)), publicKey: hex(r.ephemeral_public_key) };
    sameText(toHex((await encapsulate(config, request, ephemeral)).body), r.encapsulated_request, where);
  }
});
