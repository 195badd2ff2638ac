// Replays every conformance vector (conformance/vectors/*.json, written from the Python
// SDK): the same parameters and random bytes must give the same payload, byte for byte,
// with no random byte left over.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { build, expEpsilon, expLowerBound, normalise, prrInfo, prrSeed, scale } from "../src/mechanisms.js";
import { exp, expm1, toFloat, toFrac, pyRepr } from "../src/exact.js";
import { Rng, fixedBytes } from "../src/randomness.js";
import { shake256, blake2b } from "../src/hashes.js";
import { encodeReport, buildReport, encodeBatch } from "../src/wire.js";

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

test("joint mechanisms: every case, byte for byte", async () => {
  let n = 0;
  for (const entry of load("joint.json").mechanisms) {
    const m = build(entry.params);
    for (const c of entry.cases) {
      const payload = await replay(c.random, (rng) => m.perturb(c.values, rng));
      assert.deepEqual(payload, c.payload, `joint ${entry.method} ${c.values}`);
      n++;
    }
  }
  assert.ok(n >= 36);
});

test("frequency oracles: every case, byte for byte", async () => {
  let n = 0;
  for (const entry of load("oracles.json").mechanisms) {
    const m = build(entry.params);
    for (const c of entry.cases) {
      const payload = await replay(c.random, (rng) => m.perturb(c.value, rng));
      assert.deepEqual(payload, c.payload, `${entry.params.mechanism} ${c.value} ${c.random.slice(0, 16)}`);
      n++;
    }
  }
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
      assert.deepEqual(payload, c.payload);
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
      assert.deepEqual(payload, c.payload);
      assert.equal(`{"y":${pyRepr(payload.y)}}`, c.payload_json);
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
    for (const c of entry.cases) assert.deepEqual(replay(c.random, (rng) => m.perturb(c.value, rng)), c.payload);
  }
});

test("wire: reports built from served definitions, and a batch's exact body", async () => {
  const v = load("wire.json");
  const encoded = [];
  for (const item of v.reports) {
    const secret = item.secret ? hex(item.secret) : undefined;
    const report = await replay(item.random, (rng) => buildReport(item.definition, item.value, { rng, secret, id: item.id, dimensions: item.dimensions }));
    assert.deepEqual(report, item.report);
    encoded.push(encodeReport(report, item.definition));
    assert.equal(encoded.at(-1), item.report_json);
  }
  assert.equal(encodeBatch(encoded), v.batch);
});
