/* A string metric's page: the discovered values with intervals, the detection threshold
 * at the current n, and estimates of values typed in. Every number comes from
 * /v1/estimates/<name> (?candidates=a,b,c for typed values). */
(function () {
  "use strict";
  const L = window.LDP;
  const page = L.page;
  const $ = (id) => document.getElementById(id);
  const state = { window: "all", candidates: "" };

  function interval(r) {
    return r.ci_low === null ? "—" : L.pct(Math.max(r.ci_low, 0)) + " – " + L.pct(r.ci_high);
  }

  function pvalue(p) {
    return p === null || p === undefined ? "—" : p < 1e-4 ? "< 0.0001" : p.toFixed(4);
  }

  /* A value's row; `extra` fills a last column (the candidates' "discovered"), if any. */
  function row(r, extra) {
    const share = Math.max(0, Math.min(1, r.frequency || 0));
    const bar = L.el("span", { className: "bar", attrs: { style: "width:" + (share * 100).toFixed(1) + "%" } });
    return L.el("tr", { dataset: { value: r.value } }, [
      L.el("td", { className: "value" }, L.visibleNodes(r.value)),
      L.el("td", { className: "num" }, [L.pct(r.frequency), bar]),
      L.el("td", { className: "num", textContent: interval(r) }),
      L.el("td", { className: "num", textContent: pvalue(r.p_value) }),
      ...(extra === null ? [] : [L.el("td", { textContent: extra })]),
    ]);
  }

  function render(body) {
    $("fact-n").textContent = L.int(body.n);
    const thr = body.detection_threshold;
    $("fact-threshold").textContent = thr === null ? "—" : L.pct(thr) + " at n = " + L.int(body.n);
    document.querySelectorAll('[data-field="alpha"]').forEach((e) => { e.textContent = Math.round(body.alpha * 100) + " %"; });
    document.querySelectorAll('[data-field="tested"]').forEach((e) => { e.textContent = L.int(body.tested); });
    document.querySelectorAll('[data-field="confidence"]').forEach((e) => { e.textContent = Math.round(body.confidence * 100) + " %"; });
    L.renderAlarms($("alarms"), body.alarms);
    if (body.alarm_rate) $("alarms").querySelector('[data-field="alarm-rate"]').textContent = L.int(Math.round(1 / body.alarm_rate));
    const rows = body.estimates.map((r) => row(r, null));
    $("discovered-table").querySelector("tbody").replaceChildren(...rows);
    $("none-found").hidden = rows.length > 0;
    const table = $("candidates-table");
    table.hidden = !state.candidates;
    table.querySelector("tbody").replaceChildren(
      ...body.candidates.map((r) => row(r, r.discovered ? "yes" : "no")));
  }

  async function refresh() {
    const url = L.url(page.api.estimates, {
      window: state.window === "all" ? null : state.window,
      candidates: state.candidates || null,
    });
    $("json-link").href = url;
    try {
      render(await L.getJSON(url));
      $("candidates-error").hidden = true;
    } catch (error) {
      if (!state.candidates) throw error;
      $("candidates-error").textContent = error.message;
      $("candidates-error").hidden = false;
    }
  }

  async function plan() {
    const pct = parseFloat($("plan-frequency").value);
    const answer = $("plan-answer");
    try {
      const body = await L.getJSON(L.url(page.api.plan, {
        epsilon: page.metric.epsilon, max_length: page.max_length, frequency: pct / 100,
      }));
      answer.textContent = body.users === null
        ? "No number of users finds values of " + pct + " %: below the sketch's floor (" + L.pct(body.floor) + ")."
        : L.int(body.users) + " users find values of " + pct + " % about half the time (ε = " +
          body.epsilon + ", " + body.max_length + " bytes; collisions with unfound values ignored).";
    } catch (error) {
      answer.textContent = error.message;
    }
  }

  const poll = L.poll(refresh, page.refresh || 0);
  $("plan-form").addEventListener("submit", (e) => { e.preventDefault(); plan(); });
  $("window-select").addEventListener("change", (e) => { state.window = e.target.value; poll.now(); });
  $("candidates-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.candidates = $("candidates-input").value.split(",").map((s) => s.trim()).filter(Boolean).join(",");
    poll.now();
  });
})();
