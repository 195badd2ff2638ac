// The browser client against a fake collector (a fetch function): batching, retries that
// honour Retry-After, the ledger's refusals, retirement, bundled definitions, the opt-out,
// a reload with reports still queued, and the pagehide flush.

import { test, mock } from "node:test";
import assert from "node:assert/strict";

import { Client, MemoryStorage, backoffDelay, classify, parseRetryAfter } from "../src/index.js";

const DAY = 86_400_000;
const T0 = Date.parse("2026-11-26T12:00:00Z"); // a Thursday

const theme = {
  name: "app.theme", version: 1, kind: "categorical", domain: ["light", "dark", "auto"],
  mechanism: { mechanism: "grr", epsilon: 1.0, domain_size: 3 }, budget: null,
};
const limited = { ...theme, name: "app.limited", budget: { reports_per_period: 2, period: "day" } };
const memo = {
  name: "app.lang", version: 2, kind: "categorical", domain: ["en", "de"],
  mechanism: { mechanism: "memo-grr", epsilon: 1.0, domain_size: 2, permanent_epsilon: 4.0 },
  budget: { reports_per_period: 5, period: "day" },
};
const minutes = {
  name: "session.minutes", version: 1, kind: "numeric", range: [0, 120],
  mechanism: { mechanism: "hybrid", epsilon: 1.0 }, budget: null,
};

/** A fake collector: answers definitions and ingests, records every request. */
function collector(definitions = [theme, limited, memo, minutes], extra = {}) {
  const state = {
    online: true, posts: /** @type {any[]} */ ([]), ids: new Set(), keepalive: 0,
    /** @type {Response[]} */ script: [], retired: new Set(), deviceBudget: undefined,
    /** positions of the next batch not stored (a cluster shard down): a 503 lists them */
    later: /** @type {number[]} */ ([]),
    ...extra,
  };
  /** @param {string} url @param {RequestInit} [init] */
  const fetch = async (url, init) => {
    if (!state.online) throw new TypeError("Failed to fetch");
    const u = new URL(url);
    if (!init || init.method !== "POST") {
      const name = decodeURIComponent(u.pathname.split("/").pop() ?? "");
      const d = definitions.find((x) => x.name === name);
      if (!d) return new Response('{"error":"unknown"}', { status: 404 });
      const version = u.searchParams.get("version");
      if (version && Number(version) !== d.version) return new Response("{}", { status: 404 });
      return Response.json({
        ...d, device_budget: state.deviceBudget ?? null,
        ...(state.retired.has(name) ? { retired_at: "2026-11-26T00:00:00Z" } : {}),
      });
    }
    if (init.keepalive) state.keepalive++;
    const scripted = state.script.shift();
    if (scripted) return scripted;
    const body = JSON.parse(String(init.body));
    state.posts.push(body);
    let accepted = 0, duplicates = 0;
    const rejected = [], retired = [], later = state.later.map((index) => ({ index, error: "shard down" }));
    state.later = [];
    body.reports.forEach((/** @type {any} */ r, /** @type {number} */ i) => {
      if (later.some((x) => x.index === i)) return;
      if (state.retired.has(r.metric)) { rejected.push({ index: i }); retired.push({ metric: r.metric }); return; }
      if (state.ids.has(r.id)) duplicates++; else { state.ids.add(r.id); accepted++; }
    });
    if (later.length) {
      const answer = { error: "storage cannot take them now", details: [], accepted, duplicates, rejected, retry: later };
      return Response.json(answer, { status: 503, headers: { "Retry-After": "2" } });
    }
    return Response.json({ accepted, duplicates, rejected, retired });
  };
  return { fetch, state };
}

const options = (/** @type {any} */ c, /** @type {any} */ more = {}) => ({
  fetch: c.fetch, storage: new MemoryStorage(), flushAt: 1000, now: () => T0, ...more,
});

