// Oblivious HTTP in the web SDK: HPKE against RFC 9180's vectors, the encapsulation
// against RFC 9458 Appendix A byte for byte, and the Relay's behaviour (key re-fetch on
// the gateway's key problem, tampering, the relay's own refusals) against a gateway
// written here from the RFC (test/ohttp_gateway.js). tests/test_ohttp_js.py runs the
// SDK against the collector's real gateway and relay.

import { mock, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { deriveKeyPair, importPrivateKey, setupBaseR, setupBaseS } from "../src/hpke.js";
import { decodeResponse, encodeRequest, varint } from "../src/bhttp.js";
import { KEY_PROBLEM, Relay, encapsulate, parseKeyConfig, parseKeyConfigs, responseKeys } from "../src/ohttp.js";
import { Client } from "../src/client.js";
import { MemoryStorage } from "../src/storage.js";
import { TestGateway, decodeRequest, encodeResponse, hex, toHex } from "./ohttp_gateway.js";

const load = (/** @type {string} */ name) => JSON.parse(readFileSync(new URL(`vectors/${name}`, import.meta.url), "utf8"));
const RFC9180 = load("rfc9180-x25519-sha256-aes128gcm.json").vectors;
const A = load("rfc9458-appendix-a.json");

test("RFC 9180 A.1.1: DeriveKeyPair gives the vector's key pairs", async () => {
  for (const v of RFC9180) {
    const e = await deriveKeyPair(hex(v.ikmE));
    assert.equal(toHex(e.secret), v.skEm);
    assert.equal(toHex(e.publicKey), v.pkEm);
    const r = await deriveKeyPair(hex(v.ikmR));
    assert.equal(toHex(r.secret), v.skRm);
    assert.equal(toHex(r.publicKey), v.pkRm);
  }
});

test("RFC 9180 A.1.1: the sender's key schedule, encryptions and exports, byte for byte", async () => {
  for (const v of RFC9180) {
    const ephemeral = { privateKey: await importPrivateKey(hex(v.skEm)), publicKey: hex(v.pkEm) };
    const s = await setupBaseS(hex(v.pkRm), hex(v.info), ephemeral);
    assert.equal(toHex(s.enc), v.enc);
    assert.equal(toHex(s.shared), v.shared_secret);
    assert.equal(toHex(s.scheduleContext), v.key_schedule_context);
    assert.equal(toHex(s.key), v.key);
    assert.equal(toHex(s.baseNonce), v.base_nonce);
    assert.equal(toHex(s.exporterSecret), v.exporter_secret);
    for (const e of v.encryptions) {
      s.context.seq = e.sequence_number;
      assert.equal(toHex(await s.context.seal(hex(e.aad), hex(e.plaintext))), e.ciphertext, `sequence ${e.sequence_number}`);
    }
    for (const x of v.exports) {
      assert.equal(toHex(await s.context.export(hex(x.exporter_context), x.L)), x.exported_value);
    }
  }
});

test("RFC 9180 A.1.1: the recipient opens the vector's ciphertexts; a changed byte fails", async () => {
  for (const v of RFC9180) {
    const r = await setupBaseR(hex(v.enc), await importPrivateKey(hex(v.skRm)), hex(v.pkRm), hex(v.info));
    assert.equal(toHex(r.shared), v.shared_secret);
    for (const e of v.encryptions) {
      r.context.seq = e.sequence_number;
      assert.equal(toHex(await r.context.open(hex(e.aad), hex(e.ciphertext))), e.plaintext);
    }
    const bad = hex(v.encryptions[0].ciphertext);
    bad[3] ^= 1;
    r.context.seq = 0;
    await assert.rejects(r.context.open(hex(v.encryptions[0].aad), bad));
  }
});

test("RFC 9458 Appendix A: the key configuration, the Binary HTTP request and the encapsulated request, byte for byte", async () => {
  const { config, length } = parseKeyConfig(hex(A.key_config));
  assert.equal(length, A.key_config.length / 2);
  assert.deepEqual({ ...config, publicKey: toHex(config.publicKey) }, {
    keyId: 1, kemId: 0x20, publicKey: A.gateway_public_key,
    suites: [{ kdfId: 1, aeadId: 1 }, { kdfId: 1, aeadId: 3 }],
  });
  // The RFC's request leaves out its three empty sections (RFC 9292 §3.8); the SDK, as the
  // Python SDK, writes them (conformance/vectors/ohttp.json): the same request either way.
  const request = encodeRequest({ method: "GET", scheme: "https", authority: "example.com", path: "/" });
  assert.equal(toHex(request), `${A.request}000000`);
  assert.deepEqual(decodeRequest(hex(A.request)), decodeRequest(request));
  const ephemeral = { privateKey: await importPrivateKey(hex(A.ephemeral_private_key)), publicKey: hex(A.ephemeral_public_key) };
  const { body, open } = await encapsulate(config, hex(A.request), ephemeral);
  assert.equal(toHex(body), A.encapsulated_request);
  // the client decapsulates the RFC's response to it
  const response = await open(hex(A.encapsulated_response));
  assert.equal(toHex(response), A.response);
  assert.deepEqual(decodeResponse(response), { status: 200, headers: [], body: new Uint8Array(0) });
  const keys = await responseKeys(hex(A.exported_secret), hex(A.ephemeral_public_key), hex(A.response_nonce));
  assert.equal(toHex(keys.key), A.aead_key);
  assert.equal(toHex(keys.nonce), A.aead_nonce);
  const tampered = hex(A.encapsulated_response);
  tampered[20] ^= 0x80;
  await assert.rejects(open(tampered));
});

test("RFC 9458 Appendix A: the gateway's side (the test gateway) gives the RFC's encapsulated response", async () => {
  const gateway = new TestGateway(1, hex(A.gateway_private_key), hex(A.gateway_public_key));
  assert.equal(toHex(gateway.keyConfig()), A.key_config);
  const opened = await gateway.decapsulate(hex(A.encapsulated_request));
  assert.ok(opened);
  assert.equal(toHex(opened.request), A.request);
  assert.equal(toHex(await opened.respond(hex(A.response), hex(A.response_nonce))), A.encapsulated_response);
});

test("application/ohttp-keys: length-prefixed configurations, usable ones first, other KEMs skipped, truncation refused", () => {
  const x = hex(A.key_config);
  const chacha = x.slice(0, 35 + 2 + 4);
  chacha.set([0, 4, 0, 1, 0, 3], 35); // only (HKDF-SHA256, ChaCha20-Poly1305)
  chacha[0] = 7;
  const p256 = Uint8Array.of(9, 0, 0x10, ...new Array(65).fill(4), 0, 4, 0, 1, 0, 1);
  const prefixed = (/** @type {Uint8Array} */ c) => Uint8Array.of(c.length >> 8, c.length & 255, ...c);
  const configs = parseKeyConfigs(Uint8Array.of(...prefixed(chacha), ...prefixed(p256), ...prefixed(x)));
  assert.deepEqual(configs.map((c) => c.keyId), [1, 7]);
  assert.throws(() => parseKeyConfigs(prefixed(x).subarray(0, 20)), /truncated/);
  assert.throws(() => parseKeyConfigs(Uint8Array.of(0)), /truncated/);
});

test("Binary HTTP: varints of every width; a request with fields and content; informational responses skipped", () => {
  assert.deepEqual([...varint(37)], [0x25]);
  assert.deepEqual([...varint(15293)], [0x7b, 0xbd]);
  assert.deepEqual([...varint(494878333)], [0x9d, 0x7f, 0x3e, 0x7d]); // RFC 9000 A.1's examples
  const body = new TextEncoder().encode('{"reports":[]}');
  const request = encodeRequest({ method: "POST", scheme: "https", authority: "c.example:8443", path: "/v1/reports",
    headers: [["Content-Type", "application/json"]], body });
  assert.deepEqual(decodeRequest(request), { method: "POST", scheme: "https", authority: "c.example:8443",
    path: "/v1/reports", headers: [["content-type", "application/json"]], body });
  const final = encodeResponse(503, [["retry-after", "7"]], new TextEncoder().encode("{}"));
  const informational = Uint8Array.of(0x40, 103, 4, 1, 0x61, 1, 0x62); // 103 with one field "a: b"
  const withInfo = Uint8Array.of(1, ...informational, ...final.subarray(1));
  assert.deepEqual(decodeResponse(withInfo), { status: 503, headers: [["retry-after", "7"]], body: new TextEncoder().encode("{}") });
  assert.throws(() => decodeResponse(Uint8Array.of(0, 0)), /known-length response/);
});

/** A relay and gateway in one: what ``Relay`` sends is decapsulated, handled by ``handle``,
 *  answered encapsulated. Knows keys ``gateways``; ``served`` is the key config offered. */
function network({ gateways, served, handle = null, relayStatus = null, tamper = false }) {
  const log = { keyUrls: /** @type {string[]} */ ([]), keyFetches: 0, posts: 0, bodies: /** @type {Uint8Array[]} */ ([]), requests: /** @type {any[]} */ ([]) };
  /** @type {typeof fetch} */
  const fetchImpl = async (url, init) => {
    if (String(url).endsWith("/.well-known/ohttp-gateway")) {
      log.keyUrls.push(String(url));
      log.keyFetches++;
      return new Response(served().keys(), { headers: { "Content-Type": "application/ohttp-keys", "Cache-Control": "max-age=60" } });
    }
    log.posts++;
    assert.equal(/** @type {any} */ (init?.headers)["Content-Type"], "message/ohttp-req");
    assert.equal(init?.credentials, "omit");
    if (relayStatus) return new Response("slow down", { status: relayStatus, headers: { "Retry-After": "9" } });
    const body = new Uint8Array(/** @type {ArrayBuffer} */ (init?.body).buffer ?? init?.body);
    log.bodies.push(body);
    for (const g of gateways()) {
      const opened = await g.decapsulate(body);
      if (!opened) continue;
      const inner = decodeRequest(opened.request);
      log.requests.push(inner);
      const [status, json] = handle ? handle(inner) : [200, { accepted: 0 }];
      const answer = await opened.respond(encodeResponse(status, [["content-type", "application/json"]], new TextEncoder().encode(JSON.stringify(json))));
      if (tamper) answer[answer.length - 1] ^= 1;
      return new Response(answer, { headers: { "Content-Type": "message/ohttp-res" } });
    }
    return new Response(JSON.stringify({ type: KEY_PROBLEM, title: "unknown key" }), { status: 400, headers: { "Content-Type": "application/problem+json" } });
  };
  return { fetchImpl, log };
}

const newGateway = async (/** @type {number} */ id) => {
  const seed = globalThis.crypto.getRandomValues(new Uint8Array(32));
  const k = await deriveKeyPair(seed);
  return new TestGateway(id, k.secret, k.publicKey);
};

test("Relay.fetch: the inner request carries method, target, content type and body; the answer comes back as a Response", async () => {
  const g = await newGateway(3);
  const { fetchImpl, log } = network({ gateways: () => [g], served: () => g, handle: () => [200, { accepted: 2, duplicates: 0 }] });
  const relay = new Relay("https://relay.example/relay", { fetch: fetchImpl });
  const r = await relay.fetch("https://collector.example:8443/v1/reports", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: '{"reports":[1,2]}',
  });
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { accepted: 2, duplicates: 0 });
  assert.deepEqual(log.requests, [{ method: "POST", scheme: "https", authority: "collector.example:8443", path: "/v1/reports",
    headers: [["content-type", "application/json"]], body: new TextEncoder().encode('{"reports":[1,2]}') }]);
  assert.ok(!new TextDecoder().decode(log.bodies[0]).includes("reports"), "the relay sees no plaintext");
  await relay.fetch("https://collector.example:8443/v1/reports", { method: "POST", body: "{}" });
  assert.equal(log.keyFetches, 1, "the key configuration is cached (max-age=60)");
  assert.deepEqual(log.keyUrls, ["https://collector.example:8443/.well-known/ohttp-gateway"]);
  assert.notEqual(toHex(log.bodies[0].subarray(7, 39)), toHex(log.bodies[1].subarray(7, 39)), "a fresh ephemeral key per request");
});

