/* Overview: refresh n, last update, lag and memory of every metric from /v1/overview. */
(function () {
  "use strict";
  const { page, getJSON, int } = window.LDP;
  const table = document.getElementById("overview-table");

  // Bytes as the server writes them (ldp_store.lifecycle.human_bytes: powers of 1000).
  function bytes(n) {
    if (n === null || n === undefined) return "—";
    let value = n;
    for (const unit of ["B", "kB", "MB"]) {
      if (Math.abs(value) < 1000) return unit === "B" ? value.toFixed(0) + " B" : value.toFixed(1) + " " + unit;
      value /= 1000;
    }
    return value.toFixed(2) + " GB";
  }

  function showMemory(memory) {
    const line = document.getElementById("redis-memory");
    if (!memory || !line.querySelector('[data-field="used"]')) return;
    line.querySelector('[data-field="used"]').textContent = bytes(memory.used);
    if (memory.maxmemory) {
      line.querySelector('[data-field="maxmemory"]').textContent = bytes(memory.maxmemory);
      line.querySelector('[data-field="share"]').textContent =
        "(" + Math.round((100 * memory.used) / memory.maxmemory) + " %)";
    }
    const guard = line.querySelector('[data-field="guard"]');
    if (guard) guard.textContent = bytes(memory.guard);
    const budget = line.querySelector('[data-field="guard_budget"]');
    if (budget && memory.guard_budget) {
      budget.textContent = "of its budget " + bytes(memory.guard_budget) + " (" +
        Math.round((100 * memory.guard) / memory.guard_budget) + " %; a metric past its share forgets older ids)";
    }
  }

  function shown() {
    return Array.from(table.querySelectorAll("tbody tr")).map((tr) => tr.dataset.metric + ":" + tr.dataset.version);
  }

  async function refresh() {
    const body = await getJSON(page.api.overview);
    const latest = body.metrics.map((m) => m.name + ":" + m.version);
    if (latest.join(",") !== shown().join(",")) {
      window.location.reload(); // a metric was added or got a new version: render it anew
      return;
    }
    for (const m of body.metrics) {
      const tr = table.querySelector('tr[data-metric="' + CSS.escape(m.name) + '"]');
      tr.querySelector('[data-field="n"]').textContent = int(m.n);
      const last = tr.querySelector('[data-field="last_window"]');
      last.dataset.window = m.last_window || "";
      last.replaceChildren(
        window.LDP.el("span", { className: "when", textContent: window.LDP.windowAgo(m.last_window) }),
        window.LDP.el("div", { className: "small muted", textContent: window.LDP.windowAt(m.last_window) }),
      );
      const lag = m.lag.length.toLocaleString("en-US") + " waiting" +
        (m.lag.pending ? ", " + m.lag.pending.toLocaleString("en-US") + " in progress" : "");
      tr.querySelector('[data-field="lag"]').textContent = lag;
      const relayed = tr.querySelector('[data-field="relayed"]');
      const waiting = m.relayed_waiting;
      relayed.hidden = !waiting;
      relayed.textContent = waiting ? "+ " + int(waiting.reports) + " relayed, waiting for a " +
        "shuffled batch until " + waiting.released_by.slice(0, 16).replace("T", " ") +
        " UTC at the latest" : "";
      window.LDP.renderAlarms(tr.querySelector('[data-field="alarms"]'), m.alarms);
      const memory = tr.querySelector('[data-field="memory"]');
      memory.dataset.bytes = m.memory_bytes === null ? "" : String(m.memory_bytes);
      memory.firstChild.textContent = bytes(m.memory_bytes);
    }
    showMemory(body.memory);
  }

  window.LDP.poll(refresh, page.refresh);
})();
