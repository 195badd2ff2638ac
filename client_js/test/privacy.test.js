// The ε audit's twin for the JS mechanisms: for every mechanism and a grid of ε (most of
// them in no conformance vector), the worst-case likelihood ratio of one report, computed
// exactly from the probabilities the JS SDK samples with, is at most e^ε — and tight
// (above e^(ε(1 − 10⁻⁶))), as tests/client_sdk/test_privacy.py checks the Python ones.

import { test } from "node:test";
import assert from "node:assert/strict";

import { build, expLowerBound } from "../src/mechanisms.js";
import { ONE, div, frac, gt, mul, sub, toFrac, exp } from "../src/exact.js";

const fr = (/** @type {number} */ n, d = 1) => frac(BigInt(n), BigInt(d));
const EPSILONS = [0.05, 0.1, 0.3, 0.61, 0.62, 0.9, 1.0, 1.37, Math.LN2, Math.log(3), 2.0, 2.71, 3.3, 5.0, 7.77, 10.0, 14.2, 20.0];

/** The worst-case ratio of one report of mechanism ``m`` (exact). @param {any} m */
function ratio(m) {
  const unary = (/** @type {any} */ p, /** @type {any} */ q) => div(mul(p, sub(ONE, q)), mul(q, sub(ONE, p)));
  switch (m.name) {
    case "grr": case "rr": { const k = toFrac(m.keep); return div(mul(k, fr(m.k - 1)), sub(ONE, k)); }
    case "sue": case "oue": return unary(toFrac(m.p), toFrac(m.q));
    case "olh": case "blh": { const k = toFrac(m.keep); return div(mul(k, fr(m.g - 1)), sub(ONE, k)); }
    case "hr": { const p = toFrac(m.p); return div(p, sub(ONE, p)); }
    case "ss": { const k = toFrac(m.keep); return mul(div(k, sub(ONE, k)), fr(m.k - m.s, m.s)); }
    case "memo-grr": return div(m.exact.p, m.exact.q);
    case "memo-sue": case "memo-oue": return unary(m.exact.p, m.exact.q);
    default: throw new Error(m.name);
  }
}

const SPECS = [
  (/** @type {number} */ e) => ({ mechanism: "grr", epsilon: e, domain_size: 2 }),
  (/** @type {number} */ e) => ({ mechanism: "grr", epsilon: e, domain_size: 7 }),
  (/** @type {number} */ e) => ({ mechanism: "grr", epsilon: e, domain_size: 1000 }),
  (/** @type {number} */ e) => ({ mechanism: "sue", epsilon: e, domain_size: 16 }),
  (/** @type {number} */ e) => ({ mechanism: "oue", epsilon: e, domain_size: 100 }),
  (/** @type {number} */ e) => ({ mechanism: "olh", epsilon: e, domain_size: 50 }),
  (/** @type {number} */ e) => ({ mechanism: "blh", epsilon: e, domain_size: 50 }),
  (/** @type {number} */ e) => ({ mechanism: "hr", epsilon: e, domain_size: 9 }),
  (/** @type {number} */ e) => ({ mechanism: "ss", epsilon: e, domain_size: 40 }),
];

test("every mechanism's one-report ratio is at most e^ε, and tight", () => {
  let checked = 0;
  for (const eps of EPSILONS) {
    const bound = expLowerBound(eps); // certainly ≤ the true e^ε
    const tight = toFrac(exp(eps * (1 - 1e-6)));
    for (const spec of SPECS) {
      const m = build(spec(eps));
      const r = ratio(m);
      assert.ok(!gt(r, bound), `${m.name} at ε = ${eps}: ratio above e^ε`);
      assert.ok(gt(r, tight), `${m.name} at ε = ${eps}: ratio not tight`);
      checked++;
    }
  }
  assert.equal(checked, EPSILONS.length * SPECS.length);
});

test("memoized mechanisms: one report within ε₁, the permanent response within ε∞", () => {
  for (const eps of [0.1, 0.5, 1.0, 2.0, 4.0]) {
    for (const name of ["memo-grr", "memo-sue", "memo-oue"]) {
      for (const pe of [eps + 0.5, eps * 3, 12.0]) {
        const m = build({ mechanism: name, epsilon: eps, domain_size: 10, permanent_epsilon: pe });
        assert.ok(!gt(ratio(m), expLowerBound(eps)), `${name} ε₁ = ${eps}, ε∞ = ${pe}`);
        assert.ok(!gt(ratio(m.permanent), expLowerBound(pe)), `${name} PRR at ε∞ = ${pe}`);
      }
    }
  }
});
