/* A metric's breakdown by a public dimension: one estimate per group with its interval
 * (grouped bars), groups below the minimum count listed with the reason they are not
 * shown. Every number comes from /v1/estimates/<name>?by=<dimension>. Dimensions are
 * public: the view says they are not protected by ε. */
(function () {
  "use strict";
  const L = window.LDP;
  const page = L.page;
  const $ = (id) => document.getElementById(id);
  const state = { by: $("segments-by").value };
  const PALETTE = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];

  function errorBars(rows, value) {
    return {
      type: "data", symmetric: false, visible: true, color: "#1e293b", thickness: 1.2, width: 3,
      array: rows.map((r) => (r.ci_high === null ? null : r.ci_high - value(r))),
      arrayminus: rows.map((r) => (r.ci_low === null ? null : value(r) - r.ci_low)),
    };
  }

  function summary(est) {
    if (est.kind === "numeric") {
      return "mean " + L.num(est.mean) + " [" + L.num(est.ci_low) + ", " + L.num(est.ci_high) + "]";
    }
    return est.estimates.map((r) => r.value + " " + L.pct(r.frequency) + " [" + L.pct(r.ci_low) + ", " + L.pct(r.ci_high) + "]").join("; ");
  }

  function renderChart(body) {
    const chart = $("segments-chart");
    if (!L.hasPlotly()) { chart.textContent = "The chart library did not load; the table below has every number."; return; }
    const shown = body.groups.filter((g) => g.shown);
    let traces;
    let labels;
    let title;
    if (shown.length && shown[0].estimates.kind === "numeric") {
      const est = shown.map((g) => g.estimates);
      labels = shown.map((g) => g.value);
      traces = [{ type: "bar", uid: "mean", name: "mean ± interval", x: labels,
        y: est.map((e) => e.mean), error_y: errorBars(est, (e) => e.mean), marker: { color: L.colors.raw } }];
      title = "mean";
    } else {
      labels = shown.length ? shown[0].estimates.estimates.map((r) => r.value) : [];
      traces = shown.map((g, i) => ({
        type: "bar", uid: "group-" + i, name: body.by + " = " + L.plotText(g.value),
        x: g.estimates.estimates.map((r) => r.value), y: g.estimates.estimates.map((r) => r.frequency),
        error_y: errorBars(g.estimates.estimates, (r) => r.frequency), marker: { color: PALETTE[i % PALETTE.length] },
      }));
      title = "share of the group's users";
    }
    L.drawBars(chart, labels, traces,
      { title: { text: title }, tickformat: title === "mean" ? undefined : ".0%", visible: shown.length > 0 },
      {
        barmode: "group", bargap: 0.2,
        annotations: shown.length ? [] : [{ text: "no group has enough reports to be shown", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }],
      });
  }

  function renderTable(body) {
    const tbody = $("segments-table").querySelector("tbody");
    tbody.replaceChildren(...body.groups.map((g) => L.el("tr", { dataset: { group: g.value, shown: String(g.shown) } }, [
      L.el("td", { className: "value", textContent: body.by + " = " + g.value }),
      L.el("td", { className: "num", textContent: g.shown ? L.int(g.estimates.n) : "hidden" }),
      L.el("td", { textContent: g.shown ? summary(g.estimates) : "not shown" }),
      L.el("td", { className: "small", textContent: g.shown ? "" : g.reason }),
    ])));
    $("segments-released").textContent = body.not_protected + " " + body.released;
  }

  async function refresh() {
    const windowSelect = $("window-select");
    const window_ = windowSelect ? windowSelect.value : "all";
    const body = await L.getJSON(L.url(page.api.estimates, { by: state.by, window: window_ }));
    renderChart(body);
    renderTable(body);
  }

  const poller = L.poll(refresh, page.refresh);
  $("segments-by").addEventListener("change", (e) => { state.by = e.target.value; poller.now(); });
  const windowSelect = $("window-select");
  if (windowSelect) windowSelect.addEventListener("change", () => poller.now());
})();
