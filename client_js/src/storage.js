// Where the client keeps queued reports and its state (the ledger, the device secret, the
// opt-out, the upload backoff, the sender's lease): IndexedDB in a browser (reports survive
// reloads and offline spells until acknowledged), memory where IndexedDB is missing. Every
// change is one transaction that reads what it changes, so the tabs of an origin never
// write over each other's charges. See docs/guides/web.md ("Several tabs").

/**
 * @typedef {{key: number, data: string, metric: string, bundled: number, attempted: boolean,
 *   charge: import("./ledger.js").Charge}} Entry
 * @typedef {{ledger?: import("./ledger.js").LedgerState, secret?: Uint8Array | null,
 *   disabled?: boolean, retry?: {at: number, failures: number} | null,
 *   sender?: {owner: string, expires: number}}} State
 *   ``retry``: when the origin's next upload is due after failures (src/client.js);
 *   ``sender``: the sender's lease where Web Locks are missing (src/tabs.js)
 * @typedef {{put?: (Entry | Omit<Entry, "key">)[], remove?: number[], state?: State}} Change
 * @typedef {{change(fn: (state: State, entries: Entry[]) => Change | void, count?: number): Promise<number[]>,
 *   lockName?: string}} Storage
 *   ``change``: one atomic step. ``fn`` is given the stored state and the first ``count``
 *   stored reports by key (none by default; Infinity: all) and returns what to write:
 *   reports to put (a report without a key is added), keys to remove, state records to
 *   set. Nothing another tab (or worker) writes comes between what ``fn`` reads and what it
 *   writes. Resolves the keys of the reports put, once written. ``lockName``: the same for
 *   every tab that sees the same stored queue (the name of its Web Lock and
 *   BroadcastChannel).
 */

/** Memory only (or a shared ``place`` object, which tests use to play a reload or tabs). */
export class MemoryStorage {
  /** @param {{entries?: Map<number, Entry>, state?: Map<string, any>, next?: number, id?: string}} [place] */
  constructor(place = {}) {
    place.entries ??= new Map();
    place.state ??= new Map();
    place.next ??= 1;
    place.id ??= Math.random().toString(36).slice(2);
    /** @type {{entries: Map<number, Entry>, state: Map<string, any>, next: number, id: string}} */
    this.place = /** @type {any} */ (place);
    this.lockName = `ldp-telemetry:memory:${place.id}`;
  }

  /** @param {(state: State, entries: Entry[]) => Change | void} fn @param {number} [count] */
  async change(fn, count = 0) {
    const { entries, state } = this.place;
    const c = fn(structuredClone(Object.fromEntries(state)), structuredClone([...entries.values()].slice(0, count))) || {};
    for (const key of c.remove ?? []) entries.delete(key);
    for (const [name, value] of Object.entries(c.state ?? {})) state.set(name, structuredClone(value));
    return (c.put ?? []).map((e) => {
      const key = /** @type {any} */ (e).key ?? this.place.next++;
      entries.set(key, structuredClone({ ...e, key }));
      return key;
    });
  }
}

/** IndexedDB: object stores "reports" (auto-increment keys) and "state". */
export class IndexedDBStorage {
  /** @param {string} [name] */
  constructor(name = "ldp-telemetry") {
    this.name = name;
    this.lockName = `ldp-telemetry:indexeddb:${name}`;
    /** @type {Promise<IDBDatabase> | null} */
    this.db = null;
  }

  /** @returns {Promise<IDBDatabase>} */
  open() {
    this.db ??= new Promise((resolve, reject) => {
      const request = indexedDB.open(this.name, 1);
      request.onupgradeneeded = () => {
        request.result.createObjectStore("reports", { keyPath: "key", autoIncrement: true });
        request.result.createObjectStore("state");
      };
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    return this.db;
  }

  /** One readwrite transaction over both stores, which IndexedDB runs alone among every
   *  tab's transactions on them: ``fn`` runs in it (promise reactions of a request's
   *  success keep a transaction active). @param {(state: State, entries: Entry[]) => Change | void} fn
   *  @param {number} [count] @returns {Promise<number[]>} */
  async change(fn, count = 0) {
    const db = await this.open();
    return new Promise((resolve, reject) => {
      const tx = db.transaction(["reports", "state"], "readwrite");
      const reports = tx.objectStore("reports");
      const state = tx.objectStore("state");
      const get = (/** @type {IDBRequest} */ r) => new Promise((ok) => { r.onsuccess = () => ok(r.result); });
      /** @type {any} */
      let keys;
      Promise.all([get(state.getAllKeys()), get(state.getAll()), count && get(reports.getAll(null, count < Infinity ? count : undefined))])
        .then(([names, values, entries]) => {
          const c = fn(Object.fromEntries(names.map((/** @type {string} */ n, /** @type {number} */ i) => [n, values[i]])), entries || []) || {};
          for (const key of c.remove ?? []) reports.delete(key);
          for (const [name, value] of Object.entries(c.state ?? {})) state.put(value, name);
          return Promise.all((c.put ?? []).map((e) => get(reports.put(e))));
        })
        .then((k) => { keys = k; }, (e) => { tx.abort(); reject(e); });
      tx.oncomplete = () => resolve(keys);
      tx.onerror = tx.onabort = () => reject(tx.error);
    });
  }
}

/** IndexedDB when the environment has it, else memory. @returns {Storage} */
export function defaultStorage() {
  return typeof indexedDB === "undefined" ? new MemoryStorage() : new IndexedDBStorage();
}
