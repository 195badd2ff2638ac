/* A metric's page: estimates with intervals (raw and Norm-Sub), the table, the trend.
 * Every number comes from /v1/estimates/<name> and /v1/estimates/<name>/trend. */
(function () {
  "use strict";
  const L = window.LDP;
  const page = L.page;
  const TOP = 40; // bars a chart shows by default: more are unreadable on a laptop
  const TREND_SERIES = 6; // lines a trend shows: the values with the largest estimates
  const state = { window: "all", granularity: "hour", showAll: false, intervals: "fixed", estimand: "reporters" };
  const $ = (id) => document.getElementById(id);

  const pick = (w, key) => {
    if (w[key] !== undefined) return w[key];
    if (w.estimate && w.estimate[key] !== undefined) return w.estimate[key];
    if (w.estimates && !Array.isArray(w.estimates) && w.estimates[key] !== undefined) return w.estimates[key];
    return null;
  };
  const level = (body) => Math.round((body.confidence || 0.95) * 100) + " %";

  /* Which interval the page draws: the fixed-n one (one look), the confidence sequence
   * (valid while you watch: cs_low/cs_high), the intervals at the level of flags with a
   * false discovery rate (multiplicity=fdr), or the simultaneous band (simultaneous=true).
   * The flags shown are always the drawn interval's own: 0 outside it. */
  const anytime = () => state.intervals === "anytime";
  const low = (r) => (anytime() ? pick(r, "cs_low") : pick(r, "ci_low"));
  const high = (r) => (anytime() ? pick(r, "cs_high") : pick(r, "ci_high"));
  const flagged = (r) => (anytime() ? r.cs_distinguishable_from_zero : r.distinguishable_from_zero);
  const zeroLike = (r) => flagged(r) === false;
  const below = (r) => flagged(r) === true && high(r) !== null && high(r) < 0;
  const intervalName = (body) =>
    anytime() ? level(body) + " confidence sequence (valid while you watch)"
      : state.intervals === "simultaneous" ? level(body) + " simultaneous band"
        : state.intervals === "fdr" ? "intervals at the flags' level" : level(body) + " CI";

  function renderIntervalNotes(est) {
    const fixedNote = est.intervals_note ||
      (est.interval ? "the " + level(est) + " interval is a " + est.interval + "; it holds for one look" : "");
    const note = anytime() ? est.anytime_note : fixedNote;
    document.querySelectorAll('[data-field="interval-note"]').forEach((e) => {
      e.textContent = note ? note.charAt(0).toUpperCase() + note.slice(1) + "." : "";
    });
    const r = est.reports_per_device || 1;
    document.querySelectorAll('[data-field="per-device-note"]').forEach((e) => {
      e.hidden = r <= 1 && !/predates/.test(est.reports_per_device_note || "");
      e.textContent = "Memoized metric: the intervals assume up to " + L.int(r) +
        " reports from one device in this window (" + (est.reports_per_device_note || "") + ").";
    });
    document.querySelectorAll('[data-field="estimand"]').forEach((e) => {
      e.textContent = est.estimand === "population" ? "the population the devices were drawn from" : "the devices that reported";
    });
    document.querySelectorAll('[data-field="flags-note"]').forEach((e) => {
      e.textContent = anytime() ? "a flag marks a value whose confidence sequence misses 0" : (est.flags_note || "a flag marks a value whose interval misses 0");
    });
    const head = $("interval-head");
    if (head) {
      head.textContent = anytime() ? "valid while you watch" : state.intervals === "simultaneous" ? "simultaneous band"
        : state.intervals === "fdr" && est.level ? "interval at " + (est.level * 100).toPrecision(4) + " %" : "confidence interval";
    }
    const hasSequence = est.kind === "numeric" ? pick(est, "cs_low") !== null || est.n === 0 : true;
    document.querySelectorAll('[data-intervals="anytime"]').forEach((b) => { b.disabled = !hasSequence; });
  }

  /* ε_c of the shuffled view (amplification by shuffling) with its condition; absent for
   * numeric metrics and before any report. */
  function renderShuffled(sh) {
    const box = $("fact-shuffled");
    if (!box) return;
    box.hidden = !sh;
    if (!sh) return;
    box.querySelector('[data-field="shuffled-epsilon"]').textContent = String(sh.epsilon);
    box.querySelector('[data-field="shuffled-delta"]').textContent = sh.delta.toExponential(1);
    box.querySelector('[data-field="shuffled-condition"]').textContent =
      "Holds " + sh.condition.replace(/^holds /, "") + ".";
  }

  function showKind(kind) {
    const numeric = kind === "numeric";
    $("categorical-view").hidden = numeric;
    $("numeric-view").hidden = !numeric;
  }

  /* Whose share the intervals are for: the API's default (the devices that reported) is
   * left out of the URLs; the population's share is asked for with estimand=population. */
  const estimand = () => (state.estimand === "population" ? "population" : null);

  function setLinks() {
    const w = state.window === "all" ? null : state.window;
    $("csv-link").href = L.url(page.csv, { window: w, estimand: estimand() });
    $("json-link").href = L.url(page.api.estimates, { window: w, estimand: estimand() });
  }

  /* -- categorical ------------------------------------------------------------------ */

  function chosenIndices(est) {
    const all = est.estimates.map((_, i) => i);
    if (state.showAll || all.length <= TOP) return all;
    return all
      .slice()
      .sort((a, b) => (est.estimates[b].frequency ?? 0) - (est.estimates[a].frequency ?? 0))
      .slice(0, TOP);
  }

  function renderTopNote(est) {
    const note = $("top-note");
    const k = est.values_total ?? est.estimates.length; // a large domain: the top rows came
    if (k <= TOP) { note.hidden = true; return; }
    note.hidden = false;
    note.replaceChildren(
      state.showAll ? "Showing all " + k + " values. " : "Showing the " + TOP + " largest of " + k + " estimates. ",
      L.el("button", {
        type: "button", className: "linkish", textContent: state.showAll ? "Show the largest only" : "Show all",
        onclick: () => { state.showAll = !state.showAll; refresher.now(); },
      }),
    );
  }

  function renderBars(est) {
    const chart = $("freq-chart");
    if (!L.hasPlotly()) { chart.textContent = "The chart library did not load; the table below has every number."; return; }
    const idx = chosenIndices(est);
    const rows = idx.map((i) => est.estimates[i]);
    const labels = rows.map((r) => r.value);
    const zero = rows.map(zeroLike);
    const f = rows.map((r) => r.frequency);
    const note = (r) => (zeroLike(r) ? "not distinguishable from zero" : below(r) ? "below zero: chance or fake reports" : "");
    const raw = {
      type: "bar", meta: "raw", uid: "raw", name: "Unbiased estimate (raw) ± " + intervalName(est),
      short: "unbiased ± interval",
      x: labels, y: f,
      error_y: {
        type: "data", symmetric: false, visible: true, color: "#1e293b", thickness: 1.3, width: 3,
        array: rows.map((r) => (high(r) === null ? null : high(r) - r.frequency)),
        arrayminus: rows.map((r) => (low(r) === null ? null : r.frequency - low(r))),
      },
      marker: {
        color: zero.map((z) => (z ? L.colors.rawFaint : L.colors.raw)),
        pattern: { shape: zero.map((z) => (z ? "/" : "")), fgcolor: "#1d4ed8", size: 6, solidity: 0.25 },
      },
      customdata: rows.map((r) => [low(r), high(r), note(r), L.plotText(r.value)]),
      hovertemplate: "<b>%{customdata[3]}</b><br>unbiased %{y:.2%}<br>interval [%{customdata[0]:.2%}, %{customdata[1]:.2%}]" +
        "<br>%{customdata[2]}<extra>raw</extra>",
    };
    const normSub = {
      type: "bar", meta: "norm_sub", uid: "norm_sub", name: "Norm-Sub (post-processed, biased)", short: "Norm-Sub (biased)",
      x: labels, y: rows.map((r) => r.norm_sub),
      marker: { color: L.colors.normSub },
      customdata: labels.map(L.plotText),
      hovertemplate: "<b>%{customdata}</b><br>Norm-Sub %{y:.2%}<extra>post-processed</extra>",
    };
    // Labels are drawn as text (ticks never read a label's <b>, <br> or <a> as markup),
    // upright when they fit under their bars, else lying, one row each (LDP.drawBars).
    L.drawBars(chart, labels, [raw, normSub],
      { title: { text: "share of users" }, tickformat: ".0%", visible: est.n !== 0 },
      {
        barmode: "group", bargap: 0.25, bargroupgap: 0.05,
        annotations: est.n === 0 ? [{ text: "no reports yet", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5, font: { size: 16, color: "#64748b" } }] : [],
      });
  }

  function renderTable(est) {
    const body = $("estimates-table").querySelector("tbody");
    const rows = est.estimates.map((r) => {
      const zero = zeroLike(r);
      const half = high(r) === null ? null : high(r) - r.frequency;
      const interval = low(r) === null ? "—" : "[" + L.pct(low(r)) + ", " + L.pct(high(r)) + "]";
      const cell = (label, text, value, cls) =>
        L.el("td", { className: cls || "num", textContent: text, dataset: { label, value: value === null ? "" : String(value) }, attrs: { "data-label": label } });
      return L.el("tr", { className: zero ? "zero" : "", dataset: { value: r.value } }, [
        L.el("td", { className: "value", attrs: { "data-label": "value" } }, L.visibleNodes(r.value)),
        cell("unbiased estimate", L.pct(r.frequency), r.frequency),
        cell("± half-width", half === null ? "—" : "±" + L.points(half) + " pp", half),
        cell("interval", interval, low(r) === null ? null : low(r) + "," + high(r)),
        cell("Norm-Sub", L.pct(r.norm_sub), r.norm_sub),
        cell("support count", L.int(r.support_count), r.support_count),
        L.el("td", { className: "note", textContent: zero ? "not distinguishable from zero" : below(r) ? "below zero: chance or fake reports" : "", attrs: { "data-label": "note" } }),
      ]);
    });
    body.replaceChildren(...rows);
  }

  /* -- numeric ---------------------------------------------------------------------- */

  function renderNumeric(est) {
    const mean = pick(est, "mean");
    const lo = low(est);
    const hi = high(est);
    const se = pick(est, "std_error");
    const shown = $("numeric-mean");
    shown.textContent = mean === null ? "no reports yet" : L.num(mean) + (hi === null ? "" : " ± " + L.num(hi - mean, 3));
    Object.assign(shown.dataset, { mean: String(mean), ciLow: String(lo), ciHigh: String(hi) });
    const range = Array.isArray(est.range) ? " · range [" + est.range.join(", ") + "]" : "";
    $("numeric-detail").textContent = mean === null ? "" :
      intervalName(est) + " [" + L.num(lo) + ", " + L.num(hi) + "] · standard error " + L.num(se, 3) + " · n = " + L.int(est.n) + range;
  }

  /* -- trend ------------------------------------------------------------------------ */

  function renderTrend(est, trend) {
    const chart = $("trend-chart");
    if (!L.hasPlotly()) return;
    const windows = trend.windows || [];
    const period = trend.granularity === "day" ? 86400e3 : 3600e3;
    const times = windows.map((w) => L.windowTime(w.window));
    // Each window is drawn at its middle; its bar of n covers it.
    const x = times.map((t) => L.plotlyDate(t + period / 2));
    const text = windows.map((w) => L.windowAt(w.window));
    // A fixed range of whole windows: with one or two windows Plotly would zoom to
    // milliseconds around them.
    const range = times.length ? [L.plotlyDate(Math.min(...times) - period / 2), L.plotlyDate(Math.max(...times) + period * 1.5)] : undefined;
    const traces = [];
    if (est.kind === "numeric") {
      const mean = windows.map((w) => pick(w, "mean"));
      traces.push({
        type: "scatter", mode: "lines+markers", name: "mean ± " + intervalName(trend), meta: "mean", x, y: mean,
        line: { color: L.colors.raw }, marker: { size: 7 }, text,
        hovertemplate: "%{text}<br>mean %{y:.4g}<extra></extra>",
        error_y: {
          type: "data", symmetric: false, color: L.colors.raw,
          array: windows.map((w, i) => (high(w) === null ? null : high(w) - mean[i])),
          arrayminus: windows.map((w, i) => (low(w) === null ? null : mean[i] - low(w))),
        },
      });
    } else {
      // The trend's windows hold every value in the domain's order; the estimate may show
      // only its largest (a large domain), so a value is found in a window by its label.
      const at = new Map(windows.length ? windows[0].estimates.map((r, j) => [r.value, j]) : []);
      const order = est.estimates.map((_, i) => i)
        .filter((i) => at.has(est.estimates[i].value))
        .sort((a, b) => (est.estimates[b].frequency ?? 0) - (est.estimates[a].frequency ?? 0))
        .slice(0, TREND_SERIES);
      order.forEach((i, s) => {
        const color = L.colors.series[s % L.colors.series.length];
        const j = at.get(est.estimates[i].value);
        const f = windows.map((w) => w.estimates[j].frequency);
        const label = L.plotText(est.estimates[i].value); // a legend reads pseudo-HTML too
        traces.push({
          type: "scatter", mode: "lines+markers", name: label, whole: L.visible(est.estimates[i].value), meta: est.estimates[i].value, x, y: f,
          line: { color, width: 2 }, marker: { color, size: 7 },
          error_y: {
            type: "data", symmetric: false, color, thickness: 1, width: 2,
            array: windows.map((w, m) => (high(w.estimates[j]) === null ? null : high(w.estimates[j]) - f[m])),
            arrayminus: windows.map((w, m) => (low(w.estimates[j]) === null ? null : f[m] - low(w.estimates[j]))),
          },
          text, customdata: windows.map(() => label), hovertemplate: "%{text}<br>%{customdata}: %{y:.2%}<extra></extra>",
        });
      });
    }
    traces.push({
      type: "bar", name: "reports in the window (n)", meta: "n", x, y: windows.map((w) => w.n), yaxis: "y2", width: 0.8 * period,
      text, textposition: "none", marker: { color: "rgba(100,116,139,0.16)" }, hovertemplate: "%{text}<br>n = %{y:,}<extra></extra>",
    });
    const numeric = est.kind === "numeric";
    // No report in any window: no axes at all (Plotly's empty ones run −1…6 and mean nothing).
    const empty = !windows.some((w) => w.n > 0);
    L.draw(chart, function (width) {
      const narrow = width < L.NARROW;
      // A legend entry as wide as the chart at most: a long label is cut in its middle,
      // apart from the others (whole in the hover).
      const room = width - 80;
      const cut = L.fitLabels(traces.map((t) => t.whole || ""), room);
      const named = traces.map(({ whole, ...t }, i) => (whole && cut[i] !== whole ? { ...t, name: L.plotText(cut[i]) } : t));
      const layout = L.layout({
        xaxis: { type: windows.length ? "date" : "-", range, title: { text: "time (UTC)" }, automargin: true, visible: !empty,
          nticks: Math.max(2, Math.floor(width / 120)), ticklabelstandoff: 6 },
        yaxis: { title: { text: numeric ? "mean" : "share of users" }, tickformat: numeric ? "" : ".0%", gridcolor: "#eef2f7", automargin: true, visible: !empty },
        yaxis2: { overlaying: "y", side: "right", showgrid: false, rangemode: "tozero", title: { text: "n" }, automargin: true, visible: !empty, nticks: 5 },
        margin: { l: 56, r: 56, t: 16, b: 56 },
        annotations: empty ? [{ text: "no reports yet", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5, font: { size: 15, color: "#64748b" } }] : [],
      });
      return { traces: named, layout, height: narrow ? 300 + 20 * traces.length : undefined };
    });
  }

  /** A trend's windows, one row per value shown: a categorical trend comes compact (per
   * value, one array over the windows of each statistic asked), a numeric one as rows. */
  function trendWindows(trend) {
    const c = trend.compact;
    if (!c) return trend.windows || [];
    return c.window.map((window, j) => ({
      window, n: c.n[j],
      estimates: c.values.map((value, i) => {
        const row = { value };
        c.fields.forEach((f) => { row[f] = c[f][i][j]; });
        return row;
      }),
    }));
  }

  function renderWindows(trend) {
    const select = $("window-select");
    const wanted = ["all", ...(trend.windows || []).map((w) => w.window).reverse()];
    if (state.window !== "all" && !wanted.includes(state.window)) wanted.push(state.window);
    const have = Array.from(select.options).map((o) => o.value);
    if (have.join() === wanted.join()) return;
    select.replaceChildren(...wanted.map((w) =>
      L.el("option", { value: w, textContent: w === "all" ? "all time" : L.windowLabel(w), selected: w === state.window })));
  }

  /* -- the loop --------------------------------------------------------------------- */

  /** What a refresh asks for: an answer to an older question is not drawn. */
  const question = () => JSON.stringify([state.intervals, state.window, state.granularity, estimand(), state.showAll]);

  async function refresh() {
    const asked = question();
    const simultaneous = state.intervals === "simultaneous" ? "true" : null;
    const multiplicity = state.intervals === "fdr" ? "fdr" : null;
    // The trend's statistics: each value's estimate and the interval drawn.
    const fields = anytime() ? "frequency,cs_low,cs_high" : null;
    const [est, answer] = await Promise.all([
      L.getJSON(L.url(page.api.estimates, { window: state.window === "all" ? null : state.window, simultaneous, multiplicity, estimand: estimand(), values: state.showAll ? "all" : null })),
      L.getJSON(L.url(page.api.trend, { granularity: state.granularity, simultaneous, multiplicity, estimand: estimand(), fields })),
    ]);
    const trend = { ...answer, windows: trendWindows(answer) };
    if (question() !== asked) return; // a control changed meanwhile: the refresh it queued draws
    const kind = est.kind || "categorical";
    showKind(kind);
    $("fact-n").textContent = L.int(est.n);
    renderShuffled(est.shuffled_epsilon);
    renderIntervalNotes(est);
    L.renderAlarms($("alarms"), est.alarms);
    if (est.alarm_rate) $("alarms").querySelector('[data-field="alarm-rate"]').textContent = L.int(Math.round(1 / est.alarm_rate));
    const baseline = est.poisoning_baseline;  // said plainly until the alarms have history
    $("no-baseline").hidden = !baseline || baseline.exists;
    $("no-baseline").textContent = baseline && !baseline.exists ? baseline.note : "";
    if (kind === "numeric") {
      renderNumeric(est);
    } else {
      document.querySelectorAll('[data-field="confidence"]').forEach((e) => { e.textContent = level(est); });
      renderTopNote(est);
      renderBars(est);
      renderTable(est);
    }
    renderWindows(trend);
    renderTrend(est, trend);
    const root = document.querySelector("main");
    root.dataset.state = "ready";
    root.dataset.n = String(est.n);
    root.dataset.kind = kind;
    root.dataset.window = state.window;
    root.dataset.granularity = state.granularity;
    root.dataset.intervals = state.intervals;
    root.dataset.estimand = est.estimand || "reporters";
  }

  $("window-select").addEventListener("change", (e) => { state.window = e.target.value; setLinks(); refresher.now(); });
  L.segmented("granularity", (value) => { state.granularity = value; refresher.now(); });
  L.segmented("intervals", (value) => { state.intervals = value; refresher.now(); });
  L.segmented("share", (value) => { state.estimand = value; setLinks(); refresher.now(); });
  setLinks();
  const refresher = L.poll(refresh, page.refresh);
  /* The modes chosen on this page, for the panels beside it (the breakdown asks the API
   * with the same ones): read with LDP.modes(), told by an "ldp:modes" event. */
  L.modes = () => ({ intervals: state.intervals, estimand: state.estimand });
  const tell = () => document.dispatchEvent(new CustomEvent("ldp:modes", { detail: L.modes() }));
  document.querySelectorAll("[data-intervals], [data-share]").forEach((b) => b.addEventListener("click", tell));
})();