test("Relay.fetch: a key the gateway no longer has → the key configuration is fetched again and the request sent once more", async () => {
  const old = await newGateway(1);
  const rotated = await newGateway(2);
  let live = [old];
  let offered = old;
  const { fetchImpl, log } = network({ gateways: () => live, served: () => offered });
  const relay = new Relay("https://relay.example/relay", { fetch: fetchImpl });
  assert.equal((await relay.fetch("https://c.example/v1/reports", { method: "POST", body: "{}" })).status, 200);
  live = [rotated];
  offered = rotated;
  assert.equal((await relay.fetch("https://c.example/v1/reports", { method: "POST", body: "{}" })).status, 200);
  assert.deepEqual([log.keyFetches, log.posts, relay.counts.keyRetries], [2, 3, 1]);
  // the gateway keeps refusing (a stale cache between): once, then an error the uploader retries later
  offered = old;
  live = [rotated];
  relay.cached = null;
  await assert.rejects(relay.fetch("https://c.example/v1/reports", { method: "POST", body: "{}" }), /does not have/);
  assert.deepEqual([log.keyFetches, log.posts], [4, 5]);
});

test("Relay.fetch: a tampered response rejects (retried later), the relay's own 429 comes back as it is, keys pinned in the app are never fetched", async () => {
  const g = await newGateway(4);
  const tampered = network({ gateways: () => [g], served: () => g, tamper: true });
  const relay = new Relay("https://relay.example/relay", { fetch: tampered.fetchImpl });
  await assert.rejects(relay.fetch("https://c.example/v1/reports", { method: "POST", body: "{}" }), /decapsulated/);
  const busy = network({ gateways: () => [g], served: () => g, relayStatus: 429 });
  const r = await new Relay("https://relay.example/relay", { fetch: busy.fetchImpl })
    .fetch("https://c.example/v1/reports", { method: "POST", body: "{}" });
  assert.deepEqual([r.status, r.headers.get("retry-after")], [429, "9"]);
  const pinned = network({ gateways: () => [g], served: () => g });
  const p = new Relay("https://relay.example/relay", { keys: g.keys(), fetch: pinned.fetchImpl });
  assert.equal((await p.fetch("https://c.example/v1/reports", { method: "POST", body: "{}" })).status, 200);
  assert.equal(pinned.log.keyFetches, 0);
  assert.equal(await Relay.supported(), true); // Node 20's Web Crypto has X25519
});

