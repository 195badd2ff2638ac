/* /ui/try: report one value of a categorical metric (with its public dimensions, if it
 * has any) from this browser. The JavaScript SDK (served by the collector at page.sdk)
 * randomizes it here; the page shows the exact body of the upload next to the true value,
 * then polls the metric's estimates until the aggregator has counted it. When the
 * collector refuses the upload, whatever its reason, the page shows its answer instead. */
const page = JSON.parse(document.getElementById("ldp-page").textContent);
const $ = (id) => document.getElementById(id);
const metrics = page.metrics || [];

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
  if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
  return response.json();
}

function option(value, label) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = label;
  return o;
}

/** Statuses after which the SDK sends the report again (client_js/src/client.js classify). */
const retried = (status) => status === 408 || status === 429 || (status >= 500 && status !== 501);

/** The collector's refusal of an upload, in its words ("HTTP 410: metric … was retired
 * …"), or null when it took every report. Its answer lists refused reports in `rejected`
 * with their errors (a report of the wrong shape, a malformed field or payload, an
 * unknown metric, a retired one, an implausible payload), or, refusing the request as a
 * whole (400, 413, 415, 429, 503, …), says why in `error` and `details`. */
function refusal({ status, body }) {
  const rejected = Array.isArray(body.rejected) ? body.rejected : [];
  if (status >= 200 && status < 300 && !rejected.length) return null;
  const first = rejected.find((r) => r && r.error);
  const why = first
    ? first.error
    : [body.error, ...(Array.isArray(body.details) ? body.details : [])].filter((x) => typeof x === "string").join(": ");
  return `HTTP ${status}${why ? `: ${why}` : ""}`;
}

/** One select per public dimension of `m`, in `fieldset` (hidden when it has none). */
function dimensionSelects(fieldset, m) {
  const dims = m.dimensions || [];
  fieldset.hidden = !dims.length;
  fieldset.querySelectorAll("label").forEach((l) => l.remove());
  dims.forEach((d, i) => {
    const select = document.createElement("select");
    select.id = `try-dim-${i}`;
    select.dataset.dimension = d.name;
    select.replaceChildren(...d.values.map((v) => option(v, v)));
    const label = document.createElement("label");
    label.append(d.name, select);
    fieldset.append(label);
  });
}

function showEstimates(answer) {
  $("try-n").textContent = String(answer.n);
  const fmt = (x) => (x === null || x === undefined ? "—" : Number(x).toFixed(3));
  $("try-estimates").tBodies[0].replaceChildren(...answer.estimates.map((row) => {
    const tr = document.createElement("tr");
    for (const text of [row.value, fmt(row.frequency), `${fmt(row.ci_low)} – ${fmt(row.ci_high)}`]) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  }));
}

async function main() {
  const status = $("try-status");
  const metricSelect = $("try-metric");
  const fill = () => {
    const m = metrics[Number(metricSelect.value)];
    $("try-value").replaceChildren(...m.domain.map((v) => option(v, v)));
    dimensionSelects($("try-dimensions"), m);
  };
  metricSelect.addEventListener("change", fill);
  fill();

  let bodies = [];
  let answers = []; // the collector's answers to this send's uploads: {status, body}
  let Client, MemoryStorage;
  try {
    ({ Client, MemoryStorage } = await import(page.sdk));
  } catch (e) {
    status.textContent = `the SDK did not load: ${e}`;
    return;
  }
  // This page is its own device: nothing kept after it closes; every upload recorded.
  const client = new Client(window.location.origin, {
    storage: new MemoryStorage(),
    flushAt: 1_000,
    flushInterval: 3_600_000,
    fetch: async (url, init) => {
      const upload = Boolean(init && init.method === "POST");
      if (upload) bodies.push(init.body);
      const response = await fetch(url, init);
      if (upload) {
        const body = await response.clone().json().catch(() => ({}));
        answers.push({ status: response.status, body: body && typeof body === "object" ? body : {} });
      }
      return response;
    },
  });
  status.textContent = "ready";
  $("try-send").disabled = false;

  let polling = 0;
  $("try-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const m = metrics[Number(metricSelect.value)];
    const value = $("try-value").value;
    const run = ++polling;
    $("try-send").disabled = true;
    try {
      status.textContent = "randomizing…";
      const before = (await getJSON(m.estimates)).n;
      const dropped = { ...client.stats().dropped };
      const selects = Array.from($("try-dimensions").querySelectorAll("select"));
      const dimensions = selects.length ? Object.fromEntries(selects.map((s) => [s.dataset.dimension, s.value])) : undefined;
      bodies = [];
      answers = [];
      if (!(await client.report(m.name, value, dimensions))) {
        const now = client.stats().dropped;
        const why = Object.keys(now).filter((k) => now[k] > (dropped[k] || 0));
        status.textContent = `not sent: ${why.join(", ") || "refused"}`;
        return;
      }
      const delivered = await client.flush();
      // The last answer, if it refused; else the last that refused reports the SDK then
      // dropped (a 413 of a batch it halved and sent again is no refusal of a report).
      const after = client.stats().dropped;
      const lost = ["rejected", "too_large", "retired"].some((k) => after[k] > (dropped[k] || 0));
      const seen = answers.map((a) => ({ ...a, why: refusal(a) }));
      const last = seen[seen.length - 1];
      const refusedBy = last && last.why ? last : lost ? seen.filter((a) => a.why && !retried(a.status)).pop() : undefined;
      const refused = Boolean(refusedBy) && !retried(refusedBy.status);
      if (refused) {
        status.textContent = `refused by the collector: ${refusedBy.why}`;
      } else if (refusedBy) {
        status.textContent = `not delivered yet: the collector answered ${refusedBy.why}; the SDK sends it again after its backoff`;
      } else if (!delivered && !answers.length) {
        status.textContent = "not delivered yet (the collector did not answer); it will be retried";
      } else {
        status.textContent = "sent; waiting for the aggregator to count it…";
      }
      $("try-result").hidden = false;
      $("try-true").textContent = value;
      $("try-payload").textContent = bodies.join("\n");
      $("try-name").textContent = `${m.name} v${m.version}`;
      $("try-link").href = m.page;
      $("try-n").textContent = String(before);
      $("try-n-status").textContent = "(before)";
      if (refusedBy) return; // refused, for good or for now: in the collector's words
      const deadline = Date.now() + 60_000;
      while (run === polling && Date.now() < deadline) {
        const answer = await getJSON(m.estimates);
        showEstimates(answer);
        if (answer.n > before) {
          $("try-n-status").textContent = `(was ${before})`;
          status.textContent = "counted";
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      if (run === polling) status.textContent = "not counted within a minute: is the aggregator running?";
    } catch (e) {
      status.textContent = String(e);
    } finally {
      $("try-send").disabled = false;
    }
  });
}

if (metrics.length) main();
