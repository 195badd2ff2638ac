// The browser client: report() perturbs on the page, charges the ledger and queues the
// report in one step; an uploader sends batches with retries (backoff honouring
// Retry-After, shared by the origin's tabs), and a last flush goes out on pagehide.
// Mirrors client_sdk/client.py and client_sdk/uploader.py; reasons for dropping a report
// are the Python SDK's.

import { buildReport, checkDimensions, encodeBatch, encodeReport } from "./wire.js";
import { Rng, cryptoBytes } from "./randomness.js";
import { apply, chargeOf, dayOf, emptyLedger, periodStart, refusal, spent, stricter } from "./ledger.js";
import { defaultStorage } from "./storage.js";
import { Tabs } from "./tabs.js";

export const RETRY_BASE = 1_000;
export const RETRY_CAP = 30_000;
export const FAILURES_PER_RUN = 3;
export const RETRY_AFTER_CAP = 600_000;
const SLICE_MS = 10; // well below the 50 ms of a long task
const COMMIT_MAX = 100; // reports per storage transaction: its structured clones, ~2 ms, are one task
/** @type {MessageChannel | null} */
let channel = null;
const KEEPALIVE_LIMIT = 60_000; // browsers refuse keepalive bodies beyond 64 KiB in flight

export const DROP_REASONS = /** @type {const} */ ([
  "unknown_metric", "invalid_value", "invalid_dimensions", "unreachable", "queue_full", "rejected", "too_large",
  "shutdown", "internal_error", "budget", "device_budget", "disabled", "storage_error",
  "retired", "bundle_mismatch",
]);
/** @typedef {typeof DROP_REASONS[number]} DropReason */

/** ok / retry / drop for an upload's outcome (uploader.classify).
 *  @param {number | null} status @param {unknown} error */
export function classify(status, error) {
  if (error != null || status == null) return "retry";
  if (status >= 200 && status < 300) return "ok";
  if (status === 408 || status === 429 || (status >= 500 && status < 600 && status !== 501)) return "retry";
  return "drop";
}

/** Milliseconds to wait from a Retry-After header, or null. @param {string | null} value
 *  @param {number} nowMs */
export function parseRetryAfter(value, nowMs) {
  if (value == null) return null;
  const v = value.trim();
  if (/^[0-9]+$/.test(v)) return Number(v) * 1000;
  const when = Date.parse(v);
  return Number.isNaN(when) ? null : Math.max(0, when - nowMs);
}

/** The wait after ``failures`` recoverable failures in a row (full jitter; a pause of
 *  RETRY_CAP every third; Retry-After, capped, a lower bound). @param {number} failures
 *  @param {number | null} retryAfter @param {() => number} random */
export function backoffDelay(failures, retryAfter, random) {
  let delay = failures % FAILURES_PER_RUN === 0
    ? RETRY_CAP
    : random() * Math.min(RETRY_CAP, RETRY_BASE * 2 ** Math.min(failures - 1, 16));
  if (retryAfter != null) delay = Math.max(delay, Math.min(retryAfter, RETRY_AFTER_CAP));
  return delay;
}

/** Why the collector refused reports of a batch, from its answer: the first rejected
 *  report's error, else the answer's error and first detail (``stats().last_refusal``).
 *  @param {number | null} status @param {any} answer */
function refusalOf(status, answer) {
  const why = answer?.rejected?.find?.((/** @type {any} */ r) => r?.error)?.error
    ?? [answer?.error, answer?.details?.[0]].filter((x) => typeof x === "string").join(": ");
  return `HTTP ${status}${why ? `: ${why}` : ""}`.slice(0, 500);
}

/** ``x`` if it is an array, else an empty one (an answer's lists). @param {any} x @returns {any[]} */
const list = (x) => (Array.isArray(x) ? x : []);

/** The positions (``index``) an answer's list names in a batch of ``size`` (others passed
 *  over): ``rejected``, refused for good; ``retry``, not stored now. @param {any} items
 *  @param {number} size @returns {Set<number>} */