test("classify, Retry-After and backoff as the Python uploader", () => {
  assert.equal(classify(200, null), "ok");
  assert.equal(classify(null, new Error()), "retry");
  for (const s of [408, 429, 500, 503]) assert.equal(classify(s, null), "retry");
  for (const s of [400, 401, 413, 501]) assert.equal(classify(s, null), "drop");
  assert.equal(parseRetryAfter("7", 0), 7000);
  assert.equal(parseRetryAfter(new Date(T0 + 5000).toUTCString(), T0), 5000);
  assert.equal(parseRetryAfter("soon", 0), null);
  assert.equal(backoffDelay(1, null, () => 0.5), 500);
  assert.equal(backoffDelay(2, null, () => 1), 2000);
  assert.equal(backoffDelay(3, null, () => 0), 30_000); // every third failure: a pause
  assert.equal(backoffDelay(1, 9000, () => 0.1), 9000); // Retry-After is a lower bound
  assert.equal(backoffDelay(1, 3_600_000, () => 0.1), 600_000); // capped
});

test("reports are perturbed, batched and each delivered once", async () => {
  const c = collector();
  const client = new Client("http://collector.test/", options(c, { maxBatchReports: 4 }));
  for (let i = 0; i < 10; i++) assert.equal(await client.report("app.theme", i % 3), true);
  assert.equal(await client.report("session.minutes", 37.5), true);
  assert.equal(await client.flush(), true);
  const reports = c.state.posts.flatMap((p) => p.reports);
  assert.equal(c.state.posts.length, 3);
  assert.equal(reports.length, 11);
  assert.equal(new Set(reports.map((r) => r.id)).size, 11);
  for (const r of reports.slice(0, 10)) assert.deepEqual(Object.keys(r), ["metric", "version", "id", "payload"]);
  assert.equal(typeof reports[10].payload.y, "number");
  const s = client.stats();
  assert.deepEqual([s.queued, s.sent, s.accepted, s.batches], [0, 11, 11, 3]);
});

test("a 503 with Retry-After is retried no sooner than it says", async () => {
  mock.timers.enable({ apis: ["setTimeout", "Date"], now: T0 });
  try {
    const c = collector();
    c.state.script.push(new Response("{}", { status: 503, headers: { "Retry-After": "20" } }));
    const client = new Client("http://collector.test", options(c, { random: () => 0, now: Date.now }));
    await client.report("app.theme", "dark");
    assert.equal(await client.flush(), false); // stays queued
    assert.equal(client.stats().retries, 1);
    mock.timers.tick(19_999);
    await new Promise((r) => setImmediate(r));
    assert.equal(c.state.posts.length, 0);
    mock.timers.tick(1);
    await client.uploading;
    await new Promise((r) => setImmediate(r));
    assert.equal(c.state.posts.length, 1);
    assert.equal(client.stats().queued, 0);
  } finally {
    mock.timers.reset();
  }
});

test("a 503 listing retry positions keeps only those, sent again once", async () => {
  mock.timers.enable({ apis: ["setTimeout", "Date"], now: T0 });
  try {
    const c = collector();
    c.state.later = [1, 3];
    const client = new Client("http://collector.test", options(c, { random: () => 0, now: Date.now }));
    for (let i = 0; i < 5; i++) await client.report("app.theme", i % 3);
    assert.equal(await client.flush(), false); // two stay queued
    const first = c.state.posts[0].reports.map((/** @type {any} */ r) => r.id);
    let s = client.stats();
    assert.deepEqual([s.queued, s.sent, s.accepted, s.retries, s.batches], [2, 3, 3, 1, 0]);
    mock.timers.tick(1_999);
    await new Promise((r) => setImmediate(r));
    assert.equal(c.state.posts.length, 1, "Retry-After holds");
    mock.timers.tick(1);
    await client.uploading;
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(c.state.posts[1].reports.map((/** @type {any} */ r) => r.id), [first[1], first[3]]);
    s = client.stats();
    assert.deepEqual([s.queued, s.sent, s.accepted, s.duplicates, s.batches], [0, 5, 5, 0, 1]);
    assert.equal(c.state.ids.size, 5);
  } finally {
    mock.timers.reset();
  }
});

