/* A metric's breakdown by a public dimension: one estimate per group with its interval
 * (grouped bars), groups below the minimum count listed with the reason they are not
 * shown. Every number comes from /v1/estimates/<name>?by=<dimension>, asked with the
 * page's chosen intervals (multiplicity, or the confidence sequence) and estimand, both
 * named in the panel. Dimensions are public: the view says they are not protected by ε. */
(function () {
  "use strict";
  const L = window.LDP;
  const page = L.page;
  const $ = (id) => document.getElementById(id);
  const state = { by: $("segments-by").value };
  const PALETTE = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];

  /* The page's modes (metric.js), the defaults until it has said. */
  const modes = () => (L.modes ? L.modes() : { intervals: "fixed", estimand: "reporters" });
  const anytime = () => modes().intervals === "anytime";
  const low = (r) => (anytime() ? r.cs_low : r.ci_low);
  const high = (r) => (anytime() ? r.cs_high : r.ci_high);

  function errorBars(rows, value) {
    return {
      type: "data", symmetric: false, visible: true, color: "#1e293b", thickness: 1.2, width: 3,
      array: rows.map((r) => (high(r) === null ? null : high(r) - value(r))),
      arrayminus: rows.map((r) => (low(r) === null ? null : value(r) - low(r))),
    };
  }

  function summary(est) {
    if (est.kind === "numeric") {
      return "mean " + L.num(est.mean) + " [" + L.num(low(est)) + ", " + L.num(high(est)) + "]";
    }
    return est.estimates.map((r) => r.value + " " + L.pct(r.frequency) + " [" + L.pct(low(r)) + ", " + L.pct(high(r)) + "]").join("; ");
  }

  /* What the intervals drawn are, in words: whose share (the answer's estimand) and how
   * they account for the many values (its multiplicity, within each group). */
  function describeModes(body) {
    const numeric = body.groups.some((g) => g.shown && g.estimates.kind === "numeric");
    const level = Math.round((body.confidence || 0.95) * 100) + " %";
    const whose = body.estimand === "population"
      ? "the population the devices were drawn from" : "the devices that reported";
    const what = (numeric ? "the mean of " : "the share of ") + whose;
    const how = anytime() ? level + " confidence sequences (valid while you watch)"
      : body.multiplicity === "fdr" ? "few false flags: within each group, values flagged by Benjamini–Hochberg at false discovery rate " + Math.round((1 - body.confidence) * 100) + " %, each interval at the flags' level"
        : body.multiplicity === "simultaneous" ? level + " simultaneous bands: each group's intervals hold for all its values at once"
          : level + " intervals, each for its value alone";
    const el = $("segments-modes");
    el.textContent = "Each group's intervals: " + how + ", for " + what + ".";
    Object.assign($("segments-view").dataset, {
      estimand: body.estimand, multiplicity: body.multiplicity, intervals: modes().intervals,
    });
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
    const m = modes();
    const body = await L.getJSON(L.url(page.api.estimates, {
      by: state.by, window: window_ === "all" ? null : window_,
      multiplicity: m.intervals === "fdr" || m.intervals === "simultaneous" ? m.intervals : null,
      estimand: m.estimand === "population" ? "population" : null,
    }));
    renderChart(body);
    renderTable(body);
    describeModes(body);
  }

  const poller = L.poll(refresh, page.refresh);
  document.addEventListener("ldp:modes", () => poller.now());
  $("segments-by").addEventListener("change", (e) => { state.by = e.target.value; poller.now(); });
  const windowSelect = $("window-select");
  if (windowSelect) windowSelect.addEventListener("change", () => poller.now());
})();