const positions = (items, size) => new Set(list(items).map((r) => r?.index)
  .filter((i) => Number.isInteger(i) && i >= 0 && i < size));

const unreachable = () => Object.assign(new Error("unreachable"), { reason: "unreachable" });

/** JSON with sorted keys, to compare parameters. @param {any} x @returns {string} */
const canonical = (x) => Array.isArray(x) ? `[${x.map(canonical).join(",")}]`
  : x && typeof x === "object" ? `{${Object.keys(x).sort().map((k) => `${JSON.stringify(k)}:${canonical(x[k])}`).join(",")}}`
    : JSON.stringify(x);

/**
 * @typedef {object} ClientOptions
 * @property {any[]} [definitions]  definitions shipped with the app, used until fetched
 * @property {import("./storage.js").Storage} [storage]  default: IndexedDB, else memory
 * @property {typeof fetch} [fetch]
 * @property {number} [flushAt]  queued reports that trigger an upload (20)
 * @property {number} [flushInterval]  ms after which queued reports are sent anyway (10 s)
 * @property {number} [maxBatchReports]  reports per request (100)
 * @property {number} [maxQueue]  reports kept at most (10,000)
 * @property {number} [metricsTtl]  ms a fetched definition is used (1 h)
 * @property {import("./ledger.js").DeviceCaps} [deviceBudget]
 * @property {() => number} [now]  wall clock in ms
 * @property {() => number} [random]  jitter of the backoff
 * @property {Rng} [rng]  the perturbation's randomness (tests); default the CSPRNG
 * @property {string} [ingestKey]  the app's ingest key (public, shipped in the app): sent as
 *   ``Authorization: Bearer <key>`` with every definition fetch and upload, inside the
 *   sealed request with a relay (never to the relay); it picks the metrics' project
 * @property {{fetch(url: string, init: any): Promise<Response>, prepare?(url: string): void}} [relay]  send the reports
 *   and the definition fetches through an Oblivious HTTP relay: a ``Relay`` of
 *   ``ldp-telemetry-client/ohttp`` (only its key fetches reach the collector directly)
 */

export class Client {
  /** @param {string} url  the collector's base URL @param {ClientOptions} [options] */
  constructor(url, options = {}) {
    this.url = url.replace(/\/+$/, "");
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.relay = options.relay ?? null;
    const key = options.ingestKey;
    /** @type {Record<string, string>} */
    this._auth = key ? { Authorization: `Bearer ${key}` } : {};
    this.relay?.prepare?.(this.url); // its keys now, not just before a sealed upload
    this.storage = options.storage ?? defaultStorage();
    this._bundle = new Map((options.definitions ?? []).map((d) => [d.name, d]));
    this.flushAt = options.flushAt ?? 20;
    this.flushInterval = options.flushInterval ?? 10_000;
    this._maxBatch = options.maxBatchReports ?? 100;
    this.maxQueue = options.maxQueue ?? 10_000;
    this.ttl = options.metricsTtl ?? 3_600_000;
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
    this.rng = options.rng ?? new Rng(cryptoBytes());
    this._appCaps = options.deviceBudget ?? null;
    /** @type {import("./ledger.js").DeviceCaps | null} */
    this.caps = this._appCaps;
    /** @type {Map<string, {definition: any, expires: number, problem?: string}>} */
    this._cache = new Map();
    /** @type {Set<string>} */
    this.retired = new Set();
    /** @type {Map<string, boolean>} */
    this._vetted = new Map();
    /** @type {import("./storage.js").Entry[]} */
    this._queue = [];
    /** Reports made and charged here, not yet stored (see _commitSoon); the stored ledger
     *  is charged for them only as they are stored.
     *  @type {Omit<import("./storage.js").Entry, "key">[]} */
    this.pending = [];
    /** @type {Promise<void>} */
    this._storing = Promise.resolve();
    this._sliceStart = performance.now();
    /** @type {any} */ this._commitTimer = null;
    this.ledger = emptyLedger();
    /** @type {Uint8Array | null} */
    this.secret = null;
    this.disabled = false;
    this._closed = false;
    /** The origin's upload backoff, as stored: failures in a row, when the next is due. */
    this.failures = 0;
    this._retryAt = 0;
    /** @type {any} */ this._timer = null;
    /** @type {Promise<void> | null} */ this.uploading = null;
    this.counts = { reported: 0, sent: 0, accepted: 0, duplicates: 0, batches: 0, retries: 0 };
    /** @type {Record<DropReason, number>} */
    this.dropped = /** @type {any} */ (Object.fromEntries(DROP_REASONS.map((r) => [r, 0])));
    /** Reports dropped so far, and as many when flush() last returned. */
    this._drops = this._flushed = 0;
    /** @type {string | null} */ this._lastError = null;
    /** @type {string | null} */ this._lastRefusal = null;
    /** The other tabs of the origin that share the stored queue: one of them sends it. */
    this._tabs = new Tabs(this.storage, this.now, (news) => this._news(news));
    this.lock = this.ready = this._load();
    this._onPageHide = () => { this._lastFlush(); };
    globalThis.addEventListener?.("pagehide", this._onPageHide); // none in Node
  }

