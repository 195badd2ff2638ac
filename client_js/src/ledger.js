// The device's privacy ledger, as client_sdk/ledger.py keeps it (docs/protocol.md §7):
// ε charged per metric and UTC day; a metric's budget per period; device-wide caps per
// day and over the lifetime, a memoized metric counting at most its ε∞.

export const EPSILON_SLACK = 1e-9;
const KEEP_DAYS = 45; // the longest period (a month) and then some

let lastDay = [NaN, ""];

/** The UTC day of a time in ms, as "YYYY-MM-DD" (the last one remembered). @param {number} ms */
export function dayOf(ms) {
  const n = Math.floor(ms / 86_400_000);
  if (lastDay[0] !== n) lastDay = [n, new Date(n * 86_400_000).toISOString().slice(0, 10)];
  return /** @type {string} */ (lastDay[1]);
}

/** The first day of the budget period containing ``day``. @param {string} day
 *  @param {"day" | "week" | "month"} period */
export function periodStart(day, period) {
  if (period === "day") return day;
  if (period === "month") return `${day.slice(0, 8)}01`;
  const d = new Date(`${day}T00:00:00Z`);
  const weekday = (d.getUTCDay() + 6) % 7; // Monday = 0
  return dayOf(d.getTime() - weekday * 86_400_000);
}

/**
 * @typedef {{days: Record<string, Record<string, [number, number]>>,
 *   lifetime: Record<string, [number, number, string]>, permanent: Record<string, number>}} LedgerState
 * @typedef {{metric: string, epsilon: number, day: string, since: string,
 *   limit: number | null, permanent: number | null}} Charge
 * @typedef {{epsilon_per_day?: number | null, epsilon_lifetime?: number | null}} DeviceCaps
 */

/** @returns {LedgerState} */
export const emptyLedger = () => ({ days: {}, lifetime: {}, permanent: {} });

/** The charge of a report of ``definition`` made at ``ms``. @param {any} definition @param {number} ms
 *  @returns {Charge} */
export function chargeOf(definition, ms) {
  const day = dayOf(ms);
  const budget = definition.budget;
  const mech = definition.mechanism;
  return {
    metric: definition.name,
    epsilon: mech.epsilon,
    day,
    since: budget ? periodStart(day, budget.period) : day,
    limit: budget ? budget.reports_per_period : null,
    permanent: mech.permanent_epsilon ?? null,
  };
}

/** Reports and ε charged to ``metric`` from ``since`` to ``until``. @param {LedgerState} state
 *  @param {string} metric @param {string} since @param {string} until */
export function spent(state, metric, since, until) {
  let reports = 0, epsilon = 0;
  for (const [day, [n, eps]] of Object.entries(state.days[metric] ?? {})) {
    if (since <= day && day <= until) { reports += n; epsilon += eps; }
  }
  return [reports, epsilon];
}

/** Σ over metrics of ε in a window, a memoized one at most its ε∞.
 *  @param {[string, number][]} rows @param {Record<string, number>} permanent */
export function deviceTotal(rows, permanent) {
  /** @type {Record<string, number>} */
  const by = {};
  for (const [m, eps] of rows) by[m] = (by[m] ?? 0) + eps;
  return Object.entries(by).reduce((t, [m, eps]) => t + Math.min(eps, permanent[m] ?? Infinity), 0);
}

/** Why ``charge`` may not be made ("budget", "device_budget"), or null.
 *  @param {LedgerState} state @param {Charge} charge @param {DeviceCaps | null} caps */
export function refusal(state, charge, caps) {
  if (charge.limit !== null) {
    const [reports, epsilon] = spent(state, charge.metric, charge.since, charge.day);
    const allowed = charge.limit * charge.epsilon * (1 + EPSILON_SLACK);
    if (reports + 1 > charge.limit || epsilon + charge.epsilon > allowed) return "budget";
  }
  if (caps) {
    const permanent = { ...state.permanent };
    if (charge.permanent !== null) permanent[charge.metric] = charge.permanent;
    const today = Object.entries(state.days).map(([m, days]) => /** @type {[string, number]} */ ([m, days[charge.day]?.[1] ?? 0]));
    const life = Object.entries(state.lifetime).map(([m, v]) => /** @type {[string, number]} */ ([m, v[1]]));
    for (const [cap, rows] of /** @type {[number | null | undefined, [string, number][]][]} */ ([
      [caps.epsilon_per_day, today], [caps.epsilon_lifetime, life],
    ])) {
      if (cap == null) continue;
      const before = deviceTotal(rows, permanent);
      const after = deviceTotal([...rows, [charge.metric, charge.epsilon]], permanent);
      if (after > before && after > cap * (1 + EPSILON_SLACK)) return "device_budget";
    }
  }
  return null;
}

/** Add (or refund, with negative numbers) a charge; old days are pruned.
 *  @param {LedgerState} state @param {Charge} charge @param {number} sign */
export function apply(state, charge, sign = 1) {
  const days = (state.days[charge.metric] ??= {});
  const row = (days[charge.day] ??= [0, 0]);
  row[0] += sign;
  row[1] += sign * charge.epsilon;
  const life = (state.lifetime[charge.metric] ??= [0, 0, charge.day]);
  life[0] += sign;
  life[1] += sign * charge.epsilon;
  if (charge.day < life[2]) life[2] = charge.day;
  if (charge.permanent !== null) state.permanent[charge.metric] = charge.permanent;
  if (sign > 0 && row[0] === 1) { // a new day of this metric: forget days long past
    const oldest = dayOf(Date.parse(`${charge.day}T00:00:00Z`) - KEEP_DAYS * 86_400_000);
    for (const d of Object.keys(days)) if (d < oldest) delete days[d];
  }
}

/** The stricter of two caps, cap by cap. @param {DeviceCaps | null | undefined} a
 *  @param {DeviceCaps | null | undefined} b @returns {DeviceCaps | null} */
export function stricter(a, b) {
  if (!a) return b ?? null;
  if (!b) return a;
  const least = (/** @type {any} */ x, /** @type {any} */ y) => (x == null ? y : y == null ? x : Math.min(x, y));
  return {
    epsilon_per_day: least(a.epsilon_per_day, b.epsilon_per_day),
    epsilon_lifetime: least(a.epsilon_lifetime, b.epsilon_lifetime),
  };
}
