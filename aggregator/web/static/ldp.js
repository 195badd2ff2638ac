/* Shared helpers of the dashboard's pages: the page's settings, JSON reads, number
 * formats, the refresh loop and Plotly defaults. The pages keep no state of their own:
 * everything shown comes from the JSON APIs of the same origin. */
(function () {
  "use strict";
  const LDP = (window.LDP = {});
  const node = document.getElementById("ldp-page");
  LDP.page = node ? JSON.parse(node.textContent) : {};

  LDP.colors = {
    raw: "#2563eb", rawFaint: "#a9c1f5", normSub: "#f59e0b", central: "#475569",
    series: ["#2563eb", "#dc2626", "#059669", "#7c3aed", "#d97706", "#0891b2", "#db2777", "#65a30d"],
  };

  /** GET a JSON document of this origin; throws an Error carrying the API's message. */
  LDP.getJSON = async function (url) {
    const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
    if (!response.ok) {
      let message = response.statusText;
      try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
      throw new Error(response.status + " " + message);
    }
    return response.json();
  };

  /** GET a page's main JSON: null on failure, its message then shown in #errorId (which
   * is hidden again on success). */
  LDP.getShown = async function (url, errorId) {
    const shown = document.getElementById(errorId);
    try {
      const body = await LDP.getJSON(url);
      shown.hidden = true;
      return body;
    } catch (error) {
      shown.textContent = error.message;
      shown.hidden = false;
      return null;
    }
  };

  /** A button group: a click on a button with a `data-<name>` attribute (one word) marks
   * the buttons of its value pressed and the others not, then calls pick with the value. */
  LDP.segmented = function (name, pick) {
    const buttons = document.querySelectorAll("[data-" + name + "]");
    buttons.forEach((button) => {
      button.addEventListener("click", () => {
        const value = button.dataset[name];
        buttons.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset[name] === value)));
        pick(value);
      });
    });
  };

  /** A URL of this origin with query parameters set (null/undefined ones dropped). */
  LDP.url = function (path, params) {
    const u = new URL(path, window.location.origin);
    for (const [key, value] of Object.entries(params || {})) {
      if (value === null || value === undefined) u.searchParams.delete(key);
      else u.searchParams.set(key, String(value));
    }
    return u.pathname + u.search;
  };

  const missing = "—";
  /** 0.1234 → "12.34%". */
  LDP.pct = (x, digits = 2) => (x === null || x === undefined ? missing : (x * 100).toFixed(digits) + "%");
  /** A half-width in percentage points, enough digits to see it: 0.00123 → "0.12". */
  LDP.points = function (x) {
    if (x === null || x === undefined) return missing;
    const p = x * 100;
    return p >= 10 ? p.toFixed(1) : p >= 0.1 ? p.toFixed(2) : p.toPrecision(2);
  };
  LDP.int = (n) => (n === null || n === undefined ? missing : Math.round(n).toLocaleString("en-US"));
  LDP.num = (x, digits = 4) => (x === null || x === undefined ? missing : Number(x).toPrecision(digits));

  /** "hour:2026-11-25T23" → its start in ms since the epoch (UTC); null for "all". */
  LDP.windowTime = function (window) {
    const [kind, start] = String(window).split(/:(.*)/s);
    if (kind === "hour") return Date.parse(start + ":00:00Z");
    if (kind === "day") return Date.parse(start + "T00:00:00Z");
    return null;
  };
  /** ms since the epoch → "2026-11-25 23:00", the UTC wall time Plotly's date axes take. */
  LDP.plotlyDate = (ms) => new Date(ms).toISOString().slice(0, 16).replace("T", " ");
  /** How long ago a window started, in words: "this hour", "3 h ago", "today". */
  LDP.windowAgo = function (window) {
    if (!window) return "no reports yet";
    const t = LDP.windowTime(window);
    if (t === null) return String(window);
    const day = String(window).startsWith("day:");
    const elapsed = Math.floor((Date.now() - t) / (day ? 86400e3 : 3600e3));
    if (day) return elapsed <= 0 ? "today (UTC)" : elapsed === 1 ? "yesterday (UTC)" : elapsed + " days ago";
    return elapsed <= 0 ? "this hour" : elapsed === 1 ? "the hour before" : elapsed + " h ago";
  };
  /** "hour:2026-11-25T23" → "2026-11-25 23:00 UTC"; "day:2026-11-25" → "2026-11-25 (UTC day)". */
  LDP.windowAt = function (window) {
    if (!window) return "";
    const [kind, start] = String(window).split(/:(.*)/s);
    if (kind === "hour") return start.replace("T", " ") + ":00 UTC";
    if (kind === "day") return start + " (UTC day)";
    return String(window);
  };
  /** A window for a menu: "this hour · 2026-11-25 23:00 UTC". */
  LDP.windowLabel = (window) => (window ? LDP.windowAgo(window) + " · " + LDP.windowAt(window) : "no reports yet");

  /** Show what the refresh loop is doing in the top bar. */
  LDP.status = function (text, state) {
    const el = document.getElementById("refresh-status");
    if (!el) return;
    el.textContent = text;
    el.className = "status" + (state ? " " + state : "");
  };

  /**
   * Run `fn` now and then every `seconds` while the page is visible (0: once).
   * A hidden tab stops polling; it refreshes at once when it is shown again.
   * Returns {now()} to refresh on demand (e.g. after a control changed).
   */
  LDP.poll = function (fn, seconds) {
    let timer = null;
    let running = false;
    let again = false;
    async function tick() {
      clearTimeout(timer);
      if (running) { again = true; return; }
      running = true;
      try {
        await fn();
        const time = new Date().toLocaleTimeString("en-GB");
        LDP.status(seconds > 0 ? "live · updated " + time : "updated " + time, seconds > 0 ? "live" : "");
      } catch (error) {
        LDP.status("could not refresh: " + error.message, "error");
      } finally {
        running = false;
        if (again) { again = false; tick(); } else schedule();
      }
    }
    function schedule() {
      clearTimeout(timer);
      if (seconds > 0 && !document.hidden) timer = setTimeout(tick, seconds * 1000);
    }
    document.addEventListener("visibilitychange", function () {
      if (document.hidden) { clearTimeout(timer); LDP.status("paused while hidden", ""); }
      else tick();
    });
    tick();
    return { now: tick };
  };

  /** Plotly's config for every chart: responsive, no logo, no cloud links. */
  LDP.plotConfig = {
    displayModeBar: "hover",  // in its own strip above the chart (dashboard.css, .chart)
    responsive: true, displaylogo: false, showLink: false, showSendToCloud: false, showEditInChartStudio: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
  };

  /** A layout with the dashboard's fonts and margins, merged with `extra`. */
  LDP.layout = function (extra) {
    const base = {
      font: { family: "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size: 12, color: "#17202b" },
      margin: { l: 56, r: 16, t: 16, b: 56 },
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fff",
      hoverlabel: { font: { size: 12 } },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
    };
    return Object.assign(base, extra || {});
  };

  /** Whether plotly.js loaded (a page still shows its tables without it). */
  LDP.hasPlotly = () => typeof window.Plotly === "object" && window.Plotly !== null;

  /* -- charts that fit their width ------------------------------------------------- */

  const FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
  const TICK = 12; // px: the charts' tick labels
  const ruler = document.createElement("canvas").getContext("2d");
  /** The width in px of `text` drawn at `size` px in the charts' font. */
  LDP.textWidth = function (text, size = TICK) {
    ruler.font = size + "px " + FONT;
    return ruler.measureText(String(text)).width;
  };
  /** The text of `chars` that keeps the pieces [from, to) of `pieces` (in order, apart),
   * an ellipsis wherever characters were left out. */
  const keep = (chars, pieces) => {
    let out = "";
    let at = 0;
    for (const [from, to] of pieces) {
      if (to <= from) continue;
      out += (from > at ? "…" : "") + chars.slice(from, to).join("");
      at = to;
    }
    return out + (at < chars.length ? "…" : "");
  };
  /** The longest of `make(n)` for n = 0, 1, … that fits `px` (make grows with n). */
  const longest = (make, most, px, size) => {
    let lo = 0;
    let hi = most;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (LDP.textWidth(make(mid), size) <= px) lo = mid; else hi = mid - 1;
    }
    return make(lo);
  };
  /** `text` cut in its middle to at most `px` wide, its start and its end kept
   * ("Settings › Pri…other site data"); with `at`, the character at that index kept too,
   * with a few around it ("Checkout…step 2 o…ift options"). */
  LDP.fitMiddle = function (text, px, size = TICK, at = null) {
    const s = String(text);
    if (LDP.textWidth(s, size) <= px) return s;
    const chars = Array.from(s);
    const n = chars.length;
    if (at === null || at < 0 || at >= n) {
      return longest((k) => keep(chars, [[0, Math.ceil(k / 2)], [n - Math.floor(k / 2), n]]), n - 1, px, size);
    }
    // k characters of each of three pieces: the start, around `at`, the end (merged where they meet)
    return longest((k) => {
      const a = Math.max(0, at - Math.floor(k / 2));
      const b = Math.min(n, Math.max(at + 1, a + k));
      const pieces = [[0, Math.min(k, a)], [a, b], [Math.max(b, n - k), n]];
      return keep(chars, pieces);
    }, n, px, size);
  };
  /** Labels cut to at most `px` wide each, in their middles, and kept apart: labels that
   * the cut would make alike (they differ only in their middles) keep the first place
   * where each differs from the others; any still alike get a number (" ·2"). */
  LDP.fitLabels = function (labels, px, size = TICK) {
    const whole = labels.map(String);
    const cut = whole.map((l) => LDP.fitMiddle(l, px, size));
    const alike = () => {
      const groups = new Map();
      cut.forEach((c, i) => groups.set(c, [...(groups.get(c) || []), i]));
      return [...groups.values()].filter((g) => g.length > 1 && new Set(g.map((i) => whole[i])).size > 1);
    };
    const common = (a, b) => {
      let i = 0;
      while (i < a.length && i < b.length && a[i] === b[i]) i++;
      return i;
    };
    for (const group of alike()) {
      for (const i of group) {
        const chars = Array.from(whole[i]);
        const at = Math.max(...group.filter((j) => j !== i).map((j) => common(chars, Array.from(whole[j]))));
        cut[i] = LDP.fitMiddle(whole[i], px, size, at);
      }
    }
    for (const group of alike()) {
      group.slice(1).forEach((i, j) => {
        const mark = " ·" + (j + 2);
        cut[i] = LDP.fitMiddle(whole[i], px - LDP.textWidth(mark, size), size) + mark;
      });
    }
    return cut;
  };
  /** Below this many px a chart is drawn for a phone: short trace names, more of its
   * width for labels, room for a legend of several rows. */
  LDP.NARROW = 600;

  const drawn = new Map(); // chart → {build, width}: charts redrawn when their width changes
  /**
   * Draw `chart` with `build(width)` → {traces, layout, height?}, now and again whenever
   * its width changes (a phone turned, a window resized): a chart's layout depends on
   * its width (bars upright or lying, legend place, ticks), not only its size.
   * Returns Plotly's promise.
   */
  LDP.draw = function (chart, build) {
    const width = chart.clientWidth || window.innerWidth;
    const { traces, layout, height } = build(width);
    chart.style.height = height ? height + "px" : "";
    // Plotly.react keeps a chart's first height: say it each time (the stylesheet's when
    // the build gives none), or a chart that shrank would spill over what follows it.
    if (chart.clientHeight) layout.height = chart.clientHeight;
    drawn.set(chart, { build, width });
    return window.Plotly.react(chart, traces, layout, LDP.plotConfig);
  };
  let resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      for (const [chart, last] of drawn) {
        if (!chart.isConnected) { drawn.delete(chart); continue; }
        if (chart.clientWidth && chart.clientWidth !== last.width) LDP.draw(chart, last.build);
      }
    }, 150);
  });

  /* Swap a bar trace's axes: categories on y, values on x (the hover template follows). */
  const lying = (t) => {
    const swapped = { ...t, orientation: "h", x: t.y, y: t.x, error_x: t.error_y };
    delete swapped.error_y;
    if (t.hovertemplate) swapped.hovertemplate = t.hovertemplate.replace(/%\{([xy])/g, (m, a) => "%{" + (a === "x" ? "y" : "x"));
    return swapped;
  };
  const ENTITY = { "&": "&amp;", "<": "&lt;", ">": "&gt;" };
  const plotEscape = (text) => String(text).replace(/[&<>]/g, (c) => ENTITY[c]);

  /**
   * Bars over categories that fit any width. Upright, when every label fits under its
   * own bars on one line; else lying, one row per category with the labels on the left,
   * cut to fit (the whole label in the tick's tooltip and the hover), the chart as tall
   * as its rows need.
   *
   * @param chart the chart's element
   * @param categories the categories (raw text: labels are shown as text, never markup)
   * @param traces bar traces in upright form (x: categories, y: values, error_y), each
   *   with `short`, its legend name on a phone (optional)
   * @param values the value axis ({title, tickformat, visible, …})
   * @param extra more layout (barmode, annotations, …); `categoryTitle` names the axis
   */
  LDP.drawBars = function (chart, categories, traces, values, extra) {
    const { categoryTitle, ...rest } = extra || {};
    const shown = categories.map(LDP.visible);
    let legend = [];
    return LDP.draw(chart, function (width) {
      const narrow = width < LDP.NARROW;
      const named = legendNames(traces.map(({ short, ...t }) => (narrow && short ? { ...t, name: short } : t)), width);
      legend = named.length > 1 ? named.map((t) => t.name) : [];
      const widest = Math.max(0, ...shown.map((c) => LDP.textWidth(c)));
      const band = (width - 90) / Math.max(1, categories.length);
      const title = categoryTitle ? { text: categoryTitle } : undefined;
      if (widest <= band - 8) {
        chart._ldpTicks = null;
        return {
          traces: named,
          layout: LDP.layout({
            ...rest,
            xaxis: { type: "category", automargin: true, tickangle: 0, tickmode: "array", tickvals: categories,
              ticktext: shown.map(plotEscape), title },
            yaxis: { zeroline: true, zerolinecolor: "#94a3b8", gridcolor: "#eef2f7", automargin: true, ...values },
          }),
        };
      }
      const room = Math.min(width * (narrow ? 0.4 : 0.3), 320);
      const cut = LDP.fitLabels(shown, room);
      const perRow = Math.max(24, 12 * traces.length + 12);
      const legendRows = Math.max(narrow ? traces.length : 1, rowsOf(legend, width));
      const height = 70 + 22 * legendRows + perRow * categories.length;
      chart._ldpTicks = { cut, whole: shown };
      return {
        traces: named.map(lying),
        height: Math.max(narrow ? 260 : 340, height),
        layout: LDP.layout({
          ...rest,
          legend: { orientation: "h", x: 0, y: 1, yanchor: "bottom" },
          margin: { l: 8, r: 16, t: 16 + 22 * legendRows, b: 48 },
          yaxis: { type: "category", autorange: "reversed", automargin: true, tickmode: "array", tickvals: categories,
            ticktext: cut.map(plotEscape), title },
          xaxis: { zeroline: true, zerolinecolor: "#94a3b8", gridcolor: "#eef2f7", automargin: true, side: "bottom",
            nticks: Math.max(3, Math.floor(width / 110)), ticklabelstandoff: 4, ...values },
        }),
      };
    }).then(function () {
      wholeLabels(chart);
      if (!chart._ldpTooltips) {
        chart._ldpTooltips = true;
        chart.on("plotly_afterplot", () => wholeLabels(chart));
      }
    });
  };
  /* A legend entry: its symbol and gaps beside its text, in px (Plotly's, rounded up). */
  const LEGEND_ITEM = 48;
  /** Traces whose legend names are cut (in their middles, kept apart) so that each entry
   * fits the chart's width; the whole name stays in the hover. */
  function legendNames(traces, width) {
    const names = traces.map((t) => String(t.name ?? ""));
    const shown = names.map((n) => n.replace(/<[^>]*>/g, "").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&"));
    const room = Math.max(40, width - LEGEND_ITEM - 24);
    if (shown.every((n) => LDP.textWidth(n) <= room)) return traces;
    const cut = LDP.fitLabels(shown, room);
    return traces.map((t, i) => (cut[i] === shown[i] ? t : { ...t, name: plotEscape(cut[i]) }));
  }
  /** Rows a horizontal legend of entries `names` (plot text) takes at `width`, as Plotly
   * lays it out: entries left to right, a new row when the next one does not fit. */
  function rowsOf(names, width) {
    if (!names.length) return 1;
    let rows = 1;
    let x = 0;
    for (const name of names) {
      const w = LDP.textWidth(String(name).replace(/<[^>]*>/g, "")) + LEGEND_ITEM;
      if (x > 0 && x + w > width - 24) { rows++; x = 0; }
      x += w;
    }
    return rows;
  }

  /* A cut tick label's whole text as its tooltip (an SVG <title>). */
  function wholeLabels(chart) {
    const ticks = chart._ldpTicks;
    if (!ticks) return;
    chart.querySelectorAll(".ytick text").forEach(function (t, i) {
      const at = t.__data__ && Number.isInteger(t.__data__.x) ? t.__data__.x : i;
      if (ticks.cut[at] === ticks.whole[at] || t.querySelector("title")) return;
      const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
      title.textContent = ticks.whole[at];
      t.append(title);
    });
  }

  /* -- tables that fit a phone ----------------------------------------------------- */

  /* A stacked table (class "stack") shows each row as a card on a phone, every cell
   * named by its column: the cells the pages' scripts add get their column's header as
   * data-label here, once, for every table. */
  function labelCells(table) {
    const heads = Array.from(table.querySelectorAll("thead th")).map((th) => th.textContent.trim());
    table.querySelectorAll("tbody tr").forEach(function (tr) {
      Array.from(tr.cells).forEach(function (td, i) {
        if (!td.hasAttribute("data-label") && heads[i]) td.setAttribute("data-label", heads[i]);
      });
    });
  }
  document.querySelectorAll("table.stack").forEach(function (table) {
    labelCells(table);
    new MutationObserver(() => labelCells(table)).observe(table, { childList: true, subtree: true });
  });

  /** Element helper: el("td", {className: "num", textContent: "1"}). */
  LDP.el = function (tag, props, children) {
    const e = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "dataset") Object.assign(e.dataset, value);
      else if (key === "attrs") for (const [a, v] of Object.entries(value)) e.setAttribute(a, v);
      else e[key] = value;
    }
    for (const child of children || []) e.append(child);
    return e;
  };

  /* Device- and admin-written text (values, labels) shown as the text it is. Characters
   * that print nothing of their own (controls; format characters: zero-width, joiners,
   * bidi embeddings, overrides and isolates, tags, the BOM; private use; unassigned;
   * line and paragraph separators; Hangul fillers, CGJ, Mongolian FVS) become escapes
   * such as \u200b. aggregator/safe_text.py is the Python twin (same characters, same
   * escapes); a browser test holds the two together. */
  const HIDDEN = /[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zl}\p{Zp}\u034f\u115f\u1160\u180b-\u180d\u180f\u3164\uffa0]/gu;
  const escapeChar = (c) => {
    const p = c.codePointAt(0);
    return p > 0xffff ? "\\U" + p.toString(16).padStart(8, "0") : "\\u" + p.toString(16).padStart(4, "0");
  };
  /** A value as plain text with its hidden characters as escapes: "pay\u200bpal". */
  LDP.visible = (text) => String(text).replace(HIDDEN, escapeChar);
  /** A value as DOM nodes: text, and each escape in a <span class="hidden-char"> naming
   * its code point (put them in a cell with append or replaceChildren). */
  LDP.visibleNodes = function (text) {
    const s = String(text);
    const nodes = [];
    let last = 0;
    for (const m of s.matchAll(HIDDEN)) {
      if (m.index > last) nodes.push(s.slice(last, m.index));
      const code = "U+" + m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
      nodes.push(LDP.el("span", { className: "hidden-char", textContent: escapeChar(m[0]), title: code + ": a character that prints nothing" }));
      last = m.index + m[0].length;
    }
    if (last < s.length) nodes.push(s.slice(last));
    return nodes;
  };
  const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;" };
  /** A value for Plotly's ticks, legends and hover text, which read pseudo-HTML (<b>,
   * <br>, <a href>, entities): escaped, and its hidden characters made visible, so it is
   * drawn as the text it is (as the tables' textContent shows it). */
  LDP.plotText = (text) => LDP.visible(text).replace(/[&<>]/g, (c) => ENTITIES[c]);

  /** Fill an alarm banner (an element holding a <ul>) from an API's "alarms": one line
   * per alarm with its kind, window and evidence; hidden when there are none. */
  LDP.renderAlarms = function (banner, alarms) {
    const list = banner.querySelector("ul");
    list.replaceChildren(...(alarms || []).map((a) => LDP.el("li", {
      dataset: { kind: a.kind, window: a.window },
      textContent: a.kind + " · " + a.window + ": " + a.evidence,
    })));
    banner.hidden = !(alarms && alarms.length);
    banner.dataset.count = String((alarms || []).length);
  };
})();