  async _load() {
    await this._reload();
    this._schedule(0); // what earlier pages (or other tabs) left stored
  }

  /** The stored queue and state, as every tab of the origin left them. */
  async _reload() {
    try {
      await this.storage.change((s, entries) => { this._adopt(s); this._queue = entries; }, Infinity);
    } catch (e) {
      this._error(e);
    }
  }

  /** Take the stored state as this tab's: the ledger (and the charges of the reports made
   *  here, not yet stored), the opt-out, the device secret and the upload backoff.
   *  @param {import("./storage.js").State} s */
  _adopt(s) {
    this.ledger = structuredClone(s.ledger ?? emptyLedger()); // never the one being stored
    for (const e of this.pending) apply(this.ledger, e.charge);
    this.disabled = Boolean(s.disabled);
    this.secret = s.secret ?? null;
    this.failures = s.retry?.failures ?? 0;
    this._retryAt = s.retry?.at ?? 0;
  }

  /** @param {unknown} e */
  _error(e) {
    this._lastError = String(/** @type {any} */ (e)?.name ?? e);
  }

  /** Run ``fn`` after every earlier call (reports, opt-outs): the ledger's checks and its
   *  charges never interleave. @template T @param {() => Promise<T>} fn @returns {Promise<T>} */
  _serial(fn) {
    const run = this.lock.then(fn, fn);
    this.lock = run.then(() => {}, () => {});
    return run;
  }

  /** The definition of ``metric``: fetched, cached for metricsTtl, stale while the
   *  collector is unreachable, the app's bundled one until first fetched.
   *  @param {string} metric @returns {Promise<any>} */
  async definition(metric) {
    const now = this.now();
    const cached = this._cache.get(metric);
    if (cached && now < cached.expires) {
      if (!cached.definition) throw Object.assign(new Error(cached.problem), { reason: "unknown_metric" });
      return cached.definition;
    }
    const stale = cached?.definition ?? this._bundle.get(metric) ?? null;
    let response;
    try {
      response = await this._get(`${this.url}/v1/metrics/${encodeURIComponent(metric)}`);
    } catch {
      if (stale) return stale;
      throw unreachable();
    }
    if (response.ok) {
      const data = await response.json();
      this._cache.set(metric, { definition: data, expires: now + this.ttl });
      if (data.retired_at) this.retired.add(metric); else this.retired.delete(metric);
      if (data.device_budget !== undefined) this.caps = stricter(this._appCaps, data.device_budget);
      return data;
    }
    if (response.status === 404) {
      this._cache.set(metric, { definition: null, expires: now + this.ttl, problem: `unknown metric ${metric}` });
      throw Object.assign(new Error("unknown"), { reason: "unknown_metric" });
    }
    if (stale) return stale;
    throw unreachable();
  }

