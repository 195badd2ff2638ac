// Exact-distribution tests: for small domains the output law of each mechanism is known
// exactly (from p and q as the floats sampled); n reports from a seeded stream are checked
// against it by a chi-square goodness-of-fit test at α = 1e-4 per case (a correct sampler
// fails one of these 14 cases with probability < 0.15 %).

import { test } from "node:test";
import assert from "node:assert/strict";

import { build, normalise } from "../src/mechanisms.js";
import { Rng } from "../src/randomness.js";
import { shake256 } from "../src/hashes.js";

const ALPHA = 1e-4;
const N = 20_000;

/** A seeded byte stream for tests only: SHAKE-256 of the seed. */
const seeded = (/** @type {string} */ seed) => new Rng(shake256(new TextEncoder().encode(seed)));

// ln Γ and the regularized upper incomplete gamma Q(a, x) (Numerical Recipes §6.1-6.2).
function lnGamma(/** @type {number} */ x) {
  const c = [76.18009172947146, -86.50532032941677, 24.01409824083091, -1.231739572450155,
    0.1208650973866179e-2, -0.5395239384953e-5];
  let y = x;
  const tmp = x + 5.5 - (x + 0.5) * Math.log(x + 5.5);
  let ser = 1.000000000190015;
  for (const cj of c) ser += cj / ++y;
  return -tmp + Math.log((2.5066282746310005 * ser) / x);
}
function gammaQ(/** @type {number} */ a, /** @type {number} */ x) {
  if (x <= 0) return 1;
  if (x < a + 1) {
    let sum = 1 / a, del = sum, ap = a;
    for (let n = 0; n < 1000 && Math.abs(del) > Math.abs(sum) * 1e-15; n++) sum += (del *= x / ++ap);
    return 1 - sum * Math.exp(-x + a * Math.log(x) - lnGamma(a));
  }
  let b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (let i = 1; i < 1000; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b; if (Math.abs(d) < 1e-300) d = 1e-300;
    c = b + an / c; if (Math.abs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-15) break;
  }
  return Math.exp(-x + a * Math.log(x) - lnGamma(a)) * h;
}

test("the chi-square tail matches known values", () => {
  // P[χ²₁ > 3.841459] = 0.05, P[χ²₁₀ > 29.5883] = 0.001, P[χ²₃ > 21.1075] = 1e-4
  assert.ok(Math.abs(gammaQ(0.5, 3.841459 / 2) - 0.05) < 1e-6);
  assert.ok(Math.abs(gammaQ(5, 29.5883 / 2) - 0.001) < 1e-6);
  assert.ok(Math.abs(gammaQ(1.5, 21.1075 / 2) - 1e-4) < 1e-7);
});

/** Chi-square goodness of fit: returns the p-value. @param {Map<string, number>} counts
 *  @param {Map<string, number>} law */
function pValue(counts, law) {
  let stat = 0;
  for (const y of counts.keys()) assert.ok(law.has(y), `output ${y} has probability 0`);
  for (const [y, pr] of law) {
    const expected = pr * N;
    const o = counts.get(y) ?? 0;
    stat += ((o - expected) ** 2) / expected;
  }
  return gammaQ((law.size - 1) / 2, stat / 2);
}

/** Draw N outputs, key them, test them against law. */
async function check(/** @type {string} */ seed, /** @type {(rng: Rng) => any} */ draw,
  /** @type {(payload: any) => string} */ key, /** @type {Map<string, number>} */ law) {
  const total = [...law.values()].reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(total - 1) < 1e-12, `law sums to ${total}`);
  const rng = seeded(seed);
  const counts = new Map();
  for (let i = 0; i < N; i++) {
    const y = key(await draw(rng));
    counts.set(y, (counts.get(y) ?? 0) + 1);
  }
  const p = pValue(counts, law);
  assert.ok(p > ALPHA, `${seed}: chi-square p-value ${p}`);
}

const v = 1;

for (const [name, k, eps] of /** @type {[string, number, number][]} */ ([["rr", 2, 1.0], ["grr", 5, 1.0], ["memo-grr", 4, 1.0]])) {
  test(`${name} k=${k}: exact law`, async () => {
    const params = { mechanism: name, epsilon: eps, domain_size: k, ...(name.startsWith("memo") ? { permanent_epsilon: 3.0 } : {}) };
    const m = build(params);
    const law = new Map();
    for (let y = 0; y < k; y++) law.set(String(y), y === v ? m.p : (1 - m.p) / (k - 1));
    await check(`${name}-${k}`, (rng) => m.perturb(v, rng), (p) => String(p.v), law);
  });
}

for (const [name, k, eps] of /** @type {[string, number, number][]} */ ([["sue", 3, 1.0], ["oue", 4, 2.0], ["memo-oue", 3, 1.0]])) {
  test(`${name} k=${k}: exact law of the bit vector`, async () => {
    const m = build({ mechanism: name, epsilon: eps, domain_size: k, ...(name.startsWith("memo") ? { permanent_epsilon: 3.0 } : {}) });
    const law = new Map();
    for (let bits = 0; bits < 2 ** k; bits++) {
      let pr = 1;
      for (let u = 0; u < k; u++) {
        const on = (bits >> (k - 1 - u)) & 1;
        const p1 = u === v ? m.p : m.q;
        pr *= on ? p1 : 1 - p1;
      }
      law.set(bits.toString(2).padStart(k, "0"), pr);
    }
    const key = (/** @type {any} */ p) => {
      const byte = Buffer.from(p.b, "base64")[0];
      return (byte >> (8 - k)).toString(2).padStart(k, "0");
    };
    await check(`${name}-${k}`, (rng) => m.perturb(v, rng), key, law);
  });
}

