/* A distribution metric's page: the CDF with its simultaneous band, and the quantiles
 * read off it. Every number comes from /v1/estimates/<name>. */
(function () {
  "use strict";
  const L = window.LDP;
  const page = L.page;
  const $ = (id) => document.getElementById(id);
  const num = (x) => (x === null || x === undefined ? "—" : Number(x).toPrecision(4));

  function renderQuantiles(body) {
    const rows = body.quantiles.map((q) => L.el("tr", { dataset: { p: String(q.p) } }, [
      L.el("td", { textContent: "p" + String(Math.round(q.p * 1000) / 10) }),
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

  async function refresh() {
    let body;
    try {
      body = await L.getJSON(page.api.estimates);
      $("cdf-error").hidden = true;
    } catch (error) {
      $("cdf-error").textContent = error.message;
      $("cdf-error").hidden = false;
      return;
    }
    $("fact-n").textContent = L.int(body.n);
    document.querySelectorAll('[data-field="confidence"]').forEach((e) => { e.textContent = Math.round(body.confidence * 100) + " %"; });
    renderQuantiles(body);
    renderCdf(body);
  }

  L.poll(refresh, page.refresh || 0);
})();
