/* A distribution metric's page: the CDF with its simultaneous band, the quantiles read
 * off it, and each window's quantiles over time. Every number comes from
 * /v1/estimates/<name> and /v1/estimates/<name>/trend. */
(function () {
  "use strict";
  const L = window.LDP;
  const page = L.page;
  const $ = (id) => document.getElementById(id);
  const num = (x) => (x === null || x === undefined ? "—" : Number(x).toPrecision(4));
  const label = (p) => "p" + String(Math.round(p * 1000) / 10);
  const state = { granularity: "hour" };

  function renderQuantiles(body) {
    const rows = body.quantiles.map((q) => L.el("tr", { dataset: { p: String(q.p) } }, [
      L.el("td", { textContent: label(q.p) }),
      L.el("td", { className: "num", textContent: num(q.value) }),
      L.el("td", { className: "num", textContent: "[" + num(q.ci_low) + ", " + num(q.ci_high) + "]" }),
    ]));
    const empty = L.el("tr", {}, [L.el("td", { textContent: "no estimate until every level has a report" })]);
    $("quantiles-table").querySelector("tbody").replaceChildren(...(rows.length ? rows : [empty]));
  }

  function renderCdf(body) {
    const chart = $("cdf-chart");
    if (!L.hasPlotly()) { chart.textContent = "The chart library did not load; the JSON has every number."; return; }
    const x = body.cdf.map((p) => p.value);
    const line = (y, extra) => ({ type: "scatter", mode: "lines", x, y, ...extra });
    L.draw(chart, function () {
      return {
        traces: [
          line(body.cdf.map((p) => p.band_low), { uid: "band-low", name: "band", line: { width: 0 }, showlegend: false, hoverinfo: "skip" }),
          line(body.cdf.map((p) => p.band_high), { uid: "band-high", name: "simultaneous band", fill: "tonexty",
            fillcolor: "rgba(37, 99, 235, 0.18)", line: { width: 0 } }),
          line(body.cdf.map((p) => p.cdf), { uid: "cdf", name: "CDF (unbiased)", line: { color: L.colors.raw, width: 2 } }),
        ],
        layout: L.layout({
          xaxis: { title: { text: "value" }, type: page.scale === "log" ? "log" : "linear", automargin: true },
          yaxis: { title: { text: "share below" }, tickformat: ".0%", range: [-0.05, 1.05], automargin: true },
          annotations: body.ready ? [] : [{ text: "no estimate yet", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }],
        }),
      };
    });
  }

  function renderTrend(trend) {
    const chart = $("trend-chart");
    if (!L.hasPlotly()) return;
    const windows = trend.windows || [];
    const period = trend.granularity === "day" ? 86400e3 : 3600e3;
    const times = windows.map((w) => L.windowTime(w.window));
    const x = times.map((t) => L.plotlyDate(t + period / 2)); // a window at its middle
    const text = windows.map((w) => L.windowAt(w.window));
    const range = times.length ? [L.plotlyDate(Math.min(...times) - period / 2), L.plotlyDate(Math.max(...times) + period * 1.5)] : undefined;
    const ps = [];
    windows.forEach((w) => w.quantiles.forEach((q) => { if (!ps.includes(q.p)) ps.push(q.p); }));
    const traces = ps.map((p, s) => {
      const color = L.colors.series[s % L.colors.series.length];
      const at = windows.map((w) => w.quantiles.find((q) => q.p === p) || null);
      const y = at.map((q) => (q ? q.value : null));
      return {
        type: "scatter", mode: "lines+markers", name: label(p), meta: label(p), x, y, text,
        line: { color, width: 2 }, marker: { color, size: 7 },
        error_y: {
          type: "data", symmetric: false, color, thickness: 1, width: 2,
          array: at.map((q) => (q ? q.ci_high - q.value : null)),
          arrayminus: at.map((q) => (q ? q.value - q.ci_low : null)),
        },
        hovertemplate: "%{text}<br>" + label(p) + " %{y:.4g}<extra></extra>",
      };
    });
    traces.push({
      type: "bar", name: "reports in the window (n)", meta: "n", x, y: windows.map((w) => w.n), yaxis: "y2", width: 0.8 * period,
      text, textposition: "none", marker: { color: "rgba(100,116,139,0.16)" }, hovertemplate: "%{text}<br>n = %{y:,}<extra></extra>",
    });
    const empty = !windows.some((w) => w.n > 0);
    L.draw(chart, function (width) {
      return {
        traces,
        layout: L.layout({
          xaxis: { type: windows.length ? "date" : "-", range, title: { text: "time (UTC)" }, automargin: true, visible: !empty,
            nticks: Math.max(2, Math.floor(width / 120)) },
          yaxis: { title: { text: "value" }, type: page.scale === "log" ? "log" : "linear", gridcolor: "#eef2f7", automargin: true, visible: !empty },
          yaxis2: { overlaying: "y", side: "right", showgrid: false, rangemode: "tozero", title: { text: "n" }, automargin: true, visible: !empty, nticks: 5 },
          margin: { l: 56, r: 56, t: 16, b: 56 },
          annotations: empty ? [{ text: "no reports yet", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] : [],
        }),
      };
    });
  }

  async function refreshTrend() {
    let trend;
    try {
      trend = await L.getJSON(L.url(page.api.trend, { granularity: state.granularity }));
      $("trend-error").hidden = true;
    } catch (error) {
      $("trend-error").textContent = error.message;
      $("trend-error").hidden = false;
      return;
    }
    document.body.dataset.granularity = trend.granularity;
    renderTrend(trend);
  }

  async function refresh() {
    const body = await L.getShown(page.api.estimates, "cdf-error");
    if (body === null) return;
    $("fact-n").textContent = L.int(body.n);
    document.querySelectorAll('[data-field="confidence"]').forEach((e) => { e.textContent = Math.round(body.confidence * 100) + " %"; });
    renderQuantiles(body);
    renderCdf(body);
  }

  L.poll(refresh, page.refresh || 0);
  const trendRefresher = L.poll(refreshTrend, page.refresh || 0);
  L.segmented("granularity", (value) => { state.granularity = value; trendRefresher.now(); });
})();
