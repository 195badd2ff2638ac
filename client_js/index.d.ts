// Type declarations of ldp-telemetry-client (hand-written; the sources are JS with JSDoc).

/** A metric definition as `GET /v1/metrics/<name>` serves it. */
export interface Definition {
  name: string;
  version: number;
  kind: "categorical" | "numeric" | "string";
  domain?: string[];
  range?: [number, number];
  max_length?: number;
  mechanism: MechanismParams;
  budget?: { reports_per_period: number; period: "day" | "week" | "month" } | null;
  [field: string]: unknown;
}

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
}

/** One report, exactly as sent in `{"reports": [...]}`. */
export interface Report {
  metric: string;
  version: number;
  id: string;
  payload: Record<string, unknown>;
}

/** A source of random bytes: returns the next `n` bytes of its stream. */
export type ByteSource = (n: number) => Uint8Array;

/** The draws of docs/protocol.md §2 on a byte source. */
export class Rng {
  constructor(take: ByteSource, randrangeBits?: "n" | "n-1");
  take: ByteSource;
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
  value: string | number,
  options?: { rng?: Rng; secret?: Uint8Array; id?: string },
): Promise<Report>;
/** A report's exact JSON (as the Python SDK encodes it). */
export function encodeReport(report: Report): string;
/** The exact body of `POST /v1/reports`. */
export function encodeBatch(reports: Report[]): string;