  /** @param {DropReason} reason */
  _drop(reason, n = 1) {
    this.dropped[reason] += n;
    this._drops += n;
    return false;
  }

  /**
   * Perturb ``value`` on the page and queue the perturbed report. Never throws.
   * @param {string} metric @param {string | number} value
   * @param {Record<string, string>} [dimensions] the metric's public dimensions, e.g.
   *   ``{platform: "web"}``: sent in the clear, NOT protected by ε
   * @returns {Promise<boolean>} whether it was queued and charged to this tab's ledger (the
   *   storage charges it an instant later, see _store); else counted in ``stats().dropped``
   *   by reason
   */
  report(metric, value, dimensions) {
    return this._serial(async () => {
      await this._breathe();
      try {
        if (this._closed) return this._drop("shutdown");
        if (this.disabled) return this._drop("disabled");
        let definition;
        try {
          definition = await this.definition(metric);
        } catch (e) {
          return this._drop(this.retired.has(metric) ? "retired" : /** @type {any} */ (e).reason ?? "unreachable");
        }
        if (this.retired.has(metric)) return this._drop("retired");
        try {
          checkDimensions(definition, dimensions);
        } catch {
          return this._drop("invalid_dimensions");
        }
        const charge = chargeOf(definition, this.now());
        const why = refusal(this.ledger, charge, this.caps);
        if (why) return this._drop(why);
        if (this._queue.length + this.pending.length >= this.maxQueue) return this._drop("queue_full");
        const secret = definition.mechanism.permanent_epsilon ? await this._secret() : undefined;
        if (secret === null) return this._drop("disabled"); // by another tab
        let report;
        try {
          report = await buildReport(definition, value, { rng: this.rng, secret, dimensions });
        } catch {
          return this._drop("invalid_value");
        }
        const entry = {
          data: encodeReport(report, definition),
          metric,
          bundled: definition === this._bundle.get(metric) ? definition.version : 0,
          attempted: false,
          charge,
        };
        apply(this.ledger, charge);
        this.pending.push(entry);
        this.counts.reported++;
        this._commitSoon();
        return true;
      } catch (e) {
        this._error(e);
        return this._drop("internal_error");
      }
    });
  }

  /** Store the reports made since the last commit, with the ledger, in transactions of
   *  COMMIT_MAX (one IndexedDB commit costs about a millisecond; a report about 50 µs): at
   *  the end of the current task, when report() yields the main thread, or at once on
   *  pagehide. */
  _commitSoon(now = false) {
    if (now) return this._commit();
    if (!this._commitTimer) {
      this._commitTimer = setTimeout(() => { this._commitTimer = null; this._commit(); }, 0);
      this._commitTimer?.unref?.();
    }
    return this._storing;
  }

  /** Store what is pending now (after every earlier commit), COMMIT_MAX reports a
   *  transaction, each in a task of its own; resolves when stored. */
  _commit() {
    for (let n = this.pending.length; n > 0; n -= COMMIT_MAX) this._storing = this._storing.then(() => this._store());
    return this._storing;
  }

  /** Store the oldest COMMIT_MAX pending reports with their charges, in one transaction
   *  that checks each charge against the ledger as stored, which every tab of the origin
   *  charges: a report another tab's charges made over budget since report() admitted it
   *  here is dropped then, never stored. */
  async _store() {
    const entries = this.pending.slice(0, COMMIT_MAX);
    if (!entries.length) return;
    const done = new Set(entries);
    const unpend = () => { this.pending = this.pending.filter((e) => !done.has(e)); };
    /** @type {(DropReason | null)[]} */ let why = [];
    try {
      const keys = await this.storage.change((s) => {
        const ledger = (s.ledger ??= emptyLedger());
        why = entries.map((e) => (s.disabled ? "disabled" : refusal(ledger, e.charge, this.caps) ?? (apply(ledger, e.charge), null)));
        unpend(); // charged in the stored ledger from now on, or nowhere
        this._adopt(s);
        return { put: entries.filter((e, i) => !why[i]), state: { ledger } };
      });
      const known = new Set(this._queue.map((e) => e.key)); // a reload may have read them already
      entries.filter((e, i) => !why[i]).forEach((e, i) => { if (!known.has(keys[i])) this._queue.push({ ...e, key: keys[i] }); });
    } catch {
      unpend();
      entries.forEach((e, i) => { if (!why[i]) apply(this.ledger, e.charge, -1); }); // never stored: refunded
      why = entries.map(() => "storage_error");
    }
    for (const reason of why) if (reason) { this.counts.reported--; this._drop(reason); }
    this._schedule(this._queue.length >= this.flushAt ? 0 : this.flushInterval);
  }

