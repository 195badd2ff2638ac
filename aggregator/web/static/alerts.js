/* Alerts page: define a rule, acknowledge, resolve, silence or delete one (admin token,
   or the signed-in session with its CSRF token). */
(function () {
  "use strict";
  const { page } = window.LDP;
  const form = document.getElementById("new-alert");
  const status = document.getElementById("alert-form-status");

  const csrf = document.querySelector('meta[name="csrf-token"]');

  function token() {
    const field = form.elements.namedItem("token");
    return field ? field.value : "";
  }

  function credentials() {
    if (token()) return { Authorization: "Bearer " + token() };
    return csrf ? { "X-CSRF-Token": csrf.content } : {};
  }

  async function send(method, url, body) {
    const response = await fetch(url, {
      method: method,
      headers: { "Content-Type": "application/json", ...credentials() },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) {
      let error = response.status + "";
      try {
        error = (await response.json()).error;
      } catch (e) {
        /* not JSON */
      }
      throw new Error(error);
    }
  }

  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    const spec = {};
    for (const name of ["metric", "kind", "value", "dimension", "group", "webhook"]) {
      const v = form.elements.namedItem(name).value.trim();
      if (v) spec[name] = v;
    }
    for (const name of ["level", "min_change", "alpha"]) {
      const v = form.elements.namedItem(name).value.trim();
      if (v) spec[name] = Number(v);
    }
    const email = form.elements.namedItem("email").value.trim();
    if (email) spec.email = email.split(/[,\s]+/).filter(Boolean);
    try {
      await send("POST", page.api.list, spec);
      location.reload();
    } catch (e) {
      status.textContent = "refused: " + e.message;
    }
  });

  document.getElementById("alerts-table").addEventListener("click", async function (event) {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    if (!token() && !csrf) {
      status.textContent = "enter the admin token below first";
      return;
    }
    const id = button.closest("tr").dataset.rule;
    const action = button.dataset.action;
    const url = page.api.list + "/" + encodeURIComponent(id);
    try {
      if (action === "delete") await send("DELETE", url);
      else if (action === "silence") await send("POST", url + "/silence", { seconds: 3600 });
      else await send("POST", url + "/" + action, {});
      location.reload();
    } catch (e) {
      status.textContent = action + " refused: " + e.message;
    }
  });
})();
