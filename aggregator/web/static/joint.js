/* A joint metric's page: one attribute's shares, or its breakdown by another (grouped
 * bars with intervals and a heatmap). Every number comes from /v1/estimates/<name>
 * (?marginal=a&by=b). */
(function () {
  "use strict";
  const L = window.LDP;
  const page = L.page;
  const $ = (id) => document.getElementById(id);
  const state = { window: "all", attr: page.attributes[0], by: "" };
  const PALETTE = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];

  function interval(c) {
    return c.ci_low === null ? "—" : "[" + L.pct(c.ci_low) + ", " + L.pct(c.ci_high) + "]";
  }

  function errorBars(cells) {
    return {
      type: "data", symmetric: false, visible: true, color: "#1e293b", thickness: 1.2, width: 3,
      array: cells.map((c) => (c.ci_high === null ? null : c.ci_high - c.frequency)),
      arrayminus: cells.map((c) => (c.ci_low === null ? null : c.frequency - c.ci_low)),
    };
  }

  function renderBars(marginal, n) {
    const chart = $("bars-chart");
    if (!L.hasPlotly()) { chart.textContent = "The chart library did not load; the table below has every number."; return; }
    const cells = marginal.cells;
    let traces;
    let labels;
    if (marginal.attributes.length === 1) {
      labels = cells.map((c) => c.cell[0]);
      traces = [
        { type: "bar", uid: "raw", name: "unbiased ± interval", x: labels, y: cells.map((c) => c.frequency),
          error_y: errorBars(cells), marker: { color: L.colors.raw } },
        { type: "bar", uid: "consistent", name: "consistent (post-processed)", short: "consistent", x: labels,
          y: cells.map((c) => c.consistent), marker: { color: L.colors.normSub } },
      ];
    } else {  // [by, attr]: one bar group per label of attr, one bar per label of by
      const groups = [...new Set(cells.map((c) => c.cell[0]))];
      labels = [...new Set(cells.map((c) => c.cell[1]))];
      traces = groups.map((g, i) => {
        const mine = cells.filter((c) => c.cell[0] === g);
        return { type: "bar", uid: "by-" + i, name: marginal.attributes[0] + " = " + L.plotText(g),
          x: mine.map((c) => c.cell[1]), y: mine.map((c) => c.frequency), error_y: errorBars(mine),
          marker: { color: PALETTE[i % PALETTE.length] } };
      });
    }
    L.drawBars(chart, labels, traces,
      { title: { text: "share of users" }, tickformat: ".0%", visible: n !== 0 },
      {
        barmode: "group", bargap: 0.2, categoryTitle: marginal.attributes[marginal.attributes.length - 1],
        annotations: n === 0 ? [{ text: "no reports yet", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] : [],
      });
  }

  function renderHeatmap(marginal) {
    const chart = $("heatmap-chart");
    const two = marginal.attributes.length === 2;
    chart.hidden = !two;
    $("heatmap-caption").hidden = !two;
    if (!two || !L.hasPlotly()) return;
    const rows = [...new Set(marginal.cells.map((c) => c.cell[0]))];
    const cols = [...new Set(marginal.cells.map((c) => c.cell[1]))];
    const z = rows.map((r) => cols.map((c) => marginal.cells.find((x) => x.cell[0] === r && x.cell[1] === c).frequency));
    L.draw(chart, function (width) {
      // Labels cut to their column's width (columns) or a third of the chart (rows);
      // the hover names each cell whole.
      const left = Math.min(width * 0.3, 240);
      const column = (width - left - 60) / cols.length - 4;
      const cut = (labels, px) => L.fitLabels(labels.map(L.visible), px).map(L.plotText);
      const trace = { type: "heatmap", uid: "heatmap", x: cols.map((c, i) => i), y: rows.map((r, i) => i), z,
        customdata: rows.map((r) => cols.map((c) => [L.plotText(r), L.plotText(c)])),
        // Darker is more; the share in each cell when it fits.
        colorscale: "Blues", reversescale: true, zmin: 0, texttemplate: column > 44 ? "%{z:.1%}" : "",
        colorbar: { thickness: 12, tickformat: ".0%" },
        hovertemplate: "%{customdata[0]} × %{customdata[1]}: %{z:.2%}<extra>unbiased</extra>" };
      const layout = L.layout({
        // Column labels wider than their column are turned by Plotly (and cut at 120 px).
        xaxis: { title: { text: marginal.attributes[1] }, automargin: true, tickmode: "array", tickvals: cols.map((c, i) => i),
          ticktext: cut(cols, 120) },
        yaxis: { title: { text: marginal.attributes[0] }, automargin: true, tickmode: "array", tickvals: rows.map((r, i) => i),
          ticktext: cut(rows, left), autorange: "reversed" },
      });
      return { traces: [trace], layout };
    });
  }

  function renderTable(marginal) {
    const body = $("cells-table").querySelector("tbody");
    body.replaceChildren(...marginal.cells.map((c) => L.el("tr", { dataset: { cell: c.cell.join("|") } }, [
      L.el("td", { className: "value", textContent: c.cell.join(" × ") }),
      L.el("td", { className: "num", textContent: L.pct(c.frequency) }),
      L.el("td", { className: "num", textContent: interval(c) }),
      L.el("td", { className: "num", textContent: L.pct(c.consistent) }),
    ])));
  }

  async function refresh() {
    const url = L.url(page.api.estimates, {
      window: state.window === "all" ? null : state.window,
      marginal: state.attr,
      by: state.by && state.by !== state.attr ? state.by : null,
    });
    $("json-link").href = url;
    const body = await L.getShown(url, "breakdown-error");
    if (body === null) return;
    $("fact-n").textContent = L.int(body.n);
    document.querySelectorAll('[data-field="confidence"]').forEach((e) => { e.textContent = Math.round(body.confidence * 100) + " %"; });
    const marginal = body.marginals[0];
    $("consistent-caption").hidden = marginal.attributes.length !== 1;
    renderBars(marginal, body.n);
    renderHeatmap(marginal);
    renderTable(marginal);
  }

  const poll = L.poll(refresh, page.refresh || 0);
  $("attr-select").addEventListener("change", (e) => { state.attr = e.target.value; poll.now(); });
  $("by-select").addEventListener("change", (e) => { state.by = e.target.value; poll.now(); });
})();