  /** Give the page's main thread back every SLICE_MS: an app awaiting report() in a
   *  loop runs as one chain of microtasks, which would otherwise be one long task. */
  async _breathe() {
    const now = performance.now();
    if (now - this._sliceStart < SLICE_MS) return;
    // Store this slice's reports now: a task that yields before its timers run (as
    // scheduler.yield does) would otherwise pile a whole loop's reports into one commit.
    if (this.pending.length) this._commit();
    const g = /** @type {any} */ (globalThis);
    if (g.scheduler?.yield) await g.scheduler.yield();
    else {
      // a message to ourselves: a new task without setTimeout's 4 ms clamp
      channel ??= new MessageChannel();
      const port = /** @type {any} */ (channel.port1);
      await new Promise((r) => {
        port.onmessage = () => { port.unref?.(); r(undefined); }; // Node: never hold the process
        port.ref?.();
        channel?.port2.postMessage(0);
      });
    }
    this._sliceStart = performance.now();
  }

  /** The device secret of memoized responses: the one every tab of the origin uses, made
   *  (CSPRNG) by the first that needs it, in the transaction that finds none stored; null
   *  once the user opted out (in any tab). */
  async _secret() {
    if (!this.secret) {
      /** @type {Uint8Array | null} */ let made = null;
      await this.storage.change((s) => {
        this._adopt(s);
        if (!s.disabled && !s.secret) return { state: { secret: (made = globalThis.crypto.getRandomValues(new Uint8Array(32))) } };
      });
      this.secret ??= made;
    }
    return this.disabled ? null : this.secret;
  }

  /** Upload this tab's queue after ``delay`` ms (0: now), unless one is already due.
   *  @param {number} delay */
  _schedule(delay) {
    if (this._closed || !this._queue.length || (this._timer && delay > 0)) return;
    this._uploadIn(delay);
  }

  /** The one upload timer, (re)set to ``delay`` ms: an upload then, or after the one under
   *  way (which may have set this timer before it ended). @param {number} delay */
  _uploadIn(delay) {
    clearTimeout(this._timer);
    this._timer = setTimeout(async () => { this._timer = null; await this.uploading; this._upload(); }, delay);
    this._timer?.unref?.();
  }

  /** Send every queued report now, whatever the backoff; resolves with whether everything
   *  was delivered: true when the queue is empty and no report was dropped, for any reason
   *  (``stats().dropped``), since the previous flush() returned (or since the client was
   *  made). False when uploads failed (the reports stay queued and are retried) or some
   *  were dropped: ``stats()`` says why. The Python and JVM SDKs' contract. */
  async flush() {
    await this.lock;
    await this._commitSoon(true);
    clearTimeout(this._timer);
    this._timer = null;
    await this.uploading; // one under way first
    await this._drain(true);
    const clean = this._drops === this._flushed;
    this._flushed = this._drops;
    return clean && !this._queue.length;
  }

  _upload() {
    this.uploading ??= this._drain(false).finally(() => { this.uploading = null; });
    return this.uploading;
  }

  /** Send the stored queue as the origin's one sender (src/tabs.js): every tab of the
   *  origin shares it, and whichever holds the lock reads it afresh and sends it all, once
   *  the origin's backoff allows (``force``: at once). @param {boolean} force */
  async _drain(force) {
    await this._storing;
    if (!this._closed) await this._tabs.exclusive((renew) => this._send(renew, force));
  }