test("Relay keys: fetched when the client is made, not before an upload; once expired, refreshed apart from the uploads", async () => {
  const g = await newGateway(6);
  const { fetchImpl, log } = network({ gateways: () => [g], served: () => g });
  const order = /** @type {string[]} */ ([]);
  /** @type {typeof fetch} */
  const traced = async (url, init) => { order.push(String(url).endsWith("ohttp-gateway") ? "keys" : "post"); return fetchImpl(url, init); };
  let now = 0;
  const relay = new Relay("https://relay.example/relay", { fetch: traced, now: () => now });
  relay.refreshDelay = [300, 0];
  relay.prepare("https://c.example");
  await relay.pending;
  assert.deepEqual(order, ["keys"]);
  await relay.fetch("https://c.example/v1/reports", { method: "POST", body: "{}" });
  // The refresh's timer runs when the test says (a loaded machine may take longer than
  // its 300 ms to seal the upload: that is not a fetch before the upload).
  mock.timers.enable({ apis: ["setTimeout"] });
  try {
    now = 61_000; // past the max-age=60 the test gateway gives
    await relay.fetch("https://c.example/v1/reports", { method: "POST", body: "{}" });
    assert.deepEqual(order, ["keys", "post", "post"], "the expired key was used, nothing fetched before the upload");
    mock.timers.tick(300); // the refresh, at a moment of its own
    await relay.pending;
  } finally {
    mock.timers.reset();
  }
  assert.deepEqual(order, ["keys", "post", "post", "keys"]);
  assert.equal(log.keyFetches, 2);
});

