// Where the client keeps queued reports, the ledger, the device secret and the opt-out:
// IndexedDB in a browser (reports survive reloads and offline spells until acknowledged),
// memory where IndexedDB is missing. Both keep a report and its ledger charge together.

/**
 * @typedef {{key: number, data: string, metric: string, bundled: number, attempted: boolean,
 *   charge: import("./ledger.js").Charge}} Entry
 * @typedef {{entries: Entry[], ledger: import("./ledger.js").LedgerState | null,
 *   secret: Uint8Array | null, disabled: boolean}} Saved
 * @typedef {{load(): Promise<Saved>, put(entries: Omit<Entry, "key">[], ledger: any): Promise<number[]>,
 *   update(entries: Entry[]): Promise<void>, remove(keys: number[]): Promise<void>,
 *   saveState(name: string, value: any): Promise<void>, lockName?: string,
 *   lease?(owner: string, now: number, ttl: number): Promise<number>}} Storage
 *   ``lockName``: the same for every tab that sees the same stored queue (the name of its
 *   Web Lock and BroadcastChannel); ``lease``: the sender's lease where Web Locks are
 *   missing (src/tabs.js): takes or renews it for ``owner`` until ``now + ttl`` (ttl 0
 *   releases it) and resolves 0, or resolves the ms until another owner's lease ends.
 */

/** A sender's lease in a state record: 0 when ``owner`` may send (the record to store
 *  then in ``take``), else the ms until the holder's lease ends.
 *  @param {{owner: string, expires: number} | undefined} held @param {string} owner
 *  @param {number} now @param {number} ttl @param {(lease: {owner: string, expires: number}) => void} take */
function leaseOf(held, owner, now, ttl, take) {
  if (held && held.owner !== owner && held.expires > now) return held.expires - now;
  take({ owner, expires: now + ttl });
  return 0;
}

/** Memory only (or a shared ``place`` object, which tests use to play a page reload). */
export class MemoryStorage {
  /** @param {{entries?: Map<number, Entry>, state?: Map<string, any>, next?: number, id?: string}} [place] */
  constructor(place = {}) {
    place.entries ??= new Map();
    place.state ??= new Map();
    place.next ??= 1;
    place.id ??= Math.random().toString(36).slice(2);
    /** @type {{entries: Map<number, Entry>, state: Map<string, any>, next: number, id: string}} */
    this.place = /** @type {any} */ (place);
    this.lockName = `ldp-telemetry:memory:${/** @type {any} */ (place).id}`;
  }

  /** @param {string} owner @param {number} now @param {number} ttl */
  async lease(owner, now, ttl) {
    const { state } = this.place;
    return leaseOf(state.get("sender"), owner, now, ttl, (lease) => state.set("sender", lease));
  }

  async load() {
    const { entries, state } = this.place;
    return {
      entries: [...entries.values()].map((e) => structuredClone(e)),
      ledger: structuredClone(state.get("ledger") ?? null),
      secret: state.get("secret") ?? null,
      disabled: Boolean(state.get("disabled")),
    };
  }

  /** Add reports and save the ledger that charges them, together; their keys.
   *  @param {Omit<Entry, "key">[]} entries @param {any} ledger */
  async put(entries, ledger) {
    const keys = entries.map((entry) => {
      const key = this.place.next++;
      this.place.entries.set(key, structuredClone({ ...entry, key }));
      return key;
    });
    this.place.state.set("ledger", structuredClone(ledger));
    return keys;
  }

  /** @param {Entry[]} entries */
  async update(entries) {
    for (const e of entries) this.place.entries.set(e.key, structuredClone(e));
  }

  /** @param {number[]} keys */
  async remove(keys) {
    for (const k of keys) this.place.entries.delete(k);
  }

  /** @param {string} name @param {any} value */
  async saveState(name, value) {
    this.place.state.set(name, structuredClone(value));
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

  /** Run ``body`` in one transaction; resolve with its result when the transaction commits.
   *  @template T @param {string[]} stores @param {"readonly" | "readwrite"} mode
   *  @param {(tx: IDBTransaction) => T | Promise<T>} body @returns {Promise<T>} */
  async tx(stores, mode, body) {
    const db = await this.open();
    return new Promise((resolve, reject) => {
      const tx = db.transaction(stores, mode);
      /** @type {any} */
      let result;
      Promise.resolve(body(tx)).then((r) => { result = r; }, reject);
      tx.oncomplete = () => resolve(result);
      tx.onerror = tx.onabort = () => reject(tx.error);
    });
  }

  async load() {
    return this.tx(["reports", "state"], "readonly", (tx) => {
      const req = (/** @type {IDBRequest} */ r) => new Promise((ok) => { r.onsuccess = () => ok(r.result); });
      const state = tx.objectStore("state");
      return Promise.all([
        req(tx.objectStore("reports").getAll()),
        req(state.get("ledger")),
        req(state.get("secret")),
        req(state.get("disabled")),
      ]).then(([entries, ledger, secret, disabled]) => ({
        entries, ledger: ledger ?? null, secret: secret ?? null, disabled: Boolean(disabled),
      }));
    });
  }

  /** Add reports and save the ledger that charges them in one transaction; their keys.
   *  @param {Omit<Entry, "key">[]} entries @param {any} ledger */
  async put(entries, ledger) {
    return this.tx(["reports", "state"], "readwrite", (tx) => {
      const store = tx.objectStore("reports");
      const added = entries.map((e) => new Promise((ok) => {
        const r = store.add(e);
        r.onsuccess = () => ok(/** @type {number} */ (r.result));
      }));
      tx.objectStore("state").put(ledger, "ledger");
      return Promise.all(added);
    });
  }

  /** @param {Entry[]} entries */
  async update(entries) {
    await this.tx(["reports"], "readwrite", (tx) => { for (const e of entries) tx.objectStore("reports").put(e); });
  }

  /** @param {number[]} keys */
  async remove(keys) {
    await this.tx(["reports"], "readwrite", (tx) => { for (const k of keys) tx.objectStore("reports").delete(k); });
  }

  /** @param {string} name @param {any} value */
  async saveState(name, value) {
    await this.tx(["state"], "readwrite", (tx) => { tx.objectStore("state").put(value, name); });
  }

  /** Take, renew or (ttl 0) release the sender's lease: one readwrite transaction, which
   *  IndexedDB runs alone among every tab's transactions on the store.
   *  @param {string} owner @param {number} now @param {number} ttl @returns {Promise<number>} */
  async lease(owner, now, ttl) {
    return this.tx(["state"], "readwrite", (tx) => new Promise((resolve) => {
      const store = tx.objectStore("state");
      const r = store.get("sender");
      r.onsuccess = () => resolve(leaseOf(r.result, owner, now, ttl, (lease) => store.put(lease, "sender")));
    }));
  }
}

/** IndexedDB when the environment has it, else memory. @returns {Storage} */
export function defaultStorage() {
  return typeof indexedDB === "undefined" ? new MemoryStorage() : new IndexedDBStorage();
}
