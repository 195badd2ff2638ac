// ldp-telemetry-client: local differential privacy on the page, as docs/protocol.md says.
export { build, scale, normalise, prrInfo, prrSeed, expEpsilon, shadeDown, HASH_PRIME } from "./mechanisms.js";
export { Rng, cryptoBytes, fixedBytes, bernoulli, laneMarks } from "./randomness.js";
export { buildReport, checkDimensions, encodeReport, encodeBatch, mechanismOf, newReportId } from "./wire.js";
export { Client, classify, parseRetryAfter, backoffDelay, DROP_REASONS } from "./client.js";
export { MemoryStorage, IndexedDBStorage, defaultStorage } from "./storage.js";
