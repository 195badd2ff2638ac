// Exact arithmetic the mechanisms need: floats as exact rationals, rationals rounded to
// floats, nextafter, and e^x and e^x − 1 correctly rounded (docs/protocol.md §3).

/** @typedef {{n: bigint, d: bigint}} Frac  a rational n/d, d > 0, in lowest terms */

const F64 = new Float64Array(1);
const U64 = new BigUint64Array(F64.buffer);

/** @param {bigint} a @param {bigint} b @returns {bigint} */
export function gcd(a, b) {
  if (a < 0n) a = -a;
  if (b < 0n) b = -b;
  while (b) [a, b] = [b, a % b];
  return a;
}

/** Number of binary digits of n >= 0 (bitlen(0) = 0). @param {bigint} n */
export function bitlen(n) {
  if (n < 0x100000000n) return 32 - Math.clz32(Number(n));
  return n.toString(2).length;
}

/** bitlen of a non-negative safe integer. @param {number} n */
export function bitlenNumber(n) {
  return n < 0x100000000 ? 32 - Math.clz32(n) : bitlen(BigInt(n));
}

/** @param {bigint} n @param {bigint} d @returns {Frac} */
export function frac(n, d = 1n) {
  if (d < 0n) { n = -n; d = -d; }
  const g = gcd(n, d) || 1n;
  return { n: n / g, d: d / g };
}

export const add = (/** @type {Frac} */ a, /** @type {Frac} */ b) => frac(a.n * b.d + b.n * a.d, a.d * b.d);
export const sub = (/** @type {Frac} */ a, /** @type {Frac} */ b) => frac(a.n * b.d - b.n * a.d, a.d * b.d);
export const mul = (/** @type {Frac} */ a, /** @type {Frac} */ b) => frac(a.n * b.n, a.d * b.d);
export const div = (/** @type {Frac} */ a, /** @type {Frac} */ b) => frac(a.n * b.d, a.d * b.n);
/** a > b @param {Frac} a @param {Frac} b */
export const gt = (a, b) => a.n * b.d > b.n * a.d;
export const ONE = frac(1n);

/** The exact dyadic form of a finite float: [num, t] with x = num / 2^t (num odd unless 0;
 *  t may be negative for large x). @param {number} x @returns {[bigint, number]} */
/** @type {Map<number, [bigint, number]>} */
const DYADIC = new Map();

/** @param {number} x @returns {[bigint, number]} */
export function dyadic(x) {
  const hit = DYADIC.get(x);
  if (hit) return hit;
  const out = dyadicOf(x);
  if (DYADIC.size > 1024) DYADIC.clear();
  DYADIC.set(x, out);
  return out;
}

/** @param {number} x @returns {[bigint, number]} */
function dyadicOf(x) {
  if (x === 0) return [0n, 0];
  F64[0] = x;
  const bits = U64[0];
  const neg = bits >> 63n ? -1n : 1n;
  const e = Number((bits >> 52n) & 0x7ffn);
  let m = bits & 0xfffffffffffffn;
  let t;
  if (e === 0) t = 1074;
  else { m |= 1n << 52n; t = 1075 - e; }
  while (!(m & 1n)) { m >>= 1n; t -= 1; }
  return [neg * m, t];
}

/** The float x as an exact rational. @param {number} x @returns {Frac} */
export function toFrac(x) {
  const [num, t] = dyadic(x);
  return t >= 0 ? { n: num, d: 1n << BigInt(t) } : { n: num << BigInt(-t), d: 1n };
}

/** 2^e as a float, for any e in the normal and subnormal range. @param {number} e */
function pow2(e) {
  let r = 1;
  while (e > 1000) { r *= 2 ** 1000; e -= 1000; }
  while (e < -1000) { r *= 2 ** -1000; e += 1000; }
  return r * 2 ** e;
}

/** n/d rounded to the nearest float (ties to even), as Python's float(Fraction); normal
 *  results only (all the mechanisms need). @param {bigint} n @param {bigint} d */
export function toFloat(n, d) {
  if (n === 0n) return 0;
  if (d < 0n) { n = -n; d = -d; }
  const sign = n < 0n ? -1 : 1;
  if (n < 0n) n = -n;
  let s = 53 - (bitlen(n) - bitlen(d));
  let q, r;
  for (;;) {
    const num = s >= 0 ? n << BigInt(s) : n;
    const den = s >= 0 ? d : d << BigInt(-s);
    q = num / den;
    r = num % den;
    if (q >= 1n << 52n) {
      if (q >= 1n << 53n) { s -= 1; continue; }
      const twice = 2n * r;
      if (twice > den || (twice === den && (q & 1n))) q += 1n;
      break;
    }
    s += 1;
  }
  if (q === 1n << 53n) { q >>= 1n; s -= 1; }
  return sign * Number(q) * pow2(-s);
}