test("hr k=7: exact law of the index", async () => {
  const m = build({ mechanism: "hr", epsilon: 2.0, domain_size: 7 });
  const K = m.order;
  const law = new Map();
  for (let j = 0; j < K; j++) {
    let ones = 0;
    for (let x = (v + 1) & j; x; x >>= 1) ones += x & 1;
    law.set(String(j), ((ones % 2 === 0 ? m.p : 1 - m.p) * 2) / K);
  }
  await check("hr-7", (rng) => m.perturb(v, rng), (p) => String(p.j), law);
});

const choose = (/** @type {number} */ n, /** @type {number} */ r) => { let c = 1; for (let i = 0; i < r; i++) c = (c * (n - i)) / (i + 1); return c; };

for (const [k, s] of [[6, 2], [30, 2]]) {
  test(`ss k=${k} s=${s}: exact law of the subset (${s / k >= 0.1 ? "dense" : "sparse"} sampler)`, async () => {
    const m = build({ mechanism: "ss", epsilon: 1.0, domain_size: k, s });
    const law = new Map();
    const subsets = (/** @type {number} */ start, /** @type {number} */ r) => /** @type {number[][]} */ (
      r === 0 ? [[]] : Array.from({ length: k - start }, (_, i) => start + i).flatMap((x) => subsets(x + 1, r - 1).map((rest) => [x, ...rest])));
    for (const set of subsets(0, s)) {
      law.set(set.join(","), set.includes(v) ? m.keep / choose(k - 1, s - 1) : (1 - m.keep) / choose(k - 1, s));
    }
    await check(`ss-${k}`, (rng) => m.perturb(v, rng), (p) => p.v.join(","), law);
  });
}

test("olh k=5: exact law of (a, b, y)", async () => {
  const m = build({ mechanism: "olh", epsilon: 1.0, domain_size: 5, g: 3 });
  const P = m.prime, g = m.g;
  const law = new Map();
  for (let a = 1; a < P; a++) for (let b = 0; b < P; b++) {
    const h = ((a * v + b) % P) % g;
    for (let y = 0; y < g; y++) law.set(`${a},${b},${y}`, (y === h ? m.keep : (1 - m.keep) / (g - 1)) / ((P - 1) * P));
  }
  await check("olh-5", (rng) => m.perturb(v, rng), (p) => `${p.a},${p.b},${p.y}`, law);
});

test("pram k=3: the row of the matrix", async () => {
  const m = build({ mechanism: "pram", epsilon: 1.0986122886681098, domain_size: 3, matrix: [[0.5, 0.25, 0.25], ["1/6", "2/3", "1/6"], [0.25, 0.25, 0.5]] });
  const law = new Map([["0", 1 / 6], ["1", 2 / 3], ["2", 1 / 6]]);
  await check("pram-3", (rng) => m.perturb(v, rng), (p) => String(p.v), law);
});

test("duchi: ±C with Pr[+C] = (C + x)/(2C)", async () => {
  const m = build({ mechanism: "duchi", epsilon: 1.0 });
  const x = 0.3;
  const K = Number(m.boundUnits), M = 2 ** 30;
  const plus = (K + x * M) / (2 * K);
  const law = new Map([["+", plus], ["-", 1 - plus]]);
  await check("duchi", (rng) => m.perturb(x, rng), (p) => (p.y > 0 ? "+" : "-"), law);
});

test("pm: in the window with probability (M + L)/N", async () => {
  const m = build({ mechanism: "pm", epsilon: 2.0 });
  const M = 2 ** 30, L = Number(m.window), N = M + 2 * L;
  const x = -0.25;
  const start = ((x + 1) * (M + L)) / 2; // the window starts here (randomized rounding aside)
  const keep = (M + L) / N;
  const law = new Map([["in", keep], ["out", 1 - keep]]);
  await check("pm", (rng) => m.perturb(x, rng), (p) => {
    const j = (p.y * M + N - 1) / 2; // the cell
    return j >= Math.floor(start) && j <= Math.floor(start) + L ? "in" : "out";
  }, law);
});

test("string sketch: uniform (level, row), GRR on its cell", async () => {
  const m = build({ mechanism: "string-sketch", epsilon: 2.0, max_length: 2, rows: 2, cells: 4, salt: "0a" });
  const padded = normalise("é", 2);
  const law = new Map();
  for (let l = 0; l < 2; l++) for (let r = 0; r < 2; r++) {
    const c = m.cell(padded, l, r);
    for (let y = 0; y < 4; y++) law.set(`${l},${r},${y}`, (y === c ? m.inner.keep : (1 - m.inner.keep) / 3) / 4);
  }
  await check("string", (rng) => m.perturb("é", rng), (p) => `${p.l},${p.r},${p.v}`, law);
});