test("a 429 is retried, a 400 drops the batch", async () => {
  const c = collector();
  const refusal = { error: "no valid report in the request", details: ["reports[0]: olh payload {'y': 5.0}: missing ['a', 'b']"],
    rejected: [{ index: 0, error: "olh payload {'y': 5.0}: missing ['a', 'b']", reason: "invalid" }] };
  c.state.script.push(new Response("{}", { status: 429 }), Response.json(refusal, { status: 400 }));
  const client = new Client("http://collector.test", options(c, { random: () => 0 }));
  await client.report("app.theme", 0);
  assert.equal(await client.flush(), false);
  assert.equal(client.stats().last_refusal, null, "a 429 is no refusal");
  assert.equal(await client.flush(), false, "the queue is empty, but its report was refused");
  assert.equal(client.stats().dropped.rejected, 1);
  // the collector's reason is kept for the app (and /ui/try) to show
  assert.equal(client.stats().last_refusal, "HTTP 400: olh payload {'y': 5.0}: missing ['a', 'b']");
  c.state.script.push(new Response('{"error":"bad","details":["why"]}', { status: 400 }));
  await client.report("app.theme", 0);
  await client.flush();
  assert.equal(client.stats().last_refusal, "HTTP 400: bad: why");
  await client.shutdown();
});

test("flush() is true only when everything was delivered: nothing queued, nothing dropped since the last flush", async () => {
  const c = collector();
  const client = new Client("http://collector.test", options(c));
  assert.equal(await client.flush(), true, "nothing made, nothing lost");
  assert.equal(await client.report("no.such", 0), false); // dropped on the device, before any upload
  assert.equal(await client.report("app.theme", 0), true);
  assert.equal(await client.flush(), false, "the queue is empty, but a report was dropped");
  assert.equal(c.state.ids.size, 1);
  assert.equal(await client.flush(), true, "nothing dropped since the previous flush");
  assert.equal(await client.report("app.theme", "purple"), false);
  assert.equal(await client.report("app.theme", 1), true);
  c.state.online = false;
  assert.equal(await client.flush(), false); // queued, and one dropped
  c.state.online = true;
  assert.equal(await client.flush(), true, "the drop was told once; the queued report is now delivered");
  assert.equal(c.state.ids.size, 2);
  const refusal = { error: "no valid report in the request", rejected: [{ index: 0, error: "bad", reason: "payload" }] };
  c.state.script.push(Response.json(refusal, { status: 400 }));
  assert.equal(await client.report("app.theme", 2), true);
  assert.equal(await client.shutdown(), false, "shutdown() flushes: the collector refused the report");
  assert.deepEqual(client.stats().dropped, { ...client.stats().dropped, unknown_metric: 1, invalid_value: 1, rejected: 1 });
});

test("a 413 halves the batch until one report is left, which is dropped as too_large", async () => {
  const c = collector();
  const tooLarge = () => Response.json({ error: "request too large" }, { status: 413 });
  c.state.script.push(tooLarge(), tooLarge(), tooLarge());
  const client = new Client("http://collector.test", options(c, { maxBatchReports: 4 }));
  for (let i = 0; i < 4; i++) assert.equal(await client.report("app.theme", i % 3), true);
  assert.equal(await client.flush(), false); // 4 refused, then 2, then 1: dropped; 3 sent one by one
  const s = client.stats();
  assert.deepEqual([s.dropped.too_large, s.dropped.rejected, s.sent, c.state.posts.length], [1, 0, 3, 3]);
  assert.equal(s.last_refusal, "HTTP 413: request too large");
});

test("the metric's budget and the device's caps refuse reports", async () => {
  const c = collector();
  let now = T0;
  const client = new Client("http://collector.test", options(c, { now: () => now, deviceBudget: { epsilon_per_day: 3.5 } }));
  assert.equal(await client.report("app.limited", 0), true);
  assert.equal(await client.report("app.limited", 1), true);
  assert.equal(await client.report("app.limited", 2), false);
  assert.equal(client.stats().dropped.budget, 1);
  assert.equal(await client.report("app.theme", 0), true); // 3 ε today
  assert.equal(await client.report("app.theme", 0), false); // 4 > 3.5
  assert.equal(client.stats().dropped.device_budget, 1);
  now += DAY; // a new UTC day: both allow again
  assert.equal(await client.report("app.limited", 0), true);
  const p = client.privacy();
  assert.equal(p.metrics["app.limited"].lifetime.reports, 3);
  assert.equal(p.metrics["app.limited"].budget.remaining_reports, 1);
});

