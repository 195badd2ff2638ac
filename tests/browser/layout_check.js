/* What tests/browser/test_layout_browser.py measures on a dashboard page, in the page:
 * returns {problems: [...], labels: <text boxes compared>}. A problem is one of
 *   - the page scrolls sideways (the document, or a box inside it),
 *   - an element ends outside the viewport,
 *   - two text boxes overlap (HTML text, chart ticks, legends, bar labels, annotations;
 *     rotated chart text is compared as the rotated box it is),
 *   - a text runs past its box (HTML text past its block; chart text past its chart;
 *     a horizontal category tick wider than its category's band, i.e. past its bar),
 *   - a value of a table stacked into cards (a phone) stands away from its card's edge.
 * Evaluated as `(slack) => ...`, slack in CSS px. */
(slack) => {
  const problems = [];
  const vw = document.documentElement.clientWidth;
  const describe = (e) => {
    if (!e || e.nodeType !== 1) return String(e);
    let s = e.tagName.toLowerCase();
    if (e.id) s += "#" + e.id;
    else if (typeof e.className === "string" && e.className.trim()) s += "." + e.className.trim().split(/\s+/).join(".");
    const parent = e.closest("[id]");
    if (parent && parent !== e) s = "#" + parent.id + " " + s;
    return s;
  };
  // Not rendered, invisible, transparent, or in a closed <details> (laid out, not drawn).
  const shown = (e) => e.checkVisibility({ opacityProperty: true, visibilityProperty: true, contentVisibilityAuto: true });
  const short = (t) => (t.length > 40 ? t.slice(0, 37) + "…" : t).replace(/\s+/g, " ");

  // 1. Sideways scrolling: the document, then any box that scrolls inside it.
  const sw = document.documentElement.scrollWidth;
  if (sw > vw) problems.push(`the page scrolls sideways: scrollWidth ${sw} > viewport ${vw}`);
  const all = Array.from(document.body.querySelectorAll("*"));
  for (const e of all) {
    if (e.closest("svg") || !shown(e)) continue;
    const st = getComputedStyle(e);
    if ((st.overflowX === "auto" || st.overflowX === "scroll") && e.scrollWidth > e.clientWidth + 1) {
      problems.push(`${describe(e)} scrolls sideways: ${e.scrollWidth} > ${e.clientWidth}`);
    }
  }

  // 2. Elements outside the viewport (an input that ends at x = 430 on a 390 px screen).
  for (const e of all) {
    if (e.closest("svg") || !shown(e)) continue;
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > vw + slack || r.left < -slack) {
      problems.push(`${describe(e)} spans x = ${Math.round(r.left)}…${Math.round(r.right)}, outside 0…${vw}`);
    }
  }

  // 3. Text boxes: HTML text nodes (one box per line) and chart text (a quadrilateral).
  const boxes = []; // {label, owner, pts: [[x, y] × 4], clip?}
  const quad = (r) => [[r.left, r.top], [r.right, r.top], [r.right, r.bottom], [r.left, r.bottom]];
  const block = (e) => {
    let a = e;
    while (a && ["inline", "contents"].includes(getComputedStyle(a).display)) a = a.parentElement;
    return a;
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const text = t.textContent;
    const parent = t.parentElement;
    if (!text.trim() || !parent || parent.closest("svg, script, style, select, template, noscript")) continue;
    if (!shown(parent)) continue;
    const range = document.createRange();
    range.selectNodeContents(t);
    const container = block(parent);
    const cbox = container.getBoundingClientRect();
    // A container that clips on purpose (text-overflow: ellipsis) may cut its text.
    const cst = getComputedStyle(container);
    const clips = cst.overflowX !== "visible" && cst.textOverflow === "ellipsis";
    for (const r of range.getClientRects()) {
      if (r.width < 0.5 || r.height < 0.5) continue;
      boxes.push({ label: short(text), owner: t, pts: quad(r) });
      if (!clips && (r.right > cbox.right + slack || r.left < cbox.left - slack)) {
        problems.push(`text "${short(text)}" runs past its box ${describe(container)}: ` +
          `${Math.round(r.left)}…${Math.round(r.right)} outside ${Math.round(cbox.left)}…${Math.round(cbox.right)}`);
      }
    }
  }
  for (const chart of document.querySelectorAll(".js-plotly-plot")) {
    if (!shown(chart)) continue;
    const svg = chart.querySelector("svg.main-svg");
    if (!svg) continue;
    const frame = svg.getBoundingClientRect();
    for (const t of chart.querySelectorAll("svg text")) {
      const text = t.textContent;
      if (!text.trim() || !shown(t) || t.closest(".hoverlayer, .modebar")) continue;
      const b = t.getBBox();
      const m = t.getScreenCTM();
      if (!m || b.width === 0) continue;
      const pts = [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
        .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
      const label = `${chart.id} "${short(text)}"`;
      boxes.push({ label, owner: t, pts });
      const xs = pts.map((p) => p[0]);
      const ys = pts.map((p) => p[1]);
      if (Math.min(...xs) < frame.left - slack || Math.max(...xs) > frame.right + slack ||
          Math.min(...ys) < frame.top - slack || Math.max(...ys) > frame.bottom + slack) {
        problems.push(`${label} runs past its chart`);
      }
    }
    // A level tick of a category x axis must stay within its category's band: under its
    // own bars. (A lying bar chart's ticks, one a row, are held apart by the overlap test.)
    const axis = (chart._fullLayout || {}).xaxis;
    if (axis && axis.type === "category") {
      const band = axis._length / Math.max(1, Math.abs(axis.range[1] - axis.range[0]));
      for (const t of chart.querySelectorAll(".xtick text")) {
        if (!t.textContent.trim()) continue;
        const angle = Number(t.getAttribute("transform")?.match(/rotate\((-?[\d.]+)/)?.[1] || 0);
        if (Math.abs(angle) > 1) continue;
        const w = t.getBoundingClientRect().width;
        if (w > band + slack) {
          problems.push(`${chart.id} tick "${short(t.textContent)}" (${Math.round(w)} px) runs past its bar's band (${Math.round(band)} px)`);
        }
      }
    }
  }

  // 4. A table stacked into cards (a phone): each value stands at its card's right edge,
  // across from its column's name (the row's name, its first cell, on the left).
  for (const td of document.querySelectorAll("table.stack td:not(:first-child)")) {
    const thead = td.closest("table").tHead;
    if (!shown(td) || !thead || shown(thead)) continue; // not stacked
    const edge = td.getBoundingClientRect().right - parseFloat(getComputedStyle(td).paddingRight);
    const lines = []; // [{top, bottom, right, text}]: a line's text may be several nodes
    const texts = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let t = texts.nextNode(); t; t = texts.nextNode()) {
      if (!t.textContent.trim() || !shown(t.parentElement)) continue;
      const range = document.createRange();
      range.selectNodeContents(t);
      for (const r of range.getClientRects()) {
        if (r.width < 0.5) continue;
        const middle = (r.top + r.bottom) / 2;
        const line = lines.find((l) => middle > l.top && middle < l.bottom);
        if (line) line.right = Math.max(line.right, r.right);
        else lines.push({ top: r.top, bottom: r.bottom, right: r.right, text: t.textContent });
      }
    }
    for (const l of lines) {
      if (Math.abs(l.right - edge) > 2 + slack) {
        problems.push(`"${short(l.text)}" ends ${Math.round(edge - l.right)} px left of its card's edge (${td.dataset.label || describe(td)})`);
      }
    }
  }

  // Overlap: separating axis test on the (possibly rotated) boxes, shrunk by `slack`.
  const shrink = (pts) => {
    const cx = pts.reduce((s, p) => s + p[0], 0) / 4;
    const cy = pts.reduce((s, p) => s + p[1], 0) / 4;
    return pts.map(([x, y]) => {
      const dx = x - cx, dy = y - cy, d = Math.hypot(dx, dy) || 1;
      return [x - (dx / d) * slack, y - (dy / d) * slack];
    });
  };
  const axes = (pts) => [0, 1].map((i) => {
    const [x1, y1] = pts[i], [x2, y2] = pts[i + 1];
    return [y1 - y2, x2 - x1];
  });
  const apart = (a, b) => [...axes(a), ...axes(b)].some(([ax, ay]) => {
    const pa = a.map(([x, y]) => x * ax + y * ay), pb = b.map(([x, y]) => x * ax + y * ay);
    return Math.max(...pa) <= Math.min(...pb) || Math.max(...pb) <= Math.min(...pa);
  });
  const shrunk = boxes.map((b) => {
    const pts = shrink(b.pts);
    const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
    return { ...b, pts, x0: Math.min(...xs), x1: Math.max(...xs), y0: Math.min(...ys), y1: Math.max(...ys) };
  }).sort((a, b) => a.x0 - b.x0);
  const seen = new Set();
  for (let i = 0; i < shrunk.length; i++) {
    const a = shrunk[i];
    for (let j = i + 1; j < shrunk.length && shrunk[j].x0 < a.x1; j++) {
      const b = shrunk[j];
      if (a.owner === b.owner || b.y0 >= a.y1 || a.y0 >= b.y1 || apart(a.pts, b.pts)) continue;
      const key = a.label + " | " + b.label;
      if (seen.has(key)) continue;
      seen.add(key);
      problems.push(`text boxes overlap: ${a.label} and ${b.label}`);
    }
  }
  return { problems, labels: boxes.length };
}
