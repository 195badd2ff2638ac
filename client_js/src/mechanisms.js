// The mechanisms: built from a definition's ``mechanism`` parameters, sampled exactly as
// the Python SDK samples them (docs/protocol.md §3, §4).

import {
  ONE, add, bitlen, div, dyadic, exp, expm1, frac, gt, mul, nextDown, sub, toFloat, toFrac,
} from "./exact.js";
import { Rng, bernoulli, bigFromBytes, laneMarks, subsetMarks, uniformIndices } from "./randomness.js";
import { shake256, blake2b } from "./hashes.js";

/** @typedef {import("./exact.js").Frac} Frac */
/** @typedef {import("./hpke.js").Bytes} Bytes */
/** @typedef {Record<string, any>} Params */

const SAFETY = 1.0 - 1e-12;

/** e^ε shaded down by 1e-12. @param {number} eps */
export const expEpsilon = (eps) => exp(eps) * SAFETY;

/** A rational certainly ≤ e^ε. @param {number} eps */
export const expLowerBound = (eps) => toFrac(nextDown(nextDown(exp(eps))));

/** Lower ``prob`` ulp by ulp until ratio(prob) ≤ e^ε exactly.
 *  @param {number} prob @param {(f: Frac) => Frac} ratio @param {number} eps */
export function shadeDown(prob, ratio, eps) {
  const bound = expLowerBound(eps);
  while (gt(ratio(toFrac(prob)), bound)) prob = nextDown(prob);
  return prob;
}

