// koog's page: search as you type, live updates, folding, and the actions (each asked
// first, sent as a same-origin POST with the page's token). Plain JavaScript, no build.
"use strict";

(function () {
  const $ = (selector, root) => (root || document).querySelector(selector);
  const token = () => ($('meta[name="koog-page-token"]') || {}).content || "";

  function say(text, bad) {
    const box = $("#status");
    if (!box) return;
    box.textContent = text;
    box.classList.toggle("bad", !!bad);
    box.hidden = !text;
  }

  async function post(url, body) {
    const answer = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json", "x-koog-page-token": token() },
      body: JSON.stringify(body || {}),
    });
    let data = {};
    try {
      data = await answer.json();
    } catch (_) {
      data = {};
    }
    if (!answer.ok) {
      const said = data.error && data.error.message;
      throw new Error(said || "the server answered " + answer.status);
    }
    return data;
  }

  // The confirmation every action asks: resolves to true (or the name typed), or null.
  function ask(title, question, okText, name) {
    const dialog = $("#confirm");
    $("#confirm-title", dialog).textContent = title;
    $(".question", dialog).textContent = question;
    $("#confirm-ok", dialog).textContent = okText;
    const asking = $(".ask-name", dialog);
    const input = $("#confirm-name", dialog);
    asking.hidden = name === undefined;
    input.required = name !== undefined;
    input.value = name || "";
    return new Promise((resolve) => {
      dialog.addEventListener(
        "close",
        () => resolve(dialog.returnValue === "ok" ? (name === undefined ? true : input.value.trim()) : null),
        { once: true }
      );
      dialog.returnValue = "cancel";
      dialog.showModal();
      if (name !== undefined) {
        input.focus();
        input.select();
      } else {
        $('button[value="cancel"]', dialog).focus();
      }
    });
  }

  // The page as the server shows it now, its changing parts put in place.
  async function refresh(ids) {
    const answer = await fetch(location.href, { credentials: "same-origin", headers: { accept: "text/html" } });
    if (!answer.ok) return;
    const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
    const atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    for (const id of ids) {
      const now = document.getElementById(id);
      const then = fresh.getElementById(id);
      if (!now || !then) continue;
      const open = new Set(
        Array.from(now.querySelectorAll("details[open]")).map((d) => keyOf(d))
      );
      now.replaceWith(then);
      for (const d of then.querySelectorAll("details")) if (open.has(keyOf(d))) d.open = true;
    }
    if (atEnd && document.getElementById("turns")) window.scrollTo(0, document.body.scrollHeight);
  }

  function keyOf(details) {
    const owner = details.closest("[id]");
    const all = owner ? Array.from(owner.querySelectorAll("details")) : [];
    return (owner ? owner.id : "") + ":" + all.indexOf(details);
  }

  function live() {
    const main = $("#main");
    const url = main && main.dataset.events;
    if (!url || !window.EventSource) return;
    const source = new EventSource(url);
    const badge = $("#live");
    source.addEventListener("open", () => badge && (badge.hidden = false));
    source.addEventListener("error", () => badge && (badge.hidden = true));
    source.addEventListener("changed", () => refresh(["turns", "points", "sessions"]).catch(() => {}));
  }

  async function rollback(button) {
    const session = button.dataset.session;
    const point = button.dataset.checkpoint || null;
    const url = "/ui/session/" + encodeURIComponent(session) + "/rollback";
    const plan = await post(url, { checkpoint: point, confirmed: false });
    if (!(await ask("Roll back?", plan.question, "Roll back"))) return;
    const done = await post(url, { checkpoint: point, confirmed: true });
    say(done.done.join("\n"));
    await refresh(["turns", "points"]);
  }

  async function fork(button) {
    const session = button.dataset.session;
    const point = button.dataset.checkpoint || null;
    const what = point
      ? "A new session holding " + session + "'s history as it was at restore point " + point.slice(0, 8) + "."
      : "A new session holding all of " + session + "'s history.";
    const name = await ask("Fork " + session + "?", what, "Fork", session + "-fork");
    if (!name) return;
    const url = "/ui/session/" + encodeURIComponent(session) + "/fork";
    const done = await post(url, { name: name, checkpoint: point });
    location.href = "/ui/session/" + encodeURIComponent(done.session);
  }

  async function forget(button) {
    const id = button.dataset.record;
    const question = "“" + button.dataset.text + "” (" + id.slice(0, 8) + ") is removed from every index and never ingested again.";
    if (!(await ask("Forget this record for good?", question, "Forget"))) return;
    const done = await post("/ui/memory/" + encodeURIComponent(id) + "/forget", {});
    const row = button.closest("li");
    if (row) row.remove();
    say(done.done.join("\n"));
  }

  function fold(button) {
    const opening = button.getAttribute("aria-pressed") !== "true";
    for (const d of document.querySelectorAll("#turns details")) d.open = opening;
    button.setAttribute("aria-pressed", String(opening));
    button.textContent = opening ? "Close every fold" : "Open every fold";
  }

  const ACTIONS = { rollback: rollback, fork: fork, forget: forget };

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    if (button.dataset.action === "fold") return fold(button);
    const act = ACTIONS[button.dataset.action];
    if (!act) return;
    button.disabled = true;
    say("");
    act(button)
      .catch((error) => say(error.message, true))
      .finally(() => (button.disabled = false));
  });

  function searchAsYouType() {
    const input = $("input[data-search]");
    if (!input) return;
    let timer = 0;
    let asked = 0;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(async () => {
        const words = input.value.trim();
        const mine = ++asked;
        const url = new URL(location.href);
        if (words) url.searchParams.set("q", words);
        else url.searchParams.delete("q");
        history.replaceState(null, "", url);
        const answer = await fetch(input.dataset.search + "?q=" + encodeURIComponent(words), {
          credentials: "same-origin",
        });
        if (mine !== asked || !answer.ok) return;
        const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
        const found = fresh.getElementById("found");
        const now = document.getElementById("found");
        if (found && now) now.replaceWith(found);
      }, 250);
    });
  }

  function submitOnChange() {
    for (const select of document.querySelectorAll("select[data-submit]")) {
      select.addEventListener("change", () => select.form.submit());
    }
  }

  function login() {
    const form = $("#login");
    if (!form) return;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await post("/ui/login", { token: $("#token", form).value });
        location.reload();
      } catch (error) {
        say(error.message, true);
      }
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    live();
    searchAsYouType();
    submitOnChange();
    login();
  });
})();