const DEFINITION = { name: "app.theme", version: 1, kind: "categorical", domain: ["light", "dark", "auto"], mechanism: { mechanism: "grr", epsilon: 1.0, domain_size: 3 }, budget: null };

test("Client with a relay: reports and definitions go through the relay (nothing reaches the collector directly), each accepted once, with the direct path's retries", async () => {
  const g = await newGateway(5);
  const seen = new Set();
  let down = 1; // the gateway's collector answers 503 once: the uploader backs off and resends
  const { fetchImpl, log } = network({
    gateways: () => [g], served: () => g,
    handle: (inner) => {
      if (inner.method === "GET") return [200, DEFINITION];
      if (down-- > 0) return [503, { error: "busy" }];
      const reports = JSON.parse(new TextDecoder().decode(inner.body)).reports;
      let duplicates = 0;
      for (const r of reports) { if (seen.has(r.id)) duplicates++; seen.add(r.id); }
      return [200, { accepted: reports.length - duplicates, duplicates }];
    },
  });
  const direct = [];
  /** @type {typeof fetch} */
  const collectorFetch = async (url) => {
    direct.push(String(url));
    return new Response(JSON.stringify(DEFINITION), { headers: { "Content-Type": "application/json" } });
  };
  const relay = new Relay("https://relay.example/relay", { fetch: fetchImpl });
  const client = new Client("https://c.example", { fetch: collectorFetch, relay, storage: new MemoryStorage(), flushAt: 1000, random: () => 0 });
  for (let i = 0; i < 30; i++) assert.equal(await client.report("app.theme", i % 3), true);
  assert.equal(await client.flush(), false); // the 503: kept, retried after the backoff
  assert.equal(client.stats().retries, 1);
  assert.equal(await client.flush(), true);
  assert.equal(seen.size, 30);
  assert.deepEqual(client.stats().accepted, 30);
  assert.deepEqual(direct, [], "no request of the client reaches the collector directly");
  const [definition, ...uploads] = log.requests;
  assert.deepEqual(definition, { method: "GET", scheme: "https", authority: "c.example", path: "/v1/metrics/app.theme", headers: [], body: new Uint8Array(0) });
  assert.ok(uploads.length === 2 && uploads.every((r) => r.method === "POST" && r.path === "/v1/reports" && r.authority === "c.example"));
  await client.shutdown();
});
