// What the tabs of one origin share: their stored queue (IndexedDB), one sender of it at a
// time, and news of what was sent or changed. Without this every open tab posted the whole
// stored queue (100 reports, two tabs: 200 posts). See docs/guides/web.md ("Several tabs").

/** How long a sender's lease lasts without renewal (the fallback without Web Locks): a
 *  tab that dies while sending holds the queue this long at most. Renewed every batch,
 *  so only a batch whose POST takes longer can be sent twice (the collector drops the
 *  copies). */
export const LEASE_MS = 30_000;

/** How often a tab waiting for the lease asks again. */
const POLL_MS = 200;

/** News from another tab: it opened (``hello``, answered ``here``), closed (``bye``), or
 *  closed leaving its reports to the others (``flush``); reports it ``removed``; it
 *  changed the stored ``state`` (an opt-out or opt-in: read it again).
 *  @typedef {{type: "hello" | "here" | "bye" | "flush" | "state", from: string}
 *   | {type: "removed", from: string, keys: number[]}} News */

/**
 * One sender at a time for the tabs (and workers) that share a storage: the Web Locks API
 * where the browser has it, else a lease kept in the storage itself (taken in one of its
 * atomic changes), else nothing (a storage without a lockName: no one else sees it). The
 * tabs also tell each other, on a BroadcastChannel, which stored reports were removed
 * and which tabs are open.
 */
export class Tabs {
  /** @param {import("./storage.js").Storage} storage @param {() => number} now
   *  @param {(news: News) => void} onNews */
  constructor(storage, now, onNews) {
    this.storage = storage;
    this.now = now;
    this.id = Math.random().toString(36).slice(2); // tells tabs apart: no secret
    this.name = storage.lockName ?? null;
    /** The other open tabs of this storage (as far as their news tells). @type {Set<string>} */
    this.peers = new Set();
    /** @type {BroadcastChannel | null} */
    this.channel = null;
    if (this.name && typeof BroadcastChannel === "function") {
      this.channel = new BroadcastChannel(this.name);
      /** @type {any} */ (this.channel).unref?.(); // Node: never hold the process open
      this.channel.onmessage = (/** @type {MessageEvent<News>} */ event) => {
        const news = event.data;
        if (!news || typeof news.from !== "string") return;
        if (news.type === "hello") { this.peers.add(news.from); this.tell("here"); }
        else if (news.type === "here") this.peers.add(news.from);
        else if (news.type === "bye" || news.type === "flush") this.peers.delete(news.from); // it closed
        onNews(news);
      };
      this.tell("hello");
    }
  }

  /** Tell the other tabs. @param {News["type"]} type @param {number[]} [keys] */
  tell(type, keys) {
    try {
      this.channel?.postMessage({ type, from: this.id, keys });
    } catch { /* closed */ }
  }

  /**
   * Run ``send`` as the only sender of the storage, once it is this tab's turn: a Web Lock
   * request waits in line; the lease is asked again every POLL_MS until the holder
   * releases it or it runs out. Resolves with what ``send`` resolves.
   * @template T @param {(renew: () => Promise<void>) => Promise<T>} send @returns {Promise<T>}
   */
  async exclusive(send) {
    const locks = /** @type {any} */ (globalThis).navigator?.locks;
    const nop = async () => {};
    if (!this.name) return send(nop);
    if (locks?.request) return locks.request(this.name, () => send(nop));
    const take = async (ttl = LEASE_MS) => {
      const now = this.now();
      let wait = 0;
      await this.storage.change(({ sender }) => {
        if (sender && sender.owner !== this.id && sender.expires > now) wait = sender.expires - now;
        else return { state: { sender: { owner: this.id, expires: now + ttl } } };
      });
      return wait;
    };
    for (let wait; (wait = await take()) > 0;) await new Promise((resolve) => setTimeout(resolve, Math.min(wait, POLL_MS)));
    try {
      return await send(async () => { await take(); });
    } finally {
      await take(0).catch(nop); // released
    }
  }

  /** This tab is going away: the others no longer count it. */
  close() {
    this.tell("bye");
    this.channel?.close();
    this.channel = null;
  }
}