  /** What another tab of the origin told: reports it removed (sent or dropped), that it
   *  closed with reports stored (sent here then), or that it changed the stored state (an
   *  opt-out: its queue wiped). @param {import("./tabs.js").News} news */
  _news(news) {
    if (news.type === "removed") this._unqueue(news.keys);
    else if (news.type === "flush") this._uploadIn(1_000); // after its last IndexedDB commit; the backoff holds
    else if (news.type === "state") this._serial(() => this._reload());
  }

  /** Send batches of the stored queue until it is empty, an upload fails, the user opts
   *  out, or (unless ``force``) the origin's backoff says wait: each batch is read afresh
   *  from the storage and marked sent in one transaction, which also reads the opt-out and
   *  the backoff every tab's failures set. @param {() => Promise<void>} renew
   *  @param {boolean} force */
  async _send(renew, force) {
    await this._reload();
    while (!this._closed) {
      /** @type {import("./storage.js").Entry[]} */ const batch = [];
      /** @type {import("./storage.js").Entry[]} */ const mismatched = [];
      /** @type {import("./storage.js").Entry[]} */ const unvetted = [];
      let wait = 0, stored = 0;
      try {
        await this.storage.change((s, entries) => {
          this._adopt(s);
          wait = force ? 0 : this._retryAt - this.now();
          if (wait > RETRY_AFTER_CAP) wait = 0; // a clock set back: no such wait was stored
          stored = entries.length;
          if (this.disabled || wait > 0) return;
          for (const e of entries) {
            const ok = !e.bundled || this._vetted.get(`${e.metric}@${e.bundled}`);
            (ok ? batch : ok === false ? mismatched : unvetted).push(e);
          }
          if (unvetted.length) batch.length = 0; // the collector asked first, then read afresh
          for (const e of batch) e.attempted = true;
          return { put: batch, remove: mismatched.map((e) => e.key) };
        }, this._maxBatch);
      } catch (e) {
        return this._retryLater(null, e);
      }
      if (this.disabled) return;
      if (wait > 0) return this._uploadIn(wait);
      if (!stored) { this._queue = []; return; }
      if (mismatched.length) {
        this._drop("bundle_mismatch", mismatched.length);
        this._forget(mismatched);
      }
      if (!(await this._vet(unvetted))) return this._retryLater(null, null);
      if (!batch.length) continue;
      const body = encodeBatch(batch.map((e) => e.data));
      /** @type {Response | null} */ let response = null;
      /** @type {unknown} */ let error = null;
      try {
        response = await this._post(body, false);
      } catch (e) { error = e; }
      const status = response ? response.status : null;
      const outcome = classify(status, error);
      if (outcome === "retry" && status !== 503) return this._retryLater(response, error);
      const answer = await response?.json().catch(() => ({})) ?? {};
      // A 503 that lists retry positions: storage took the rest of the batch (a cluster
      // shard down, say); only those stay stored, to be sent again after the backoff.
      const later = outcome === "retry" ? positions(answer.retry, batch.length) : null;
      if (outcome === "retry" && !later?.size) return this._retryLater(response, error);
      const done = later ? batch.filter((e, i) => !later.has(i)) : batch;
      const retired = new Set(list(answer.retired).map((r) => r?.metric));
      for (const m of retired) if (typeof m === "string") this.retired.add(m);
      const ok = outcome !== "drop"; // else the whole batch is refused
      const rejected = ok ? positions(answer.rejected, batch.length) : new Set(batch.keys());
      for (const i of later ?? []) rejected.delete(i);
      const refused = batch.filter((e, i) => rejected.has(i));
      const gone = refused.filter((e) => retired.has(e.metric)).length;
      if (ok) {
        if (!later) this.counts.batches++;
        this.counts.sent += done.length - rejected.size;
        this.counts.accepted += Number.isInteger(answer.accepted) ? answer.accepted : done.length - rejected.size;
        this.counts.duplicates += Number.isInteger(answer.duplicates) ? answer.duplicates : 0;
      } else {
        this._lastError = `HTTP ${status}`;
        this._lastRefusal = refusalOf(status, answer);
        if (status === 413 && batch.length > 1) { this._maxBatch = Math.max(1, batch.length >> 1); continue; }
      }
      if (refused.length > gone) {
        this._drop(status === 413 ? "too_large" : "rejected", refused.length - gone);
        this._lastRefusal = refusalOf(status, answer);
      }
      if (gone) this._drop("retired", gone);
      // Answered: the batch leaves the storage, and the origin's backoff starts over.
      await this.storage.change(() => ({ remove: done.map((e) => e.key), state: { retry: null } })).catch(() => {});
      this._forget(done);
      if (later) {
        this.failures = 0; // progress: the backoff starts over (Retry-After still holds)
        return this._retryLater(response, null);
      }
      await renew();
    }
  }

