/* /ui/try: report one value of a categorical metric from this browser. The JavaScript SDK
 * (served by the collector at page.sdk) randomizes it here; the page shows the exact body
 * of the upload next to the true value, then polls the metric's estimates until the
 * aggregator has counted it. */
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
  };
  metricSelect.addEventListener("change", fill);
  fill();

  let bodies = [];
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
    fetch: (url, init) => {
      if (init && init.method === "POST") bodies.push(init.body);
      return fetch(url, init);
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
      bodies = [];
      if (!(await client.report(m.name, value))) {
        const now = client.stats().dropped;
        const why = Object.keys(now).filter((k) => now[k] > (dropped[k] || 0));
        status.textContent = `not sent: ${why.join(", ") || "refused"}`;
        return;
      }
      const delivered = await client.flush();
      const after = client.stats();
      const refused = ["rejected", "too_large"].some((k) => after.dropped[k] > (dropped[k] || 0));
      if (refused) {
        status.textContent = `refused by the collector: ${after.last_refusal}`;
      } else if (!delivered) {
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
      if (refused) return;
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
