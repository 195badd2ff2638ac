// Replays every conformance vector (conformance/vectors/*.json, written from the Python
// SDK): the same parameters and random bytes must give the same bytes on the wire (each
// payload's JSON, each report's, each batch body, each sealed Oblivious HTTP request),
// with no random byte left over. Compared as text, never as parsed objects: an encoder
// that drops or rewrites a field fails here.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { build, expEpsilon, expLowerBound, normalise, prrInfo, prrSeed, scale } from "../src/mechanisms.js";
import { exp, expm1, toFloat, toFrac, pyRepr } from "../src/exact.js";
import { Rng, fixedBytes } from "../src/randomness.js";
import { shake256, blake2b } from "../src/hashes.js";
import { encodeReport, buildReport, encodeBatch, encodePayload } from "../src/wire.js";
import { Client } from "../src/client.js";
import { MemoryStorage } from "../src/storage.js";
import { importPrivateKey } from "../src/hpke.js";
import { Relay, binaryRequest, encapsulate, parseKeyConfigs } from "../src/ohttp.js";
import { TestGateway, encodeResponse } from "./ohttp_gateway.js";

const dir = fileURLToPath(new URL("../../conformance/vectors/", import.meta.url));
const load = (/** @type {string} */ name) => JSON.parse(readFileSync(dir + name, "utf8"));
const hex = (/** @type {string} */ h) => Uint8Array.from(Buffer.from(h, "hex"));
const toHex = (/** @type {Uint8Array} */ b) => Buffer.from(b).toString("hex");
const rat = (/** @type {number} */ x) => { const f = toFrac(x); return `${f.n}/${f.d}`; };
const float = (/** @type {string} */ r) => { const [n, d] = r.split("/").map(BigInt); return toFloat(n, d); };

/** Replay one case's bytes; check they are all consumed. */
function replay(/** @type {string} */ randomHex, /** @type {(rng: Rng) => any} */ run) {
  const take = fixedBytes(hex(randomHex));
  const out = run(new Rng(take));
  const done = (/** @type {any} */ payload) => {
    assert.equal(take.used(), randomHex.length / 2, "every random byte is consumed");
    return payload;
  };
  return out instanceof Promise ? out.then(done) : done(out);
}

test("exp: the floats every probability is built on, at awkward ε too", () => {
  const v = load("exp.json");
  assert.ok(v.awkward.length >= 5);
  for (const row of [...v.table, ...v.awkward]) {
    assert.equal(rat(exp(row.epsilon)), row.exp, `exp(${row.epsilon})`);
    assert.equal(rat(expEpsilon(row.epsilon)), row.exp_epsilon);
    const b = expLowerBound(row.epsilon);
    assert.equal(`${b.n}/${b.d}`, row.exp_upper_bound);
    assert.equal(rat(exp(row.epsilon / 2)), row.exp_half, `exp(${row.epsilon} / 2)`);
    assert.equal(rat(expm1(row.epsilon / 2)), row.expm1_half, `expm1(${row.epsilon} / 2)`);
    assert.equal(rat(-expm1(-row.epsilon / 2)), row.hybrid_alpha, `expm1(-${row.epsilon} / 2)`);
  }
});

test("frequency oracles: probabilities and payloads", () => {
  for (const entry of load("oracles.json").mechanisms) {
    const m = build(entry.params);
    const probs = entry.probabilities;
    const what = JSON.stringify(entry.params).slice(0, 80);
    if (probs.p) {
      assert.equal(rat(m.p), probs.p, `p of ${what}`);
      assert.equal(rat(m.q), probs.q, `q of ${what}`);
    }
    if (probs.irr_keep) assert.equal(rat(m.irrKeep), probs.irr_keep, what);
    if (probs.p_star_exact) assert.equal(`${m.exact.p.n}/${m.exact.p.d}`, probs.p_star_exact);
    if (probs.thresholds) {
      assert.deepEqual(
        m.thresholds.map((/** @type {any} */ t) => ({ denominator: String(t.d), cumulative: t.cumulative.map(String) })),
        probs.thresholds,
      );
    }
    if (probs.g) assert.deepEqual([m.g, m.prime], [probs.g, probs.prime]);
    if (probs.s) assert.deepEqual([m.s, m.dense], [probs.s, probs.dense]);
    if (probs.order) assert.equal(m.order, probs.order);
  }
});

/** Replays every case of a vectors file and compares each payload's JSON; returns the count. */
async function everyPayload(file, kind, valueOf, label) {
  let n = 0;
  for (const entry of load(file).mechanisms) {
    const m = build(entry.params);
    for (const c of entry.cases) {
      const payload = await replay(c.random, (rng) => m.perturb(valueOf(c), rng));
      assert.equal(encodePayload(payload, kind), c.payload_json, label(entry, c));
      n++;
    }
  }
  return n;
}

test("joint mechanisms: every case, byte for byte", async () => {
  const n = await everyPayload(
    "joint.json",
    "joint",
    (c) => c.values,
    (entry, c) => `joint ${entry.method} ${c.values}`,
  );
  assert.ok(n >= 36);
});