  /** GET a definition: directly, or, with a relay, through it like the uploads (the
   *  collector would otherwise see the device's address fetch a metric's definition just
   *  before the relayed upload that carries it). @param {string} url */
  _get(url) {
    return this._fetch(url, { headers: this._auth }); // GET: fetch's default, and the relay's
  }

  /** POST a batch: directly, or through the relay (encapsulated; its answer decapsulated).
   *  @param {string} body @param {boolean} keepalive */
  _post(body, keepalive) {
    return this._fetch(`${this.url}/v1/reports`, { method: "POST", headers: { "Content-Type": "application/json", ...this._auth }, body, keepalive, credentials: "omit" });
  }

  /** Directly, or through the relay. @param {string} url @param {any} init */
  _fetch(url, init) {
    return (this.relay ?? this).fetch(url, init); // this.fetch is bound: the same call
  }

  /** Count a recoverable failure and try again after the backoff, which the origin's
   *  tabs share: the next attempt's time is stored, and whichever tab sends next waits
   *  for it. @param {Response | null} response @param {unknown} error */
  async _retryLater(response, error) {
    const failures = ++this.failures;
    this.counts.retries++;
    this._error(error ?? (response ? `HTTP ${response.status}` : "definition check failed"));
    const delay = backoffDelay(failures, parseRetryAfter(response?.headers.get("retry-after") ?? null, this.now()), this.random);
    this._uploadIn(delay);
    this._retryAt = this.now() + delay;
    await this.storage.change(() => ({ state: { retry: { at: this._retryAt, failures } } })).catch(() => {});
  }

  /** Reports no longer stored: out of this tab's queue, and the other tabs told.
   *  @param {import("./storage.js").Entry[]} entries */
  _forget(entries) {
    const keys = entries.map((e) => e.key);
    this._unqueue(keys);
    this._tabs.tell("removed", keys);
  }

  /** @param {number[]} keys */
  _unqueue(keys) {
    const gone = new Set(keys);
    this._queue = this._queue.filter((e) => !gone.has(e.key));
  }

  /** Ask the collector (once per metric and version) whether it has the bundled
   *  definitions ``entries`` were made with, with the same parameters (a report made with
   *  one it lacks is then dropped); false when it could not be asked.
   *  @param {import("./storage.js").Entry[]} entries */
  async _vet(entries) {
    for (const e of entries) {
      const id = `${e.metric}@${e.bundled}`;
      if (this._vetted.has(id)) continue;
      const response = await this._get(`${this.url}/v1/metrics/${encodeURIComponent(e.metric)}?version=${e.bundled}`).catch(() => null);
      if (!response || classify(response.status, null) === "retry") return false;
      const server = response.ok ? await response.json() : null;
      const mine = this._bundle.get(e.metric);
      this._vetted.set(id, Boolean(server) && (!mine || mine.version !== e.bundled || canonical(mine.mechanism) === canonical(server.mechanism)));
    }
    return true;
  }

