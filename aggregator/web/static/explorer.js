/* The privacy–utility–N explorer: pick ε, see the half-width against N per mechanism and
 * for central Laplace, how many users a target half-width needs, and how far a share of
 * fake clients can move one value (robustness, the fourth axis). The numbers come from
 * /v1/plan and /v1/plan/curve (the aggregator's own formulas); this only plots.
 * String mode (kind = string): the frequency N users find against N, down to the
 * collision floor, and the users needed to find values of a frequency, from
 * /v1/plan/strings and /v1/plan/strings/curve. */
(function () {
  "use strict";
  const L = window.LDP;
  const page = L.page;
  const root = document.getElementById("explorer");
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const inputs = {
    eps: $("epsilon-input"), range: $("epsilon-range"), k: $("k-input"), n: $("n-input"), width: $("width-input"), fakes: $("fakes-input"),
    kind: $("kind-select"), length: $("length-input"), frequency: $("frequency-input"), concentration: $("concentration-input"),
  };
  let current = null; // the metric's n, from the estimates API
  let nEdited = false;
  let seq = 0;
  let kind = page.kind || "categorical";

  /** Show the controls and sections of the mode (data-kind), hide the others. */
  function showKind() {
    root.dataset.kind = kind;
    document.querySelectorAll("[data-kind]").forEach((e) => { if (e !== root) e.hidden = e.dataset.kind !== kind; });
  }

  const NAMES = { grr: "GRR", sue: "SUE", oue: "OUE", olh: "OLH", blh: "BLH", hr: "HR", ss: "SS", rr: "RR", "central laplace": "Central Laplace" };
  const nameOf = (m) => NAMES[m] || m;
  const tagOf = (row) => [
    row.mechanism === page.mechanism ? "this metric" : "",
    row.auto ? "auto's pick" : "",
    row.mechanism === "central laplace" ? "trusted curator: sees raw values" : "",
  ].filter(Boolean).join(", ");
  /** A half-width in percentage points, as the metric page writes it: 0.0123 → "±1.23 pp". */
  const pp = (x) => "±" + L.points(x) + " pp";

  function read() {
    const eps = Number(inputs.eps.value);
    const k = Math.round(Number(inputs.k.value));
    const n = Math.max(1, Math.round(Number(inputs.n.value)));
    const width = Number(inputs.width.value) / 100;
    const fakes = Number(inputs.fakes.value) / 100;
    return { eps, k, n, width, fakes };
  }

  function valid(p) {
    return p.eps >= 1e-4 && p.eps <= 20 && p.k >= 2 && p.k <= 65536 && p.n >= 1 && p.width > 0 && p.width < 1 && p.fakes > 0 && p.fakes < 1;
  }

  const gain = (x) => "+" + L.points(x) + " pp";

  function renderRobustness(atN, p) {
    const focus = page.mechanism || atN.auto;
    const local = atN.rows.filter((r) => r.mechanism !== "central laplace");
    const mine = local.find((r) => r.mechanism === focus) || local[0];
    const best = local.reduce((a, b) => (b.max_gain < a.max_gain ? b : a));
    const worst = local.reduce((a, b) => (b.max_gain > a.max_gain ? b : a));
    const box = $("robustness");
    box.dataset.maxGain = String(mine.max_gain);
    box.dataset.mechanism = mine.mechanism;
    box.dataset.fakeFraction = String(atN.fake_fraction);
    box.replaceChildren(
      "If " + L.points(atN.fake_fraction) + " % of the reports come from fake clients, they can move one value of " + nameOf(mine.mechanism) + " by ",
      L.el("strong", { textContent: gain(mine.max_gain) }),
      best.mechanism !== mine.mechanism ? "; " + nameOf(best.mechanism) + " is the most robust here, " + gain(best.max_gain) : "",
      worst.mechanism !== mine.mechanism ? "; " + nameOf(worst.mechanism) + " the least, " + gain(worst.max_gain) : "",
      ".",
    );
  }

  function renderChart(curve, atN, p) {
    if (!L.hasPlotly()) return;
    const focus = page.mechanism || atN.auto;
    const traces = curve.curves.map((c) => {
      const isFocus = c.mechanism === focus;
      const label = nameOf(c.mechanism) + (c.current ? " · this metric" : c.auto ? " · auto's pick" : "");
      return {
        // In percentage points (errors of shares are in pp, as on the metric page).
        type: "scatter", mode: "lines", name: label, meta: c.mechanism, x: curve.n, y: c.half_width.map((h) => 100 * h),
        line: c.central
          ? { color: L.colors.central, dash: "dash", width: 2.5 }
          : { width: isFocus ? 3.5 : 1.8, color: isFocus ? L.colors.raw : undefined },
        opacity: c.central || isFocus ? 1 : 0.8,
        hovertemplate: label + "<br>N = %{x:,.0f}<br>±%{y:.3~r} pp<extra></extra>",
      };
    });
    const focusRow = atN.rows.find((r) => r.mechanism === focus);
    if (focusRow) {
      traces.push({
        type: "scatter", mode: "markers+text", name: "N now", meta: "now", showlegend: false,
        x: [p.n], y: [100 * focusRow.half_width], text: [pp(focusRow.half_width)], textposition: "top right",
        marker: { size: 12, color: L.colors.raw, line: { color: "#fff", width: 2 } },
        hovertemplate: "N = %{x:,.0f}<br>" + nameOf(focus) + " ±%{y:.3~r} pp<extra></extra>",
      });
    }
    const layout = L.layout({
      // Standoff: the lowest y label and the first x label meet at the corner otherwise.
      xaxis: { type: "log", title: { text: "users N (one report each)" }, gridcolor: "#eef2f7", automargin: true, exponentformat: "power", ticklabelstandoff: 8 },
      yaxis: { type: "log", title: { text: "95 % half-width (pp)" }, tickformat: "~r", ticksuffix: " pp", gridcolor: "#eef2f7", automargin: true },
      shapes: [
        { type: "line", xref: "x", yref: "paper", x0: p.n, x1: p.n, y0: 0, y1: 1, line: { color: "#1d4ed8", width: 1.5, dash: "dot" } },
        { type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: 100 * p.width, y1: 100 * p.width, line: { color: "#dc2626", width: 1.2, dash: "dot" } },
      ],
      annotations: [
        { xref: "x", yref: "paper", x: Math.log10(p.n), y: 0.02, yanchor: "bottom", xanchor: "left", showarrow: false, bgcolor: "rgba(255,255,255,0.85)", text: (current !== null && p.n === current ? "N now = " : "N = ") + L.int(p.n), font: { color: "#1d4ed8", size: 11 } },
        { xref: "paper", yref: "y", x: 1, y: Math.log10(100 * p.width), xanchor: "right", yanchor: "bottom", showarrow: false, text: "target " + pp(p.width), font: { color: "#dc2626", size: 11 } },
      ],
      margin: { l: 64, r: 16, t: 16, b: 48 },
    });
    // A phone's legend takes rows of its own: the chart grows by them, the plot keeps its height.
    L.draw($("curve-chart"), (width) => ({ traces, layout, height: width < L.NARROW ? 360 + 24 * Math.ceil(traces.length / 2) : undefined }));
  }

  function renderText(atN, forWidth, p) {
    const focus = page.mechanism || atN.auto;
    const best = atN.rows.find((r) => r.mechanism !== "central laplace");
    const central = atN.rows.find((r) => r.mechanism === "central laplace");
    const mine = atN.rows.find((r) => r.mechanism === focus) || best;
    const who = page.mechanism ? nameOf(focus) + " (this metric's mechanism)" : nameOf(focus) + " (auto's pick)";
    const hw = $("hw-now");
    hw.dataset.halfWidth = String(mine.half_width);
    hw.dataset.mechanism = mine.mechanism;
    hw.dataset.n = String(p.n);
    hw.replaceChildren(
      "At ε = " + p.eps + " with N = " + L.int(p.n) + " users, " + who + " gives ",
      L.el("strong", { textContent: pp(mine.half_width) }),
      best.mechanism !== mine.mechanism ? "; the best local mechanism, " + nameOf(best.mechanism) + ", " + pp(best.half_width) : "",
      "; central Laplace " + pp(central.half_width) + ".",
    );
    const needRows = forWidth.rows;
    const need = needRows.find((r) => r.mechanism === focus) || needRows[0];
    const bestNeed = needRows.find((r) => r.mechanism !== "central laplace");
    const centralNeed = needRows.find((r) => r.mechanism === "central laplace");
    document.querySelectorAll('[data-field="target"]').forEach((e) => { e.textContent = pp(p.width); });
    const answer = $("plan-answer");
    answer.dataset.users = String(need.users);
    answer.dataset.mechanism = need.mechanism;
    answer.replaceChildren(
      nameOf(need.mechanism) + " needs ",
      L.el("strong", { textContent: L.int(need.users) + " users" }),
      bestNeed.mechanism !== need.mechanism ? " (" + nameOf(bestNeed.mechanism) + ": " + L.int(bestNeed.users) + ")" : "",
      "; central Laplace " + L.int(centralNeed.users) + ".",
      current !== null && current > 0 ? " So far: " + L.int(current) + " reports (" + Math.min(100, (100 * current) / need.users).toFixed(0) + " % of the way)." : "",
    );
  }

  function renderTable(atN, forWidth) {
    const needed = Object.fromEntries(forWidth.rows.map((r) => [r.mechanism, r.users]));
    const body = $("plan-table").querySelector("tbody");
    body.replaceChildren(...atN.rows.map((r) => L.el("tr", { className: r.mechanism === page.mechanism ? "current" : "", dataset: { mechanism: r.mechanism } }, [
      L.el("td", { textContent: nameOf(r.mechanism), attrs: { "data-label": "mechanism" } }),
      L.el("td", { className: "num", textContent: pp(r.half_width), dataset: { value: String(r.half_width) }, attrs: { "data-label": "± at N" } }),
      L.el("td", { className: "num", textContent: L.int(needed[r.mechanism]), dataset: { value: String(needed[r.mechanism]) }, attrs: { "data-label": "users for target" } }),
      L.el("td", { className: "num", textContent: r.variance_star === null ? "—" : L.num(r.variance_star, 4), attrs: { "data-label": "Var*" } }),
      L.el("td", { className: "num", textContent: r.wire_bytes === null ? "—" : r.wire_bytes + " B", attrs: { "data-label": "report size" } }),
      L.el("td", { className: "num", textContent: gain(r.max_gain), dataset: { value: String(r.max_gain) }, attrs: { "data-label": "moved by fakes" } }),
      L.el("td", { className: "small muted", textContent: tagOf(r), attrs: { "data-label": "note" } }),
    ])));
  }

  // -- string mode ---------------------------------------------------------------------
  /** A frequency as a percentage with enough digits to see it: 0.00544 → "0.54 %". */
  const share = (x) => L.points(x) + " %";

  function readStrings() {
    return {
      eps: Number(inputs.eps.value),
      n: Math.max(1, Math.round(Number(inputs.n.value))),
      length: Math.round(Number(inputs.length.value)),
      frequency: Number(inputs.frequency.value) / 100,
      concentration: Number(inputs.concentration.value || 0),
    };
  }

  function validStrings(p) {
    return p.eps >= 1e-4 && p.eps <= 20 && p.n >= 1 && p.n <= 1e12 && p.length >= 1 && p.length <= 64 &&
      p.frequency > 0 && p.frequency < 1 && p.concentration >= 0 && p.concentration <= 1;
  }

  function renderStringChart(curve, atN, need, p) {
    if (!L.hasPlotly()) return;
    const y = curve.frequency.map((f) => (f <= 1 ? f : null)); // above 100 %: nothing is found
    const traces = [{
      type: "scatter", mode: "lines", name: "detectable frequency", meta: "frequency", x: curve.n, y,
      line: { color: L.colors.raw, width: 3 },
      hovertemplate: "N = %{x:,.0f}<br>finds values ≥ %{y:.3~p}<extra></extra>",
    }];
    if (atN.frequency <= 1) {
      traces.push({
        type: "scatter", mode: "markers+text", name: "N now", meta: "now", showlegend: false,
        x: [p.n], y: [atN.frequency], text: [share(atN.frequency)], textposition: "top right",
        marker: { size: 12, color: L.colors.raw, line: { color: "#fff", width: 2 } },
        hovertemplate: "N = %{x:,.0f}<br>finds values ≥ %{y:.3~p}<extra></extra>",
      });
    }
    if (need.users !== null) {
      traces.push({
        type: "scatter", mode: "markers", name: "users needed", meta: "needed", showlegend: false,
        x: [need.users], y: [p.frequency],
        marker: { size: 11, symbol: "diamond", color: "#dc2626", line: { color: "#fff", width: 2 } },
        hovertemplate: "N = %{x:,.0f} finds values of %{y:.3~p}<extra></extra>",
      });
    }
    const shapes = [
      { type: "line", xref: "x", yref: "paper", x0: p.n, x1: p.n, y0: 0, y1: 1, line: { color: "#1d4ed8", width: 1.5, dash: "dot" } },
      { type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: p.frequency, y1: p.frequency, line: { color: "#dc2626", width: 1.2, dash: "dot" } },
    ];
    const annotations = [
      { xref: "x", yref: "paper", x: Math.log10(p.n), y: 0.02, yanchor: "bottom", xanchor: "left", showarrow: false, bgcolor: "rgba(255,255,255,0.85)", text: (current !== null && p.n === current ? "N now = " : "N = ") + L.int(p.n), font: { color: "#1d4ed8", size: 11 } },
      { xref: "paper", yref: "y", x: 1, y: Math.log10(p.frequency), xanchor: "right", yanchor: "bottom", showarrow: false, text: "find " + share(p.frequency), font: { color: "#dc2626", size: 11 } },
    ];
    if (curve.floor > 0) {
      shapes.push({ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: curve.floor, y1: curve.floor, line: { color: L.colors.central, width: 2, dash: "dash" } });
      annotations.push({ xref: "paper", yref: "y", x: 0, y: Math.log10(curve.floor), xanchor: "left", yanchor: "top", showarrow: false, text: "collision floor " + share(curve.floor), font: { color: L.colors.central, size: 11 } });
    }
    // Room below the floor and the target, so their lines and labels sit inside the plot.
    const drawn = y.filter((v) => v !== null);
    const lo = Math.min(...drawn, p.frequency, curve.floor > 0 ? curve.floor : Infinity) / 1.6;
    const hi = Math.min(1, Math.max(...drawn, p.frequency)) * 1.3;
    const layout = L.layout({
      showlegend: false,
      xaxis: { type: "log", title: { text: "users N (one report each)" }, gridcolor: "#eef2f7", automargin: true, exponentformat: "power", ticklabelstandoff: 8 },
      yaxis: { type: "log", title: { text: "frequency found half the time" }, tickformat: ".1~p", dtick: "D2", range: [Math.log10(lo), Math.log10(hi)], gridcolor: "#eef2f7", automargin: true },
      shapes, annotations,
      margin: { l: 64, r: 16, t: 16, b: 48 },
    });
    L.draw($("string-chart"), () => ({ traces, layout }));
  }

  function renderStringText(curve, atN, need, p) {
    const shape = p.length + " bytes: " + curve.rows + " rows × " + curve.cells + " cells per level";
    const now = $("found-now");
    now.dataset.frequency = String(atN.frequency);
    now.dataset.n = String(p.n);
    now.replaceChildren(
      "At ε = " + p.eps + " (" + shape + "), N = " + L.int(p.n) + " users ",
      ...(atN.frequency < 1
        ? ["find values of frequency ≥ ", L.el("strong", { textContent: share(atN.frequency) }), " about half the time."]
        : ["are too few to find any value."]),
      curve.floor > 0 ? " No number of users finds values below the collision floor, " + share(curve.floor) + "." : "",
    );
    document.querySelectorAll('[data-field="frequency"]').forEach((e) => { e.textContent = share(p.frequency); });
    const answer = $("string-answer");
    answer.dataset.users = need.users === null ? "" : String(need.users);
    answer.dataset.floor = String(need.floor);
    if (need.users === null) {
      answer.replaceChildren(
        "No number of users finds values of " + share(p.frequency) + ": the collision floor is ",
        L.el("strong", { textContent: share(need.floor) }),
        " at Σf² = " + p.concentration + "; more cells per level (a higher ε), not more users, would.",
      );
      return;
    }
    answer.replaceChildren(
      L.el("strong", { textContent: L.int(need.users) + " users" }),
      " find values of frequency ≥ " + share(p.frequency) + " about half the time.",
      current !== null && current > 0 ? " So far: " + L.int(current) + " reports (" + Math.min(100, (100 * current) / need.users).toFixed(0) + " % of the way)." : "",
    );
  }

  async function updateStrings() {
    const p = readStrings();
    if (!validStrings(p)) { L.status("ε must be in [0.0001, 20], bytes in [1, 64], N ≥ 1, the frequency in (0, 100) % and Σf² in [0, 1]", "error"); return; }
    const mine = ++seq;
    root.dataset.state = "loading";
    const common = { epsilon: p.eps, max_length: p.length, concentration: p.concentration };
    const [atN, need] = await Promise.all([
      L.getJSON(L.url(page.api.string_plan, { ...common, users: p.n })),
      L.getJSON(L.url(page.api.string_plan, { ...common, frequency: p.frequency })),
    ]);
    // The N axis reaches past both N and the users needed, whichever is larger.
    const nMax = Math.min(1e12, Math.max(1e8, 10 * p.n, 10 * (need.users || 0)));
    const curve = await L.getJSON(L.url(page.api.string_curve, { ...common, n_max: nMax, points: 81 }));
    if (mine !== seq) return; // a newer request is on its way
    renderStringChart(curve, atN, need, p);
    renderStringText(curve, atN, need, p);
    root.dataset.epsilon = String(atN.epsilon);
    root.dataset.maxLength = String(atN.max_length);
    root.dataset.n = String(atN.users);
    root.dataset.state = "ready";
  }

  async function update() {
    if (kind === "string") return updateStrings();
    const p = read();
    if (!valid(p)) { L.status("ε must be in [0.0001, 20], k in [2, 65536], N ≥ 1, the target in (0, 100) pp and the fakes in (0, 100) %", "error"); return; }
    const mine = ++seq;
    root.dataset.state = "loading";
    const common = { epsilon: p.eps, k: p.k };
    const [curve, atN, forWidth] = await Promise.all([
      L.getJSON(L.url(page.api.curve, { ...common, mechanism: page.mechanism, matrix: page.matrix })),
      L.getJSON(L.url(page.api.plan, { ...common, users: p.n, fake_fraction: p.fakes, matrix: page.matrix })),
      L.getJSON(L.url(page.api.plan, { ...common, width: p.width, fake_fraction: p.fakes, matrix: page.matrix })),
    ]);
    if (mine !== seq) return; // a newer request is on its way
    renderChart(curve, atN, p);
    renderText(atN, forWidth, p);
    renderTable(atN, forWidth);
    renderRobustness(atN, p);
    root.dataset.epsilon = String(atN.epsilon);
    root.dataset.k = String(atN.k);
    root.dataset.n = String(atN.users);
    root.dataset.state = "ready";
  }

  let timer = null;
  function soon() {
    clearTimeout(timer);
    timer = setTimeout(() => update().catch((e) => L.status("could not update: " + e.message, "error")), 120);
  }

  inputs.range.addEventListener("input", () => { inputs.eps.value = inputs.range.value; soon(); });
  inputs.eps.addEventListener("input", () => { inputs.range.value = inputs.eps.value; soon(); });
  inputs.k.addEventListener("input", soon);
  inputs.width.addEventListener("input", soon);
  inputs.fakes.addEventListener("input", soon);
  inputs.n.addEventListener("input", () => { nEdited = true; soon(); });
  inputs.length.addEventListener("input", soon);
  inputs.frequency.addEventListener("input", soon);
  inputs.concentration.addEventListener("input", soon);
  inputs.kind.addEventListener("change", () => {
    kind = inputs.kind.value;
    showKind();
    const u = new URL(window.location.href);
    u.searchParams.set("kind", kind);
    window.history.replaceState(null, "", u.pathname + u.search);
    soon();
  });
  showKind();
  $("explorer-form").addEventListener("submit", (e) => { e.preventDefault(); soon(); });

  async function poll() {
    if (page.api.estimates) {
      const est = await L.getJSON(page.api.estimates);
      const changed = est.n !== current;
      current = est.n;
      if (!nEdited && current > 0 && String(current) !== inputs.n.value) inputs.n.value = String(current);
      if (!changed && root.dataset.state === "ready") return;
    }
    await update();
  }
  L.poll(poll, page.api.estimates ? page.refresh : 0);
})();