test("a memoized metric counts at most ε∞ towards the device cap, with a kept secret", async () => {
  const c = collector();
  const place = {};
  const client = new Client("http://collector.test", options(c, { storage: new MemoryStorage(place), deviceBudget: { epsilon_per_day: 4.5 } }));
  for (let i = 0; i < 5; i++) assert.equal(await client.report("app.lang", "de"), true); // 5 ε, counts 4
  assert.equal(await client.report("app.limited", 0), false); // 4 + 1 > 4.5
  const secret = /** @type {any} */ (place).state.get("secret");
  assert.equal(secret.length, 32);
  const again = new Client("http://collector.test", options(c, { storage: new MemoryStorage(place) }));
  await again.ready;
  assert.deepEqual(again.secret, secret);
});

test("offline reports survive a reload and are counted exactly once", async () => {
  const c = collector();
  const place = {};
  const first = new Client("http://collector.test", options(c, { storage: new MemoryStorage(place) }));
  assert.equal(await first.report("app.theme", 1), true); // fetches the definition
  c.state.online = false;
  for (let i = 0; i < 5; i++) assert.equal(await first.report("app.theme", i % 3), true);
  assert.equal(await first.flush(), false);
  // the page reloads while offline; the definition is fetched again once online
  const second = new Client("http://collector.test", options(c, { storage: new MemoryStorage(place) }));
  await second.ready;
  assert.equal(second.stats().queued, 6);
  c.state.online = true;
  assert.equal(await second.flush(), true);
  assert.equal(c.state.ids.size, 6);
  const third = new Client("http://collector.test", options(c, { storage: new MemoryStorage(place) }));
  await third.ready;
  assert.equal(third.stats().queued, 0);
});

test("a retired metric's reports are dropped and it is no longer reported", async () => {
  const c = collector();
  const client = new Client("http://collector.test", options(c));
  await client.report("app.theme", 0);
  c.state.retired.add("app.theme");
  assert.equal(await client.flush(), false);
  assert.equal(client.stats().dropped.retired, 1);
  assert.equal(await client.report("app.theme", 0), false);
  assert.equal(client.stats().dropped.retired, 2);
});

test("reports made with a bundled definition the collector lacks are dropped", async () => {
  const served = { ...theme, mechanism: { ...theme.mechanism, epsilon: 2.0 } };
  const c = collector([served]);
  c.state.online = false;
  const client = new Client("http://collector.test", options(c, { definitions: [theme] }));
  assert.equal(await client.report("app.theme", "dark"), true); // unreachable: the bundled one
  c.state.online = true;
  assert.equal(await client.flush(), false);
  assert.equal(client.stats().dropped.bundle_mismatch, 1);
  assert.equal(c.state.posts.length, 0);
});

test("unknown metrics and invalid values are refused, never thrown", async () => {
  const c = collector();
  const client = new Client("http://collector.test", options(c));
  assert.equal(await client.report("no.such", 0), false);
  assert.equal(await client.report("app.theme", "purple"), false);
  assert.equal(await client.report("session.minutes", 500), false);
  const d = client.stats().dropped;
  assert.deepEqual([d.unknown_metric, d.invalid_value], [1, 2]);
});

test("disable() wipes the queue and the secret, refunds unsent charges, and sticks", async () => {
  const c = collector();
  const place = {};
  const client = new Client("http://collector.test", options(c, { storage: new MemoryStorage(place) }));
  await client.report("app.lang", "en");
  await client.report("app.limited", 0);
  assert.equal(await client.disable(), true);
  assert.equal(client.stats().queued, 0);
  assert.equal(client.privacy().metrics["app.limited"].lifetime.reports, 0);
  assert.equal(/** @type {any} */ (place).state.get("secret"), null);
  assert.equal(await client.report("app.theme", 0), false);
  const again = new Client("http://collector.test", options(c, { storage: new MemoryStorage(place) }));
  assert.equal(await again.report("app.theme", 0), false);
  assert.equal(again.stats().dropped.disabled, 1);
});

