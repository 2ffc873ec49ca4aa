// The page's progressive enhancement (an ES module, no build step, no library).
//
// Reading works without it: the server renders every view. With it, the API key a person pastes is
// kept in this tab's sessionStorage and sent as "Authorization: Bearer" (never in a URL or a cookie),
// views are fetched as fragments and swapped into #app, and writes go to the JSON API: PUT /afi/write
// with If-Match (a stale edit shows both texts), DELETE /afi/delete, POST /afi/move, /keys.
// Server HTML is the only markup inserted; everything from the API goes in as text.

const KEY = "afi-key";
const FRAGMENT = "X-AFI-Fragment";

const key = () => sessionStorage.getItem(KEY);
const app = () => document.getElementById("app");

function headers(extra = {}) {
  const out = { ...extra };
  const k = key();
  if (k) out.Authorization = `Bearer ${k}`;
  return out;
}

function api(method, url, { body, type, ifMatch } = {}) {
  const h = headers(type ? { "Content-Type": type } : {});
  if (ifMatch) h["If-Match"] = ifMatch;
  return fetch(url, { method, headers: h, body, credentials: "omit", cache: "no-store" });
}

async function flash(response, fallback) {
  let text = fallback || `the server answered ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.error) text = `${body.error.code}: ${body.error.message}`;
  } catch {
    // not JSON: keep the fallback
  }
  say(text);
}

function say(text) {
  const box = document.getElementById("flash");
  if (!box) return;
  box.textContent = text;
  box.hidden = !text;
}

function marked() {
  document.body.dataset.key = key() ? "yes" : "no";
}

async function go(url, { push = true, focus = true } = {}) {
  const response = await fetch(url, { headers: headers({ [FRAGMENT]: "1" }), credentials: "omit", cache: "no-store" });
  const html = await response.text();
  app().innerHTML = html; // the server's own rendering, every value escaped there
  const main = document.getElementById("main");
  if (main && main.dataset.title) document.title = main.dataset.title;
  if (push) history.pushState({}, "", response.url);
  else history.replaceState({}, "", response.url);
  marked();
  if (focus && main) main.focus();
}

const browse = (path) => `/ui/browse?path=${encodeURIComponent(path)}`;
const parentOf = (path) => path.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || "/";

async function save(form) {
  const create = form.dataset.create === "1";
  const path = create
    ? `${form.dataset.folder.replace(/\/$/, "")}/${form.elements.name.value.replace(/^\/+/, "")}`
    : form.dataset.path;
  const query = new URLSearchParams({ path });
  if (create) query.set("create_only", "true");
  const text = form.elements.text.value;
  const response = await api("PUT", `/afi/write?${query}`, {
    body: text,
    type: "text/plain; charset=utf-8",
    ifMatch: create ? undefined : form.dataset.etag,
  });
  if (response.ok) {
    await go(browse(path));
    say("Saved.");
    return;
  }
  if (response.status === 409 && !create) {
    await conflict(form, path, text);
    return;
  }
  await flash(response);
}

async function conflict(form, path, mine) {
  const stored = await api("GET", `/afi/read?${new URLSearchParams({ path })}`);
  const box = document.getElementById("conflict");
  document.getElementById("conflict-mine").value = mine;
  document.getElementById("conflict-theirs").value = stored.ok ? await stored.text() : "(it was deleted)";
  form.dataset.latest = stored.headers.get("ETag") || "";
  box.hidden = false;
  box.querySelector("h2").focus?.();
  box.scrollIntoView();
  say(`Conflict: ${path} changed since you opened it; nothing was written.`);
}

async function act(name, target, form) {
  const edit = document.getElementById("edit-form");
  switch (name) {
    case "signin": {
      const value = form.elements.key.value.trim();
      if (!value) return;
      sessionStorage.setItem(KEY, value);
      form.elements.key.value = "";
      await go(location.href, { push: false });
      return;
    }
    case "signout":
      sessionStorage.removeItem(KEY);
      await go(location.href, { push: false });
      return;
    case "save":
      await save(form);
      return;
    case "overwrite":
      edit.dataset.etag = edit.dataset.latest || edit.dataset.etag;
      await save(edit);
      return;
    case "take-theirs":
      edit.elements.text.value = document.getElementById("conflict-theirs").value;
      edit.dataset.etag = edit.dataset.latest || edit.dataset.etag;
      document.getElementById("conflict").hidden = true;
      say("");
      edit.elements.text.focus();
      return;
    case "delete": {
      const path = target.dataset.path;
      if (!window.confirm(`Delete ${path}?`)) return;
      const response = await api("DELETE", `/afi/delete?${new URLSearchParams({ path })}`);
      if (!response.ok) return flash(response);
      await go(browse(parentOf(path)));
      say(`Deleted ${path}.`);
      return;
    }
    case "move": {
      const from = form.dataset.path;
      const to = form.elements.to.value.trim();
      const response = await api("POST", "/afi/move", { body: JSON.stringify({ from, to }), type: "application/json" });
      if (!response.ok) return flash(response);
      await go(browse(to));
      say(`Moved to ${to}.`);
      return;
    }
    case "key-create": {
      const body = JSON.stringify({ name: form.elements.name.value || null, scopes: [form.elements.scope.value] });
      const response = await api("POST", "/keys", { body, type: "application/json" });
      if (!response.ok) return flash(response);
      const made = await response.json();
      await go("/ui/keys", { push: false, focus: false });
      const box = document.getElementById("new-secret");
      box.replaceChildren();
      const title = document.createElement("p");
      title.textContent = `Key ${made.id} (${made.scopes.join(", ")}): copy it now, it is not shown again.`;
      const secret = document.createElement("code");
      secret.className = "token";
      secret.textContent = made.token;
      box.append(title, secret);
      box.hidden = false;
      return;
    }
    case "key-revoke": {
      const id = target.dataset.id;
      if (!window.confirm(`Revoke ${id}? Whoever holds it loses access at once.`)) return;
      const response = await api("DELETE", `/keys/${encodeURIComponent(id)}`);
      if (!response.ok) return flash(response);
      await go("/ui/keys", { push: false });
      say(`Revoked ${id}.`);
      return;
    }
    default:
  }
}

function ours(anchor) {
  if (!anchor || anchor.dataset.plain || anchor.target || anchor.hasAttribute("download")) return false;
  const url = new URL(anchor.href, location.href);
  return url.origin === location.origin && (url.pathname === "/" || url.pathname.startsWith("/ui/"));
}

document.addEventListener("click", (event) => {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
    return;
  }
  const button = event.target.closest("button[data-action]");
  if (button && button.type === "button") {
    event.preventDefault();
    act(button.dataset.action, button, button.form).catch((err) => say(String(err)));
    return;
  }
  const anchor = event.target.closest("a[href]");
  if (ours(anchor)) {
    event.preventDefault();
    say("");
    go(anchor.href).catch((err) => say(String(err)));
  }
});

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.dataset.action) {
    event.preventDefault();
    act(form.dataset.action, event.submitter || form, form).catch((err) => say(String(err)));
    return;
  }
  const action = new URL(form.action, location.href);
  if ((form.method || "get").toLowerCase() === "get" && action.origin === location.origin && action.pathname.startsWith("/ui/")) {
    event.preventDefault();
    action.search = new URLSearchParams(new FormData(form)).toString();
    say("");
    go(action.href).catch((err) => say(String(err)));
  }
});

document.addEventListener("keydown", (event) => {
  const typing = event.target.closest("input, textarea, select, [contenteditable]");
  if (event.key === "/" && !typing) {
    const box = document.getElementById("q");
    event.preventDefault();
    if (box) box.focus();
    else go("/ui/search").then(() => document.getElementById("q")?.focus());
  }
});

window.addEventListener("popstate", () => {
  go(location.href, { push: false }).catch((err) => say(String(err)));
});

marked();
if (key()) go(location.href, { push: false, focus: false }).catch((err) => say(String(err)));