/** The next float below positive x (nextafter(x, 0)). @param {number} x */
export function nextDown(x) {
  F64[0] = x;
  U64[0] -= 1n;
  return F64[0];
}

// e^x and e^x − 1 correctly rounded (docs/protocol.md §3): the Taylor series in fixed point
// with P bits and a rigorous bound on its error, P doubled until both ends of the interval
// round to the same float (Ziv's strategy; e^x is never a midpoint, so this ends).
const FIRST_PREC = 320;
/** @type {Map<number, bigint>} */
const LN2 = new Map();

/** ln 2 · 2^P, truncated: Σ_{k≥1} ⌊2^P/(k·2^k)⌋, within (P + 8) units of the truth.
 *  @param {number} P */
function ln2(P) {
  let out = LN2.get(P);
  if (out === undefined) {
    const scale = 1n << BigInt(P);
    out = 0n;
    for (let k = 1n; k < BigInt(P) + 8n; k++) out += scale / (k << k);
    LN2.set(P, out);
  }
  return out;
}

/** e^x ≈ num/den within ± err/den, at P bits. @param {number} x @param {number} P
 *  @returns {{num: bigint, den: bigint, err: bigint}} */
function expFixed(x, P) {
  const scale = 1n << BigInt(P);
  const f = toFrac(x);
  const X = (f.n * scale) / f.d; // x·2^P, within 1 unit
  const L = ln2(P);
  let k = X / L; // x = k ln2 + r, 0 ≤ r < ln 2
  if (X < 0n && k * L !== X) k -= 1n;
  const R = X - k * L;
  let term = scale;
  let sum = scale;
  let terms = 0n;
  for (let i = 1n; term; i++) {
    term = (term * R) / (scale * i); // each term within 3 units (r < 1)
    sum += term;
    terms++;
  }
  // r is off by < 1 + |k|(P + 8) units, and e^r < 2 doubles that; each term and the
  // tail cut off add < 3 units each.
  const kAbs = k < 0n ? -k : k;
  const err = 4n * (1n + kAbs * (BigInt(P) + 8n)) + 3n * (terms + 2n);
  return k >= 0n ? { num: sum << k, den: scale, err: err << k } : { num: sum, den: scale << -k, err };
}

/** e^x (− 1 if minusOne) rounded to the nearest float, ties to even; uncached. The first
 *  precision is a parameter only so that tests can make the loop run more than once.
 *  @param {number} x @param {boolean} minusOne @param {number} firstPrec */
export function roundedExp(x, minusOne, firstPrec = FIRST_PREC) {
  if (!Number.isFinite(x) || Math.abs(x) > 709) throw new RangeError(`x must be finite and in [-709, 709], got ${x}`);
  if (x === 0) return minusOne ? x : 1;
  for (let P = firstPrec; ; P *= 2) {
    const { num, den, err } = expFixed(x, P);
    const centre = minusOne ? num - den : num;
    const low = toFloat(centre - err, den);
    if (low === toFloat(centre + err, den)) return low;
  }
}

const EXP_CACHE = new Map();
const EXPM1_CACHE = new Map();

/** @param {Map<number, number>} cache @param {number} x @param {boolean} minusOne */
function cached(cache, x, minusOne) {
  let out = cache.get(x);
  if (out === undefined) {
    out = roundedExp(x, minusOne);
    if (cache.size > 256) cache.clear();
    cache.set(x, out);
  }
  return out;
}

/** e^x rounded to the nearest float (ties to even), |x| ≤ 709. @param {number} x */
export const exp = (x) => cached(EXP_CACHE, x, false);

/** e^x − 1 rounded to the nearest float (ties to even), |x| ≤ 709. @param {number} x */
export const expm1 = (x) => cached(EXPM1_CACHE, x, true);

/** A float as Python's repr writes it (shortest round-trip digits; exponent form below
 *  1e-4 and from 1e16; always a '.' or an 'e'). @param {number} x */
export function pyRepr(x) {
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return x.toFixed(1);
  const abs = Math.abs(x);
  if (abs >= 1e-4 && abs < 1e16) return String(x);
  let [mant, e] = x.toExponential().split("e");
  const n = Number(e);
  const exp = (n < 0 ? "-" : "+") + String(Math.abs(n)).padStart(2, "0");
  return `${mant}e${exp}`;
}