test("pagehide sends what is queued with keepalive", async () => {
  const page = new EventTarget(); // Node has no window: play one
  const g = /** @type {any} */ (globalThis);
  g.addEventListener = page.addEventListener.bind(page);
  g.removeEventListener = page.removeEventListener.bind(page);
  g.dispatchEvent = page.dispatchEvent.bind(page);
  const c = collector();
  const client = new Client("http://collector.test", options(c));
  await client.report("app.theme", 0);
  await client.report("app.theme", 2);
  globalThis.dispatchEvent(new Event("pagehide"));
  await new Promise((r) => setImmediate(r));
  assert.equal(c.state.keepalive, 1);
  assert.equal(c.state.ids.size, 2);
  await client.shutdown(); // resends; the collector counts duplicates, not new reports
  assert.equal(c.state.ids.size, 2);
  assert.equal(await client.report("app.theme", 0), false);
  delete g.addEventListener;
  delete g.removeEventListener;
  delete g.dispatchEvent;
});

test("dimensions: sent in the clear beside the payload; bad ones dropped before any charge", async () => {
  const byPlatform = {
    ...theme,
    name: "app.theme.by_platform",
    dimensions: [{ name: "platform", values: ["ios", "android", "web"] }],
  };
  const c = collector([byPlatform]);
  const client = new Client("http://collector.test", options(c));
  await client.ready;
  assert.equal(await client.report("app.theme.by_platform", "dark", { platform: "web" }), true);
  assert.equal(await client.report("app.theme.by_platform", "dark", { platform: "symbian" }), false);
  assert.equal(await client.report("app.theme.by_platform", "dark"), false);
  assert.equal(await client.report("app.theme.by_platform", "dark", { platform: "ios", device: "x" }), false);
  assert.equal(client.stats().dropped.invalid_dimensions, 3);
  assert.equal(await client.flush(), false); // three dropped
  const sent = c.state.posts.flatMap((/** @type {any} */ b) => b.reports);
  assert.equal(sent.length, 1);
  assert.deepEqual(sent[0].dimensions, { platform: "web" });
});

test("a loop of reports is stored while it runs, in transactions of at most 100 reports", async () => {
  // Chromium's scheduler.yield() resumes a loop before the page's timers: played here by a
  // yield that never lets a timer run. A commit left to a timer then stored the whole loop
  // in one transaction, one task (a long task for a large loop).
  const g = /** @type {any} */ (globalThis);
  g.scheduler = { yield: () => Promise.resolve() };
  try {
    const sizes = /** @type {number[]} */ ([]);
    const place = {};
    const storage = new MemoryStorage(place);
    const change = storage.change.bind(storage);
    storage.change = (fn, count) => change((state, entries) => {
      const c = fn(state, entries);
      const added = c?.put?.filter((e) => !("key" in e)).length; // stored, not marked sent
      if (added) sizes.push(added);
      return c;
    }, count);
    const c = collector();
    const client = new Client("http://collector.test", options(c, { storage }));
    // Report until three transactions have been stored, however fast the machine (a slice
    // is 10 ms of the loop); the old commit, left to a timer, stored nothing meanwhile.
    let n = 0;
    while (sizes.length < 3 && n < 5_000) { assert.equal(await client.report("app.theme", n % 3), true); n++; }
    assert.ok(sizes.length >= 3, `reports are stored while the loop runs, not after it (${n} made, none stored)`);
    assert.equal(await client.flush(), true);
    assert.equal(sizes.reduce((a, b) => a + b, 0), n);
    assert.ok(Math.max(...sizes) <= 100, `transactions of ${Math.max(...sizes)} reports`);
    assert.equal(c.state.ids.size, n);
  } finally {
    delete g.scheduler;
  }
});