test("frequency oracles: every case, byte for byte", async () => {
  const n = await everyPayload(
    "oracles.json",
    "categorical",
    (c) => c.value,
    (entry, c) => `${entry.params.mechanism} ${c.value} ${c.random.slice(0, 16)}`,
  );
  assert.ok(n > 250);
});

test("memoized: HMAC-SHA256 seed, SHAKE-256 stream, PRR and reports", async () => {
  const v = load("memoized.json");
  for (const entry of v.mechanisms) {
    const m = build(entry.params);
    for (const c of entry.cases) {
      const info = prrInfo(c.metric, c.version, c.value);
      assert.equal(toHex(info), c.info);
      const seed = await prrSeed(hex(c.secret), info);
      assert.equal(toHex(seed), c.seed);
      assert.equal(toHex(shake256(seed)(64)), c.stream_head);
      assert.deepEqual(await m.permanentResponse(c.value, hex(c.secret), c.metric, c.version), c.permanent_response);
      const payload = await replay(c.irr.random, (rng) => m.perturbMemoized(c.value, hex(c.secret), c.metric, c.version, rng));
      assert.equal(encodePayload(payload, "categorical"), c.payload_json);
    }
  }
});

test("numeric: scaling, constants and payloads (and their JSON text)", () => {
  const v = load("numeric.json");
  for (const s of v.scaling) assert.equal(rat(scale(s.value, s.range[0], s.range[1])), s.x_exact);
  for (const entry of v.mechanisms) {
    const m = build(entry.params);
    if (entry.constants.window) assert.equal(String(m.window), entry.constants.window);
    if (entry.params.mechanism !== "pm") {
      assert.equal(String(m.boundUnits), entry.constants.duchi_bound_units ?? entry.constants.bound_units);
    }
    if (entry.constants.alpha) assert.equal(rat(m.alpha), entry.constants.alpha);
    for (const c of entry.cases) {
      const payload = replay(c.random, (rng) => m.perturb(c.x, rng));
      assert.equal(encodePayload(payload, "numeric"), c.payload_json);
    }
  }
});

test("strings: normalisation, salts, coefficients, cells and payloads", () => {
  const v = load("strings.json");
  for (const c of v.normalise) assert.equal(toHex(normalise(c.value, c.max_length)), c.padded, c.value);
  for (const c of v.refused) assert.throws(() => normalise(c.value, c.max_length));
  const utf8 = new TextEncoder();
  for (const s of v.derived_salts) {
    assert.equal(toHex(blake2b(utf8.encode(`ldp-string:${s.name}`), new Uint8Array(0), 16)), s.salt);
  }
  for (const entry of v.sketches) {
    const m = build(entry.params);
    assert.equal(rat(m.inner.p), entry.inner.p);
    const { a, cb } = m.coefficients();
    assert.deepEqual(a, entry.coefficients.a);
    assert.deepEqual(cb, entry.coefficients.c_b);
    for (const c of entry.cells) {
      const padded = normalise(c.value, m.levels);
      assert.equal(toHex(padded), c.padded);
      for (let l = 0; l < m.levels; l++) for (let r = 0; r < m.rows; r++) assert.equal(m.cell(padded, l, r), c.cells[l][r]);
    }
    for (const c of entry.cases) assert.equal(encodePayload(replay(c.random, (rng) => m.perturb(c.value, rng)), "string"), c.payload_json);
  }
});

test("wire: every mechanism and kind, each report and the batch body, byte for byte", async () => {
  const v = load("wire.json");
  const encoded = [];
  for (const item of v.reports) {
    const secret = item.secret ? hex(item.secret) : undefined;
    const report = await replay(item.random, (rng) => buildReport(item.definition, item.value, { rng, secret, id: item.id, dimensions: item.dimensions }));
    encoded.push(encodeReport(report, item.definition));
    assert.equal(encoded.at(-1), item.report_json, item.definition.name);
  }
  assert.equal(encodeBatch(encoded), v.batch);
  const kinds = new Set(v.reports.map((/** @type {any} */ i) => i.definition.kind));
  assert.deepEqual([...kinds].sort(), ["categorical", "distribution", "joint", "numeric", "string"]);
});

/** Report every wire vector's value through a real ``Client`` (its definitions fetched,
 *  its perturbation fed the vectors' bytes in order, the device secret the vectors'), and
 *  return what it posted: through ``options.relay`` when given.
 *  @param {any} v  wire.json @param {string} url @param {any} [options] */
