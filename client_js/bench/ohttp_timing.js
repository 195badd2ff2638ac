// OHTTP's cost on the device per batch, for benchmarks/bench_client_js.py (Node) and
// benchmarks/bench_client_js_browser.py (Chromium): one module both import.
import { buildReport, encodeReport } from "../src/wire.js";
import { encapsulate, parseKeyConfigs } from "../src/ohttp.js";
import { decodeResponse, encodeRequest } from "../src/bhttp.js";
import { deriveKeyPair } from "../src/hpke.js";
import { TestGateway, encodeResponse } from "../test/ohttp_gateway.js";

const GRR = { name: "bench.grr", version: 1, kind: "categorical", domain: ["a", "b", "c", "d"],
  mechanism: { mechanism: "grr", epsilon: 1.0, domain_size: 4 }, budget: null };
const utf8 = new TextEncoder();

/** µs per batch of ``size`` GRR reports: encode + encapsulate, and decapsulate + decode the
 *  answer. Each is timed over blocks of ``n`` batches (a browser's clock is coarse: 100 µs
 *  without cross-origin isolation) and the median of 7 blocks' means is kept, after one
 *  untimed block (the machine is shared: a mean over all would carry others' bursts). */
export async function timeOhttp(size, n) {
  const k = await deriveKeyPair(crypto.getRandomValues(new Uint8Array(32)));
  const gateway = new TestGateway(1, k.secret, k.publicKey);
  const config = parseKeyConfigs(gateway.keys())[0];
  const reports = [];
  for (let i = 0; i < size; i++) reports.push(encodeReport(await buildReport(GRR, i % 4), GRR));
  const body = `{"reports":[${reports.join(",")}]}`;
  const json = utf8.encode(`{"accepted":${size},"duplicates":0}`);
  const answer = encodeResponse(200, [["content-type", "application/json"]], json);
  const seal = [], open = [];
  for (let round = 0; round < 8; round++) {
    const sealed = [];
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const request = encodeRequest({ method: "POST", scheme: "https", authority: "c.example",
        path: "/v1/reports", headers: [["content-type", "application/json"]], body: utf8.encode(body) });
      sealed.push(await encapsulate(config, request));
    }
    const t1 = performance.now();
    const responses = [];
    for (const s of sealed) responses.push(await (await gateway.decapsulate(s.body)).respond(answer));
    const t2 = performance.now();
    for (let i = 0; i < n; i++) decodeResponse(await sealed[i].open(responses[i]));
    const t3 = performance.now();
    if (round > 0) { seal.push((t1 - t0) / n); open.push((t3 - t2) / n); }
  }
  const median = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1] * 1000;
  return { bytes: body.length, seal: median(seal), open: median(open) };
}