  /** The last flush on pagehide: keepalive fetches (the reports stay stored until an
   *  answer acknowledges them; the collector drops the duplicates of a resend). When
   *  other tabs of the origin are open, they send instead: this one commits and tells them. */
  _lastFlush() {
    const waiting = [...this._queue, ...this.pending];
    this._commitSoon(true); // started now, an IndexedDB transaction outlives the page
    if (this._tabs.peers.size) return this._tabs.tell("flush"); // they send it
    /** @type {Omit<import("./storage.js").Entry, "key">[]} */ let batch = [];
    let size = 0;
    const send = () => {
      if (!batch.length) return;
      const body = encodeBatch(batch.map((e) => e.data));
      try {
        this._post(body, true).catch(() => {});
      } catch { /* the page is going away */ }
      batch = [];
      size = 0;
    };
    for (const e of waiting) {
      if (e.bundled) continue;
      if (size + e.data.length + 20 > KEEPALIVE_LIMIT) send();
      batch.push(e);
      size += e.data.length + 1;
      if (batch.length >= this._maxBatch) send();
    }
    send();
  }

  /** What happened to reports so far. */
  stats() {
    return {
      queued: this._queue.length + this.pending.length, ...this.counts, dropped: { ...this.dropped },
      last_error: this._lastError, last_refusal: this._lastRefusal,
    };
  }

  /** The privacy ledger: ε per metric today, this budget period and over the lifetime. */
  privacy() {
    const today = dayOf(this.now());
    /** @type {Record<string, any>} */
    const metrics = {};
    for (const [metric, [reports, epsilon, since]] of Object.entries(this.ledger.lifetime)) {
      const definition = this._cache.get(metric)?.definition ?? this._bundle.get(metric);
      const [tr, te] = spent(this.ledger, metric, today, today);
      const budget = definition?.budget ?? null;
      const periodSince = budget ? periodStart(today, budget.period) : today;
      const [pr, pe] = spent(this.ledger, metric, periodSince, today);
      metrics[metric] = {
        epsilon_per_report: definition?.mechanism?.epsilon ?? null,
        budget: budget && { ...budget, remaining_reports: Math.max(0, budget.reports_per_period - pr) },
        today: { reports: tr, epsilon: te, since: today },
        period: { reports: pr, epsilon: pe, since: periodSince },
        lifetime: { reports, epsilon, since },
        permanent_epsilon: this.ledger.permanent[metric] ?? null,
      };
    }
    return {
      enabled: !this.disabled,
      today,
      accounting: "Sequential composition: m reports at ε each are together (m·ε)-LDP.",
      device_budget: this.caps,
      metrics,
    };
  }

  /** Opt out, for every tab of the origin: stop reporting, wipe every stored report
   *  (refunding those never sent) and the device secret, in one transaction; the other
   *  tabs are told (and their storing and sending read the opt-out in theirs).
   *  @returns {Promise<boolean>} */
  disable() {
    return this._serial(async () => {
      this.disabled = true;
      try {
        await this._commitSoon(true);
        let wiped = 0;
        await this.storage.change((s, entries) => {
          const ledger = s.ledger ?? emptyLedger();
          for (const e of entries) if (!e.attempted) apply(ledger, e.charge, -1);
          wiped = entries.length;
          this._adopt(s = { ...s, ledger, secret: null, disabled: true });
          return { remove: entries.map((e) => e.key), state: s };
        }, Infinity);
        this._drop("disabled", wiped);
        this._queue = [];
        this._tabs.tell("state");
        return true;
      } catch {
        return false;
      }
    });
  }

  /** Opt back in, for every tab of the origin. @returns {Promise<boolean>} */
  enable() {
    return this._serial(async () => {
      this.disabled = false;
      await this.storage.change(() => ({ state: { disabled: false } })).catch(() => {});
      this._tabs.tell("state");
      return true;
    });
  }

  /** Flush, then stop: later reports are dropped as ``shutdown``. Resolves with what that
   *  flush() did: whether everything was delivered. */
  async shutdown() {
    const empty = await this.flush().catch(() => false);
    this._closed = true;
    clearTimeout(this._timer);
    globalThis.removeEventListener?.("pagehide", this._onPageHide);
    this._tabs.close();
    return empty;
  }
}
