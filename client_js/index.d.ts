// Type declarations of ldp-telemetry-client (hand-written; the sources are JS with JSDoc).

/** A metric definition as `GET /v1/metrics/<name>` serves it. */
export interface Definition {
  name: string;
  version: number;
  kind: "categorical" | "numeric" | "string" | "joint";
  domain?: string[];
  /** A joint metric's attributes, in tuple order. */
  attributes?: { name: string; domain: string[] }[];
  /** Public dimensions, each with its allowed values: sent in the clear, NOT protected by ε. */
  dimensions?: { name: string; values: string[] }[];
  range?: [number, number];
  max_length?: number;
  mechanism: MechanismParams;
  budget?: { reports_per_period: number; period: "day" | "week" | "month" } | null;
  [field: string]: unknown;
}

/** A value: a label or index, a number, a string, or a joint metric's
 *  `{attribute: label}` naming every attribute (or its labels in order). */
export type JointValue = string | number | Record<string, string | number> | (string | number)[];

/** A definition's `mechanism` parameters. */
export interface MechanismParams {
  mechanism: string;
  epsilon: number;
  domain_size?: number;
  g?: number;
  s?: number;
  keep_probability?: number;
  permanent_epsilon?: number;
  matrix?: (number | string)[][];
  max_length?: number;
  rows?: number;
  cells?: number;
  salt?: string;
  sizes?: number[];
  groups?: number[][];
  oracles?: MechanismParams[];
}

/** One report, exactly as sent in `{"reports": [...]}`. */
export interface Report {
  metric: string;
  version: number;
  id: string;
  payload: Record<string, unknown>;
  /** The metric's public dimensions (only when it declares some): NOT protected by ε. */
  dimensions?: Record<string, string>;
}

/** A source of random bytes: returns the next `n` bytes of its stream. */
export type ByteSource = (n: number) => Uint8Array;

/** The draws of docs/protocol.md §2 on a byte source. */
export class Rng {
  constructor(take: ByteSource, randrangeBits?: "n" | "n-1");
  take: ByteSource;
  /** `randrange(n)` draws bitlen(n − 1) bits a try (the permanent response's stream). */
  minusOne: boolean;
  bits(k: number): bigint;
  smallBits(k: number): number;
  randrange(n: number): number;
  bigRandrange(n: bigint): bigint;
}

/** Bytes from `crypto.getRandomValues`, read in 4 KiB blocks. */
export function cryptoBytes(): ByteSource;
/** Bytes from a fixed array (tests, conformance vectors); throws when they run out. */
export function fixedBytes(data: Uint8Array): ByteSource & { used(): number };
/** Exact Bernoulli(p) for a float p in (0, 1). */
export function bernoulli(rng: Rng, p: number): boolean;
/** `lanes` exact Bernoulli(p) marks, indexed by value. */
export function laneMarks(rng: Rng, p: number, lanes: number): Uint8Array;

/** A mechanism built from its parameters; `perturb` gives one report's payload. */
export interface Mechanism {
  name: string;
  epsilon: number;
  p?: number;
  q?: number;
  perturb(value: any, rng: Rng): any;
  perturbMemoized?(
    value: number, secret: Uint8Array, metric: string, version: number, rng: Rng,
  ): Promise<Record<string, unknown>>;
  permanentResponse?(
    value: number, secret: Uint8Array, metric?: string, version?: number,
  ): Promise<Record<string, unknown>>;
}

export function build(params: MechanismParams): Mechanism;
export function mechanismOf(definition: Definition): Mechanism;
export function scale(value: number, low: number, high: number): number;
export function normalise(value: string, maxLength: number): Uint8Array;
export function prrInfo(metric: string, version: number, value: number): Uint8Array;
export function prrSeed(secret: Uint8Array, info: Uint8Array): Promise<Uint8Array>;
export function expEpsilon(epsilon: number): number;
export function shadeDown(prob: number, ratio: (f: { n: bigint; d: bigint }) => { n: bigint; d: bigint }, epsilon: number): number;
export const HASH_PRIME: number;

export function newReportId(): string;
/** Perturb `value` on the page and wrap it as a report. A longitudinal metric needs `secret`. */
export function buildReport(
  definition: Definition,
  value: JointValue,
  options?: { rng?: Rng; secret?: Uint8Array; id?: string; dimensions?: Record<string, string> },
): Promise<Report>;
/** A report's public dimensions checked against the declared ones (in declared order), or
 *  null for a metric without; throws RangeError on a missing, unknown or undeclared value. */
export function checkDimensions(
  definition: Definition,
  given: Record<string, string> | undefined | null,
): Record<string, string> | null;
/** A report's exact JSON, as the Python SDK encodes it (floats, key order and escapes
 *  included), given the definition it was built from. */
export function encodeReport(report: Report, definition: Definition): string;
/** The exact body of `POST /v1/reports` of reports encoded by `encodeReport`. */
export function encodeBatch(encoded: string[]): string;

// -- the client ----------------------------------------------------------------------

export type DropReason =
  | "unknown_metric" | "invalid_value" | "invalid_dimensions" | "unreachable" | "queue_full" | "rejected" | "too_large"
  | "shutdown" | "internal_error" | "budget" | "device_budget" | "disabled" | "storage_error"
  | "retired" | "bundle_mismatch";

export interface DeviceCaps {
  epsilon_per_day?: number | null;
  epsilon_lifetime?: number | null;
}

/** A queued report as stored: its exact JSON and what the ledger charged for it. */
export interface Entry {
  key: number;
  data: string;
  metric: string;
  /** The bundled definition's version it was made with (checked before sending), or 0. */
  bundled: number;
  attempted: boolean;
  charge: Charge;
}