test("the wire: an OLH report keeps its a and b, a numeric y is a float literal, dimensions go in declared order", async () => {
  // Issue 35: a payload with a y was taken for a numeric one and sent as {"y": 5.0}, so the
  // collector refused every OLH, BLH and joint-OLH report; and a dimension named "10" was
  // sent before one declared ahead of it (a JS object puts integer-like keys first).
  const { buildReport, encodeReport } = await import("../src/wire.js");
  const olh = {
    name: "app.page", version: 3, kind: "categorical", domain: Array.from({ length: 300 }, (_, i) => `p${i}`),
    mechanism: { mechanism: "olh", epsilon: 1.0, domain_size: 300 }, budget: null,
    dimensions: [{ name: "zone", values: ["eu"] }, { name: "10", values: ["x"] }],
  };
  const report = await buildReport(olh, 42, { id: "0".repeat(32), dimensions: { 10: "x", zone: "eu" } });
  const text = encodeReport(report, olh);
  const { a, b, y } = report.payload;
  assert.equal(text, `{"metric":"app.page","version":3,"id":"${"0".repeat(32)}","payload":{"a":${a},"b":${b},"y":${y}},"dimensions":{"zone":"eu","10":"x"}}`);
  const numeric = await buildReport(minutes, 60, { id: "1".repeat(32) });
  numeric.payload.y = 2; // a numeric y that happens to be whole is still a float on the wire
  assert.match(encodeReport(numeric, minutes), /"payload":\{"y":2\.0\}\}$/);
});

test("three tabs sharing a stored queue post each stored report once (the lease, where Web Locks are missing)", async () => {
  // Issue 35: every open tab posted the whole stored queue (100 stored, two tabs: 200 posts).
  const c = collector();
  const place = {};
  const tab = () => new Client("http://collector.test", options(c, { storage: new MemoryStorage(place) }));
  const first = tab();
  await first.definition("app.theme");
  c.state.online = false;
  for (let i = 0; i < 100; i++) assert.equal(await first.report("app.theme", i % 3), true);
  assert.equal(await first.flush(), false);
  const tabs = [first, tab(), tab()];
  await Promise.all(tabs.map((t) => t.ready));
  assert.deepEqual(tabs.map((t) => t.stats().queued), [100, 100, 100]);
  c.state.online = true;
  assert.deepEqual(await Promise.all(tabs.map((t) => t.flush())), [true, true, true]);
  const posted = c.state.posts.flatMap((p) => p.reports.map((/** @type {any} */ r) => r.id));
  assert.equal(new Set(posted).size, 100);
  assert.equal(posted.length, 100, "each stored report posted once");
  assert.deepEqual(tabs.map((t) => t.stats().queued), [0, 0, 0]);
  for (const t of tabs) await t.shutdown();
});

test("a tab that dies holding the lease holds the queue until the lease ends, then another sends", async () => {
  const { LEASE_MS } = await import("../src/tabs.js");
  const c = collector();
  const place = {};
  let now = T0;
  const storage = new MemoryStorage(place);
  const client = new Client("http://collector.test", options(c, { storage, now: () => now }));
  assert.equal(await client.report("app.theme", 1), true);
  await client._commitSoon(true);
  await storage.change(() => ({ state: { sender: { owner: "a tab that died", expires: now + LEASE_MS } } }));
  const flushed = client.flush(); // waits its turn
  await new Promise((r) => setTimeout(r, 600));
  assert.equal(c.state.posts.length, 0, "another tab holds the lease");
  now += LEASE_MS;
  assert.equal(await flushed, true);
  assert.equal(c.state.posts.length, 1);
  assert.ok(/** @type {any} */ (place).state.get("sender").expires <= now, "released after sending");
  await client.shutdown();
});