/** Python's round(): half to even. @param {number} x */
function pyRound(x) {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

const big = BigInt;
/** A rational as the nearest float. @param {Frac} f */
const float = (f) => toFloat(f.n, f.d);
const fr = (/** @type {number} */ n, d = 1) => frac(big(n), big(d));

function isPrime(/** @type {number} */ n) {
  if (n < 2) return false;
  if (n % 2 === 0) return n === 2;
  for (let f = 3; f * f <= n; f += 2) if (n % f === 0) return false;
  return true;
}

function base64(/** @type {Uint8Array} */ bytes) {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function unbase64(/** @type {string} */ text) {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** GRR's move: keep v with probability keep, else another value uniformly. */
function grrStep(/** @type {Rng} */ rng, /** @type {number} */ keep, /** @type {number} */ k, /** @type {number} */ v) {
  if (bernoulli(rng, keep)) return v;
  const other = rng.randrange(k - 1);
  return other + (other >= v ? 1 : 0);
}

/**
 * A frequency oracle: ``perturb(value, rng)`` returns the payload of one report.
 * @typedef {{name: string, epsilon: number, k: number, p?: number, q?: number,
 *   perturb: (value: number, rng: Rng) => any}} Oracle
 */

/** @param {number} eps @param {number} k */
function grr(eps, k, keepProbability = 0) {
  const e = expEpsilon(eps);
  const keep = keepProbability || shadeDown(e / (e + k - 1), (f) => div(mul(f, fr(k - 1)), sub(ONE, f)), eps);
  return {
    name: "grr", epsilon: eps, k, keep, p: keep,
    q: float(div(sub(ONE, toFrac(keep)), fr(k - 1))),
    perturb: (/** @type {number} */ v, /** @type {Rng} */ rng) => ({ v: grrStep(rng, keep, k, v) }),
  };
}

/** @param {string} name @param {number} p @param {number} q @param {number} k
 *  @param {number} epsilon */
function unary(name, p, q, k, epsilon) {
  const nbytes = (k + 7) >> 3;
  return {
    name, epsilon, k, p, q, nbytes,
    perturb(/** @type {number} */ v, /** @type {Rng} */ rng) {
      const marks = laneMarks(rng, q, k);
      marks[v] = bernoulli(rng, p) ? 1 : 0;
      return { b: base64(pack(marks, nbytes)) };
    },
  };
}

/** 0/1 marks by value packed big-endian: value v is bit 7 - v % 8 of byte v / 8.
 *  @param {Uint8Array} marks @param {number} nbytes */
function pack(marks, nbytes) {
  const out = new Uint8Array(nbytes);
  for (let v = 0; v < marks.length; v++) if (marks[v]) out[v >> 3] |= 0x80 >> (v & 7);
  return out;
}

function sue(/** @type {number} */ eps, /** @type {number} */ k) {
  const e = expEpsilon(eps / 2);
  const q = 1 / (e + 1);
  const qf = toFrac(q);
  const p = shadeDown(e / (e + 1), (f) => div(mul(f, sub(ONE, qf)), mul(qf, sub(ONE, f))), eps);
  return unary("sue", p, q, k, eps);
}

function oue(/** @type {number} */ eps, /** @type {number} */ k) {
  const q0 = 1 / (expEpsilon(eps) + 1);
  const q = 1 - shadeDown(1 - q0, (f) => div(f, sub(ONE, f)), eps);
  return unary("oue", 0.5, q, k, eps);
}

function olh(/** @type {number} */ eps, /** @type {number} */ k, g = 0, name = "olh") {
  const e = expEpsilon(eps);
  if (!g) g = Math.min(pyRound(e) + 1, 1 << 20);
  let prime = Math.max(k, g);
  while (!isPrime(prime)) prime++;
  const keep = shadeDown(e / (e + g - 1), (f) => div(mul(f, fr(g - 1)), sub(ONE, f)), eps);
  const P = big(prime), G = big(g);
  const m = P / G, t = P % G;
  const c = frac(t * (m + 1n) * m + (G - t) * m * (m - 1n), P * (P - 1n)); // collision
  const kf = toFrac(keep);
  const qx = add(mul(kf, c), div(mul(sub(ONE, kf), sub(ONE, c)), fr(g - 1)));
  return {
    name, epsilon: eps, k, g, prime, keep, p: keep, q: float(qx),
    perturb(/** @type {number} */ v, /** @type {Rng} */ rng) {
      const a = 1 + rng.randrange(prime - 1);
      const b = rng.randrange(prime);
      const x = Number(((big(a) * big(v) + big(b)) % P) % G);
      let y;
      if (bernoulli(rng, keep)) y = x;
      else { y = rng.randrange(g - 1); y += y >= x ? 1 : 0; }
      return { a, b, y };
    },
  };
}

function popcount(/** @type {number} */ x) {
  let c = 0;
  while (x) { c += x & 1; x >>>= 1; }
  return c;
}

function hr(/** @type {number} */ eps, /** @type {number} */ k) {
  const e = expEpsilon(eps);
  const p = shadeDown(e / (e + 1), (f) => div(f, sub(ONE, f)), eps);
  const order = 2 ** bitlen(big(k));
  return {
    name: "hr", epsilon: eps, k, p, q: 0.5, order,
    perturb(/** @type {number} */ v, /** @type {Rng} */ rng) {
      const row = v + 1;
      let j = rng.randrange(order);
      const inside = popcount(row & j) % 2 === 0;
      if (inside !== bernoulli(rng, p)) j ^= row & -row;
      return { j };
    },
  };
}

function ss(/** @type {number} */ eps, /** @type {number} */ k, s = 0) {
  if (!s) s = Math.max(1, pyRound(k / (exp(eps) + 1)));
  const se = s * expEpsilon(eps);
  const keep = shadeDown(se / (se + k - s), (f) => mul(div(f, sub(ONE, f)), fr(k - s, s)), eps);
  const dense = s >= 0.1 * k;
  const kf = toFrac(keep);
  const qx = div(add(mul(kf, fr(s - 1)), mul(sub(ONE, kf), fr(s))), fr(k - 1));
  return {
    name: "ss", epsilon: eps, k, s, keep, p: keep, q: float(qx), dense,
    perturb(/** @type {number} */ v, /** @type {Rng} */ rng) {
      const include = bernoulli(rng, keep);
      const others = include ? s - 1 : s;
      if (dense) {
        const marks = subsetMarks(rng, k - 1, others);
        const out = [];
        for (let i = 0, u = 0; u < k; u++) {
          if (u === v) { if (include) out.push(u); } else if (marks[i++]) out.push(u);
        }
        return { v: out };
      }
      const picked = new Set([v]);
      if (others) {
        for (const u of uniformIndices(rng, k, others + Math.floor(others / 8))) {
          picked.add(u);
          if (picked.size > others) break;
        }
      }
      if (!include) picked.delete(v);
      return { v: [...picked].sort((a, b) => a - b) };
    },
  };
}

/** A number or string entry of a pram matrix as an exact rational (Python's
 *  ``Fraction(repr(x))``). @param {number | string} x @returns {Frac} */
export function parseRational(x) {
  const text = (typeof x === "number" ? String(x) : x).trim();
  const slash = text.match(/^([+-]?\d+)\s*\/\s*([+-]?\d+)$/);
  if (slash) return frac(big(slash[1]), big(slash[2]));
  const m = text.match(/^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/);
  if (!m || (!m[2] && !m[3])) throw new Error(`not a number: ${text}`);
  const digits = big((m[2] || "") + (m[3] || "") || "0");
  let e = (m[4] ? Number(m[4]) : 0) - (m[3] || "").length;
  const sign = m[1] === "-" ? -1n : 1n;
  return e >= 0 ? frac(sign * digits * 10n ** big(e)) : frac(sign * digits, 10n ** big(-e));
}

function pram(/** @type {number} */ eps, /** @type {number} */ k, /** @type {any[][]} */ matrix) {
  const thresholds = matrix.map((row) => {
    const entries = row.map(parseRational);
    const total = entries.reduce(add, frac(0n));
    const exact = entries.map((e) => div(e, total));
    let d = 1n;
    for (const e of exact) d = (d / gcdBig(d, e.d)) * e.d;
    let run = 0n;
    const cumulative = exact.map((e) => (run += e.n * (d / e.d)));
    return { d, cumulative };
  });
  return {
    name: "pram", epsilon: eps, k, thresholds,
    perturb(/** @type {number} */ v, /** @type {Rng} */ rng) {
      const { d, cumulative } = thresholds[v];
      const r = rng.bigRandrange(d);
      let y = 0;
      while (y < cumulative.length && cumulative[y] <= r) y++;
      return { v: y };
    },
  };
}

function gcdBig(/** @type {bigint} */ a, /** @type {bigint} */ b) {
  while (b) [a, b] = [b, a % b];
  return a;
}

// -- memoized: PRR from the device's stream, IRR from the CSPRNG -------------------------

const PRR_LABEL = "ldp-telemetry/prr/v1";
const utf8 = new TextEncoder();

/** The HMAC input of one permanent response. @param {string} metric
 *  @param {number} version @param {number} value */
export function prrInfo(metric, version, value) {
  if (metric.includes("\0")) throw new Error("metric must not contain NUL");
  return utf8.encode(`${PRR_LABEL}\0${metric}\0${version}\0${value}`);
}

/** HMAC-SHA256(secret, info) with Web Crypto. @param {Uint8Array} secret
 *  @param {Uint8Array} info @returns {Promise<Uint8Array>} */
export async function prrSeed(secret, info) {
  if (secret.length < 16) throw new Error("secret must have at least 16 bytes");
  const key = await globalThis.crypto.subtle.importKey(
    "raw", /** @type {Bytes} */ (secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"],
  );
  return new Uint8Array(await globalThis.crypto.subtle.sign("HMAC", key, /** @type {Bytes} */ (info)));
}

function memo(/** @type {string} */ name, /** @type {Params} */ params) {
  const eps = params.epsilon, k = params.domain_size, pe = params.permanent_epsilon;
  const baseName = name.slice(5);
  const permanent = build({ mechanism: baseName, epsilon: pe, domain_size: k });
  /** @type {Frac} */ let p1;
  /** @type {Frac} */ let q1;
  let estimate, compose, ratio;
  if (baseName === "grr") {
    p1 = toFrac(/** @type {any} */ (permanent).keep);
    q1 = div(sub(ONE, p1), fr(k - 1));
    const e = expEpsilon(eps);
    const p1f = float(p1), q1f = float(q1);
    estimate = (e / (e + k - 1) - q1f) / (p1f - q1f);
    compose = (/** @type {Frac} */ p2) => {
      const p = add(mul(p1, p2), div(mul(sub(ONE, p1), sub(ONE, p2)), fr(k - 1)));
      return [p, div(sub(ONE, p), fr(k - 1))];
    };
    ratio = (/** @type {Frac[]} */ [p, q]) => div(p, q);
  } else {
    p1 = toFrac(/** @type {number} */ (permanent.p));
    q1 = toFrac(/** @type {number} */ (permanent.q));
    const p1f = /** @type {number} */ (permanent.p), q1f = /** @type {number} */ (permanent.q);
    if (baseName === "sue") {
      const e = expEpsilon(eps / 2);
      estimate = (1 + (2 * (e / (e + 1)) - 1) / (2 * p1f - 1)) / 2;
    } else {
      const target = 1 / (expEpsilon(eps) + 1);
      estimate = (1 - q1f - target) / (1 - 2 * q1f);
    }
    compose = (/** @type {Frac} */ p2) => [
      add(mul(p1, p2), mul(sub(ONE, p1), sub(ONE, p2))),
      add(mul(q1, p2), mul(sub(ONE, q1), sub(ONE, p2))),
    ];
    ratio = (/** @type {Frac[]} */ [p, q]) => div(mul(p, sub(ONE, q)), mul(q, sub(ONE, p)));
  }
  const irrKeep = shadeDown(estimate, (p2) => ratio(compose(p2)), eps);
  const irrFlip = float(sub(ONE, toFrac(irrKeep)));
  const [ps, qs] = compose(toFrac(irrKeep));
  const nbytes = (k + 7) >> 3;

  /** The PRR of v for (secret, metric, version). @param {number} v
   *  @param {Uint8Array} secret @param {string} metric @param {number} version */
  async function permanentResponse(v, secret, metric = "", version = 0) {
    const seed = await prrSeed(secret, prrInfo(metric, version, v));
    return permanent.perturb(v, new Rng(shake256(seed), "n-1"));
  }

  /** @param {any} prr @param {Rng} rng */
  function instantaneous(prr, rng) {
    if (baseName === "grr") return { v: grrStep(rng, irrKeep, k, prr.v) };
    const bytes = unbase64(prr.b);
    const flips = pack(laneMarks(rng, irrFlip, k), nbytes);
    for (let i = 0; i < nbytes; i++) bytes[i] ^= flips[i];
    return { b: base64(bytes) };
  }

  return {
    name, epsilon: eps, k, permanentEpsilon: pe, permanent, irrKeep, irrFlip,
    p: float(ps), q: float(qs), exact: { p: ps, q: qs },
    permanentResponse,
    /** @param {number} v @param {Uint8Array} secret @param {string} metric
     *  @param {number} version @param {Rng} rng */
    async perturbMemoized(v, secret, metric, version, rng) {
      return instantaneous(await permanentResponse(v, secret, metric, version), rng);
    },
    /** A fresh device's report: secret = 32 bytes of rng. @param {number} v @param {Rng} rng */
    async perturb(v, rng) {
      const secret = rng.take(32);
      return instantaneous(await permanentResponse(v, secret), rng);
    },
  };
}

// -- numeric -------------------------------------------------------------------------------

export const SCALE_BITS = 30;
const M = 1n << 30n;

/** Map value ∈ [low, high] to [-1, 1]. @param {number} value @param {number} low @param {number} high */
export function scale(value, low, high) {
  const x = ((value - low) / (high - low)) * 2.0 - 1.0;
  return Math.min(1.0, Math.max(-1.0, x));
}

/** x = a/b exactly (b a power of two). @param {number} x @returns {[bigint, bigint]} */
function ratioOf(x) {
  const [num, t] = dyadic(x);
  return x === 0 ? [0n, 1n] : [num, 1n << big(t)];
}

function duchiUnits(/** @type {number} */ eps) {
  const b = expLowerBound(eps);
  const top = M * (b.n + b.d), bottom = b.n - b.d;
  return (top + bottom - 1n) / bottom; // ⌈top/bottom⌉
}

function pmWindow(/** @type {number} */ eps) {
  const b = expLowerBound(eps);
  const fits = (/** @type {bigint} */ L) => (M + L) ** 2n * b.d <= b.n * L * L;
  let L = big(Math.max(1, Math.ceil(Number(M) / expm1(eps / 2))));
  while (!fits(L)) L++;
  while (L > 1n && fits(L - 1n)) L--;
  return L;
}

/** @param {bigint} K @param {number} x @param {Rng} rng */
function duchiSample(K, x, rng) {
  const [a, b] = ratioOf(x);
  return rng.bigRandrange(2n * K * b) < K * b + a * M ? K : -K;
}

/** @param {bigint} L @param {number} x @param {Rng} rng */
function pmSample(L, x, rng) {
  const [a, b] = ratioOf(x);
  const whole = (a + b) * (M + L);
  let i = whole / (2n * b);
  const rem = whole % (2n * b);
  if (rem && rng.bigRandrange(2n * b) < rem) i += 1n;
  const n = M + 2n * L;
  let j;
  if (big(rng.randrange(Number(n))) < M + L) j = i + big(rng.randrange(Number(L)));
  else {
    j = big(rng.randrange(Number(M + L)));
    if (j >= i) j += L;
  }
  return 2n * j + 1n - n;
}

function numeric(/** @type {string} */ name, /** @type {number} */ eps) {
  const K = name === "pm" ? 0n : duchiUnits(eps);
  const L = name === "duchi" ? 0n : pmWindow(eps);
  const alpha = name === "hybrid" ? (eps <= 0.61 ? 0 : -expm1(-eps / 2)) : name === "pm" ? 1 : 0;
  return {
    name, epsilon: eps, numeric: true, boundUnits: K, window: L, alpha,
    /** @param {number} x @param {Rng} rng */
    perturbUnits(x, rng) {
      if (name === "pm") return pmSample(L, x, rng);
      if (name === "hybrid" && alpha && bernoulli(rng, alpha)) return pmSample(L, x, rng);
      return duchiSample(K, x, rng);
    },
    /** @param {number} x @param {Rng} rng */
    perturb(x, rng) {
      if (!(x >= -1 && x <= 1)) throw new RangeError(`value ${x} is outside [-1, 1]`);
      return { y: Number(this.perturbUnits(x, rng)) / 2 ** SCALE_BITS };
    },
  };
}

// -- strings ---------------------------------------------------------------------------------

export const HASH_PRIME = 2 ** 31 - 1;

/** x·y mod 2^31 − 1 in doubles, exactly (x, y < 2^31: 16-bit halves keep every
 *  intermediate below 2^48). @param {number} x @param {number} y */
function mulMod(x, y) {
  const hi = Math.floor(y / 65536), lo = y % 65536;
  return (((x * hi) % HASH_PRIME) * 65536 + x * lo) % HASH_PRIME;
}

/** NFC, UTF-8, cut at a character boundary to maxLength bytes, NUL-padded.
 *  @param {string} value @param {number} maxLength */
export function normalise(value, maxLength) {
  if (typeof value !== "string") throw new TypeError("a string metric's value must be a string");
  if (value.includes("\0")) throw new RangeError("a string metric's value must not contain NUL");
  let raw = utf8.encode(value.normalize("NFC"));
  if (raw.length > maxLength) {
    let cut = maxLength;
    while (cut > 0 && (raw[cut] & 0xc0) === 0x80) cut--;
    raw = raw.subarray(0, cut);
  }
  const out = new Uint8Array(maxLength);
  out.set(raw);
  return out;
}

function hexBytes(/** @type {string} */ hex) {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function sketch(/** @type {Params} */ params) {
  const { epsilon: eps, max_length: levels, rows, cells, salt } = params;
  const inner = grr(eps, cells);
  const key = hexBytes(salt);
  const draw = (/** @type {string} */ label, /** @type {number} */ low) =>
    low + Number(bigFromBytes(blake2b(utf8.encode(label), key, 8)) % big(HASH_PRIME - low));
  // Coefficients are drawn lazily, per row and per (level, row): a report needs three.
  /** @type {Map<string, number>} */
  const memo = new Map();
  const coef = (/** @type {string} */ label, /** @type {number} */ low) => {
    let x = memo.get(label);
    if (x === undefined) memo.set(label, (x = draw(label, low)));
    return x;
  };
  const coefficients = () => ({
    a: Array.from({ length: rows }, (_, r) => coef(`A:${r}`, 2)),
    cb: Array.from({ length: levels * rows }, (_, g) => {
      const l = Math.floor(g / rows), r = g % rows;
      return [coef(`C:${l}:${r}`, 1), coef(`B:${l}:${r}`, 0)];
    }),
  });
  /** @param {Uint8Array} padded @param {number} level @param {number} row */
  const cell = (padded, level, row) => {
    const mult = coef(`A:${row}`, 2);
    let phi = 0;
    for (let i = 0; i <= level; i++) phi = (mulMod(phi, mult) + padded[i] + 1) % HASH_PRIME;
    const c = coef(`C:${level}:${row}`, 1), b = coef(`B:${level}:${row}`, 0);
    return ((mulMod(c, phi) + b) % HASH_PRIME) % cells;
  };
  return {
    name: "string-sketch", epsilon: eps, levels, rows, cells, inner, coefficients, cell,
    /** @param {string | Uint8Array} value @param {Rng} rng */
    perturb(value, rng) {
      const padded = typeof value === "string" ? normalise(value, levels) : value;
      const group = rng.randrange(levels * rows);
      const level = Math.floor(group / rows), row = group % rows;
      return { l: level, r: row, ...inner.perturb(cell(padded, level, row), rng) };
    },
  };
}

/** A joint metric's mechanism (client_sdk/mechanisms/joint.py): a uniform group (a draw
 *  only when there are several), then the tuple's cell in that group's attributes
 *  (row-major) through the group's GRR or OLH at the full ε. @param {Params} params */
function joint(params) {
  const sizes = /** @type {number[]} */ (params.sizes);
  const groups = /** @type {number[][]} */ (params.groups);
  const oracles = /** @type {Params[]} */ (params.oracles).map((p) => {
    if (p.mechanism !== "grr" && p.mechanism !== "olh") throw new Error("a joint group uses grr or olh");
    return build(p);
  });
  return {
    name: "joint",
    sizes,
    groups,
    oracles,
    /** @param {number[]} values @param {Rng} rng */
    perturb(values, rng) {
      if (values?.length !== sizes.length || !values.every((x, j) => Number.isInteger(x) && x >= 0 && x < sizes[j])) {
        throw new RangeError(`a joint value is ${sizes.length} indices in range(0, ${sizes})`);
      }
      const g = groups.length > 1 ? rng.randrange(groups.length) : 0;
      let cell = 0;
      for (const a of groups[g]) cell = cell * sizes[a] + values[a];
      return { g, ...oracles[g].perturb(cell, rng) };
    },
  };
}

/** A distribution metric's mechanism: the value's bin (bin_of's operations, in its order,
 *  client_sdk/mechanisms/bins.py), then
 *  - hh, the hierarchical histogram (client_sdk/mechanisms/distribution.py): a uniform
 *    level l in 1..h (a draw only when h > 1), the bin's node at l through OUE over B^l;
 *  - haar, HaarHRR (client_sdk/mechanisms/haar.py): a uniform level l in 0..h−1 (a draw
 *    only when h > 1) and row r in range(2^l) (a draw only when l > 0), the sign of the
 *    bin's Haar coefficient at its node (y = 1: +1, the left half) through Hadamard row
 *    r, (−1)^popcount(r & node), kept with HR's p = e^ε/(e^ε + 1).
 *  @param {Params} params */
function tree({ mechanism: name, epsilon, bins, branching: B = 2, scale: log }) {
  const h = Math.round(Math.log(bins) / Math.log(B)), hh = +(name == "hh"), p = hr(epsilon, 2).p;
  return {
    name, bins,
    /** @param {number[]} value  [value, lo, hi], value in [lo, hi] @param {Rng} rng */
    perturb([v, lo, hi], rng) {
      const t = log == "log" ? Math.log(v / lo) / Math.log(hi / lo) * bins : (v - lo) / (hi - lo) * bins;
      const leaf = Math.min(bins - 1, Math.floor(t)), l = (h > 1 ? rng.randrange(h) : 0) + hh;
      const node = Math.floor(leaf / B ** (h - l));
      if (hh) return { l, ...oue(epsilon, B ** l).perturb(node, rng) };
      const r = l ? rng.randrange(2 ** l) : 0;
      return { l, r, y: (popcount(r & node) ^ leaf >> h - l - 1 ^ +bernoulli(rng, p)) & 1 };
    },
  };
}

/** The mechanism of a definition's ``mechanism`` parameters. @param {Params} params
 *  @returns {any} */
export function build(params) {
  const { mechanism: name, epsilon: eps, domain_size: k } = params;
  switch (name) {
    case "rr": return { ...grr(eps, 2, params.keep_probability || 0), name };
    case "grr": return grr(eps, k);
    case "sue": return sue(eps, k);
    case "oue": return oue(eps, k);
    case "olh": return olh(eps, k, params.g || 0);
    case "blh": return olh(eps, k, 2, "blh");
    case "hr": return hr(eps, k);
    case "ss": return ss(eps, k, params.s || 0);
    case "pram": return pram(eps, k, params.matrix);
    case "memo-grr": case "memo-sue": case "memo-oue": return memo(name, params);
    case "duchi": case "pm": case "hybrid": return numeric(name, eps);
    case "string-sketch": return sketch(params);
    case "joint": return joint(params);
    case "hh": case "haar": return tree(params);
    default: throw new Error(`unknown mechanism ${JSON.stringify(name)}`);
  }
}

// Each mechanism's factory on its own, for pages that use one and bundle with tree-shaking.
export { grr, sue, oue, olh, hr, ss, pram };