/** One report's charge to the privacy ledger. */
export interface Charge {
  metric: string;
  epsilon: number;
  day: string;
  since: string;
  limit: number | null;
  permanent: number | null;
}

/** What a storage keeps beside the reports: the ledger, the device secret, the opt-out, the
 *  origin's upload backoff and (without Web Locks) the sender's lease. */
export interface State {
  ledger?: unknown;
  secret?: Uint8Array | null;
  disabled?: boolean;
  retry?: { at: number; failures: number } | null;
  sender?: { owner: string; expires: number };
}

/** What one atomic step of a storage writes: reports to put (added when without a key),
 *  keys of reports to remove, state records to set. */
export interface Change {
  put?: (Entry | Omit<Entry, "key">)[];
  remove?: number[];
  state?: State;
}

/** Where queued reports, the ledger, the device secret and the opt-out are kept. */
export interface Storage {
  /** One atomic step: `fn` gets the stored state and the first `count` stored reports by
   *  key (none by default; Infinity: all) and says what to write; nothing another tab
   *  writes comes between. Resolves the keys of the reports put. */
  change(fn: (state: State, entries: Entry[]) => Change | void, count?: number): Promise<number[]>;
  /** The same for every tab that sees the same stored queue: its Web Lock's name. */
  lockName?: string;
}
/** Memory only; tests share a `place` between two of them to play a reload or two tabs. */
export class MemoryStorage implements Storage {
  constructor(place?: { entries?: Map<number, Entry>; state?: Map<string, unknown>; next?: number; id?: string });
  readonly lockName: string;
  change(fn: (state: State, entries: Entry[]) => Change | void, count?: number): Promise<number[]>;
}
/** IndexedDB: reports survive reloads and offline spells until acknowledged. */
export class IndexedDBStorage implements Storage {
  constructor(name?: string);
  readonly name: string;
  readonly lockName: string;
  change(fn: (state: State, entries: Entry[]) => Change | void, count?: number): Promise<number[]>;
}
/** IndexedDB when the environment has it, else memory. */
export function defaultStorage(): Storage;

export interface ClientOptions {
  /** Definitions shipped with the app, used until fetched (checked before sending). */
  definitions?: Definition[];
  storage?: Storage;
  fetch?: typeof fetch;
  /** Queued reports that trigger an upload (20). */
  flushAt?: number;
  /** Milliseconds after which queued reports are sent anyway (10,000). */
  flushInterval?: number;
  maxBatchReports?: number;
  maxQueue?: number;
  metricsTtl?: number;
  deviceBudget?: DeviceCaps;
  now?: () => number;
  random?: () => number;
  rng?: Rng;
  /** The app's ingest key (`ldp tokens create NAME --kind ingest`; public, shipped in the
   *  app): sent as `Authorization: Bearer <key>` with every definition fetch and upload,
   *  inside the sealed request with `relay` (never to the relay). It picks the project of
   *  the metrics; a 401 or 403 drops the batch. */
  ingestKey?: string;
  /** Send the reports through an Oblivious HTTP relay (a `Relay` of
   *  `ldp-telemetry-client/ohttp`); definitions are still fetched from `url`. */
  relay?: { fetch(url: string, init: RequestInit): Promise<Response>; prepare?(url: string): void };
}

export interface ClientStats {
  queued: number;
  reported: number;
  sent: number;
  accepted: number;
  duplicates: number;
  batches: number;
  retries: number;
  dropped: Record<DropReason, number>;
  last_error: string | null;
  /** Why the collector last refused reports (its answer's reason, e.g. `HTTP 400: ...`). */
  last_refusal: string | null;
}

/** Reports from a web page: perturbed on the page, queued (IndexedDB) until acknowledged. */
export class Client {
  constructor(url: string, options?: ClientOptions);
  /** Resolves once the stored queue, ledger and opt-out are loaded. */
  readonly ready: Promise<void>;
  definition(metric: string): Promise<Definition>;
  /** Perturb and queue; never throws: false when dropped (see `stats().dropped`). True
   *  when this tab's ledger admits it; it is charged as it is stored, an instant later,
   *  against the origin's stored ledger, which may refuse it then (another tab spent the
   *  budget): dropped as `budget`, never sent. */
  report(metric: string, value: JointValue, dimensions?: Record<string, string>): Promise<boolean>;
  /** Send what is queued now, whatever the backoff. Resolves with whether everything was
   *  delivered: true when the queue is empty and no report was dropped, for any reason
   *  (`stats().dropped`: a `report()` that resolved false, one the collector refused),
   *  since the previous `flush()` returned (or since the client was made); false
   *  otherwise, e.g. with the collector unreachable (the reports stay queued and are
   *  retried). The Python and JVM SDKs' `flush()` say the same. */
  flush(): Promise<boolean>;
  stats(): ClientStats;
  privacy(): Record<string, unknown>;
  /** Opt out, for every tab of the origin: wipe the stored reports (refunding unsent
   *  charges) and the device secret. */
  disable(): Promise<boolean>;
  /** Opt back in, for every tab of the origin. */
  enable(): Promise<boolean>;
  /** Flush, then stop; what that `flush()` resolved with. */
  shutdown(): Promise<boolean>;
}

export function classify(status: number | null, error: unknown): "ok" | "retry" | "drop";
export function parseRetryAfter(value: string | null, nowMs: number): number | null;
export function backoffDelay(failures: number, retryAfterMs: number | null, random: () => number): number;
export const DROP_REASONS: readonly DropReason[];