test("two tabs charging one budget: the stored ledger refuses what the other tab spent", async () => {
  // Issue 35: each tab saved its own copy of the ledger over the shared one, so two tabs
  // spent a budget twice (and a third tab three times).
  const c = collector();
  const place = {};
  const tab = () => new Client("http://collector.test", options(c, { storage: new MemoryStorage(place), deviceBudget: { epsilon_per_day: 3 } }));
  const [a, b] = [tab(), tab()];
  await Promise.all([a.ready, b.ready]); // both loaded an empty ledger
  assert.equal(await a.report("app.limited", 0), true);
  assert.equal(await a.report("app.limited", 1), true);
  await a._commitSoon(true);
  // b's ledger still says nothing was spent: it admits the report, the storage refuses it
  assert.equal(await b.report("app.limited", 0), true);
  await b._commitSoon(true);
  assert.equal(b.stats().dropped.budget, 1);
  assert.equal(b.stats().reported, 0);
  assert.equal(b.privacy().metrics["app.limited"].period.reports, 2, "b now reads the stored ledger");
  assert.equal(await b.report("app.limited", 0), false);
  assert.equal(b.stats().dropped.budget, 2);
  // the device's daily cap (3 ε) likewise: a's one more is the last
  assert.equal(await a.report("app.theme", 0), true);
  await a._commitSoon(true);
  b.ledger = { days: {}, lifetime: {}, permanent: {} }; // as stale as a ledger can be
  assert.equal(await b.report("app.theme", 0), true);
  await b._commitSoon(true);
  assert.equal(b.stats().dropped.device_budget, 1);
  assert.equal(await a.flush(), true);
  assert.equal(c.state.ids.size, 3, "two reports of app.limited and one of app.theme in all");
  for (const t of [a, b]) await t.shutdown();
});

test("disable() in one tab wipes every tab's stored reports and stops the others", async () => {
  const c = collector();
  const place = {};
  const tab = () => new Client("http://collector.test", options(c, { storage: new MemoryStorage(place) }));
  const [a, b] = [tab(), tab()];
  await Promise.all([a.ready, b.ready]);
  assert.equal(await b.report("app.limited", 0), true);
  assert.equal(await b.report("app.theme", 1), true);
  await b._commitSoon(true);
  assert.equal(await a.disable(), true);
  assert.equal(/** @type {any} */ (place).entries.size, 0, "b's reports wiped too");
  assert.equal(a.stats().dropped.disabled, b.stats().reported);
  assert.equal(a.privacy().metrics["app.limited"].lifetime.reports, 0, "refunded: never sent");
  // b reads the opt-out in the storage (before any news of it) ...
  assert.equal(await b.report("app.theme", 0), true); // its cached state: not yet told
  await b._commitSoon(true);
  assert.equal(b.disabled, true);
  assert.equal(await b.report("app.theme", 0), false);
  assert.equal(await b.flush(), false); // b's reports were dropped, as disabled
  assert.equal(c.state.posts.length, 0, "nothing sent after the opt-out");
  // ... and is told of an opt-in
  assert.equal(await a.enable(), true);
  while (b.disabled) await new Promise((r) => setTimeout(r, 5)); // the BroadcastChannel's news
  assert.equal(await b.report("app.theme", 0), true);
  for (const t of [a, b]) await t.shutdown();
});

test("the upload backoff is the origin's: a tab that sends next waits for what another tab's failure set", async () => {
  const c = collector();
  const place = {};
  let now = T0;
  const tab = () => new Client("http://collector.test", options(c, { storage: new MemoryStorage(place), now: () => now, random: () => 0 }));
  const [a, b] = [tab(), tab()];
  await Promise.all([a.ready, b.ready]);
  assert.equal(await a.report("app.theme", 0), true);
  c.state.script.push(new Response("{}", { status: 503, headers: { "Retry-After": "20" } }));
  assert.equal(await a.flush(), false);
  assert.deepEqual(/** @type {any} */ (place).state.get("retry"), { at: T0 + 20_000, failures: 1 });
  await b._upload(); // b's timer: the stored backoff holds it back
  assert.equal(c.state.posts.length, 0);
  assert.equal(b.failures, 1);
  now += 20_000;
  await b._upload();
  assert.equal(c.state.posts.length, 1, "due now: b sends what a stored");
  assert.equal(/** @type {any} */ (place).state.get("retry"), null, "and the backoff starts over");
  for (const t of [a, b]) await t.shutdown();
});