async function clientUploads(v, url, options = {}) {
  const definitions = new Map(v.reports.map((/** @type {any} */ i) => [i.definition.name, i.definition]));
  const random = v.reports.map((/** @type {any} */ i) => i.random).join("");
  const take = fixedBytes(hex(random));
  const place = { state: new Map([["secret", hex(v.reports.find((/** @type {any} */ i) => i.secret).secret)]]) };
  /** @type {string[]} */ const posted = [];
  /** @type {typeof fetch} */
  const fetchImpl = async (target, init) => {
    const path = new URL(String(target)).pathname;
    if (init?.method === "POST") {
      posted.push(/** @type {string} */ (init.body));
      return new Response(JSON.stringify({ accepted: v.reports.length }), { status: 202 });
    }
    return new Response(JSON.stringify(definitions.get(decodeURIComponent(path.split("/").pop() ?? ""))));
  };
  const client = new Client(url, { fetch: fetchImpl, storage: new MemoryStorage(place), rng: new Rng(take), flushAt: 1000, flushInterval: 86_400_000, ...options });
  for (const item of v.reports) assert.equal(await client.report(item.definition.name, item.value, item.dimensions), true, item.definition.name);
  assert.equal(take.used(), random.length / 2, "every random byte is consumed");
  assert.equal(await client.flush(), true);
  await client.shutdown();
  return posted;
}

/** ``text`` with the report ids the client drew in place of the vectors' (ids are fresh
 *  CSPRNG bytes, never the perturbation's). @param {string} text @param {any} v */
const withVectorIds = (text, v) => {
  const ids = [...text.matchAll(/"id":"([0-9a-f]{32})"/g)].map((m) => m[1]);
  assert.equal(ids.length, v.reports.length);
  return ids.reduce((t, id, i) => t.replace(id, v.reports[i].id), text);
};

test("wire: a real Client posts the vectors' batch, byte for byte (but for the ids it draws)", async () => {
  const v = load("wire.json");
  const posted = await clientUploads(v, "https://collector.example");
  assert.equal(posted.length, 1);
  assert.equal(withVectorIds(posted[0], v), v.batch);
});

test("Oblivious HTTP: each Binary HTTP request and its sealed body under fixed keys, byte for byte", async () => {
  const o = load("ohttp.json");
  const batch = load("wire.json").batch;
  const [config] = parseKeyConfigs(hex(o.keys));
  for (const r of o.requests) {
    const body = r.body === "wire.json" ? batch : r.body;
    const auth = r.ingest_key ? { Authorization: `Bearer ${r.ingest_key}` } : {};
    const init = r.method === "POST" ? { method: "POST", headers: { "Content-Type": "application/json", ...auth }, body } : { method: "GET", headers: auth };
    const request = binaryRequest(r.collector + r.path, init);
    assert.equal(toHex(request), r.binary_request, `${r.method} ${r.collector}${r.path}`);
    const ephemeral = { privateKey: await importPrivateKey(hex(r.ephemeral_private_key)), publicKey: hex(r.ephemeral_public_key) };
    const { body: sealed } = await encapsulate(config, request, ephemeral);
    assert.equal(toHex(sealed), r.encapsulated_request, `sealed ${r.method} ${r.path}`);
  }
});

test("Oblivious HTTP: a real Client through a Relay seals the vectors' requests (the gateway opens them byte for byte)", async () => {
  const o = load("ohttp.json");
  const v = load("wire.json");
  const gateway = new TestGateway(parseKeyConfigs(hex(o.keys))[0].keyId, hex(o.gateway_private_key), parseKeyConfigs(hex(o.keys))[0].publicKey);
  /** @type {Uint8Array[]} */ const inner = [];
  const definitions = new Map(v.reports.map((/** @type {any} */ i) => [i.definition.name, i.definition]));
  /** @type {typeof fetch} */
  const relayFetch = async (_url, init) => {
    const opened = await gateway.decapsulate(/** @type {Uint8Array} */ (init?.body));
    assert.ok(opened, "sealed to the pinned key");
    inner.push(opened.request);
    const text = new TextDecoder().decode(opened.request);
    const name = /\/v1\/metrics\/([a-z0-9_.-]+)/.exec(text)?.[1];
    const json = name ? definitions.get(name) : { accepted: v.reports.length };
    const answer = encodeResponse(name ? 200 : 202, [["content-type", "application/json"]], new TextEncoder().encode(JSON.stringify(json)));
    return new Response(await opened.respond(answer), { headers: { "Content-Type": "message/ohttp-res" } });
  };
  const relay = new Relay("https://relay.example/relay", { keys: hex(o.keys), fetch: relayFetch });
  const direct = await clientUploads(v, "https://collector.example", { relay });
  assert.deepEqual(direct, [], "nothing went to the collector directly");
  const byPath = (/** @type {string} */ path) => o.requests.find((/** @type {any} */ r) => r.collector === "https://collector.example" && r.path === path);
  const latin1 = (/** @type {Uint8Array} */ b) => Buffer.from(b).toString("latin1");
  const definition = inner.find((b) => latin1(b).includes("/v1/metrics/app.theme"));
  assert.ok(definition);
  assert.equal(toHex(definition), byPath("/v1/metrics/app.theme").binary_request);
  const upload = inner.filter((b) => latin1(b).includes("/v1/reports"));
  assert.equal(upload.length, 1);
  assert.equal(Buffer.from(withVectorIds(latin1(upload[0]), v), "latin1").toString("hex"), byPath("/v1/reports").binary_request);
});
