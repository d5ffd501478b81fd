// The dashboard: a hash router over pages built from the API. Signed out, every route
// shows the sign-in form.

import * as api from "./api.js";
import { h, show, notice } from "./dom.js";
import { projectsPage } from "./projects.js";
import { environmentPage, createPage } from "./sandboxes.js";
import { sandboxPage } from "./sandbox.js";
import { auditPage } from "./audit.js";
import { snapshotsPage } from "./snapshots.js";
import { volumesPage } from "./volumes.js";
import { templatesPage } from "./templates.js";
import { accessPage } from "./access.js";
import { egressRequestsPage } from "./egress.js";

let signedIn = null;
/// Stops the timers and sockets of the page being left.
let leave = () => {};

function theme() {
  const saved = localStorage.getItem("sandboxd-theme");
  if (saved) document.documentElement.dataset.theme = saved;
  document.getElementById("theme").addEventListener("click", () => {
    const dark = document.documentElement.dataset.theme === "dark"
      || (!document.documentElement.dataset.theme && matchMedia("(prefers-color-scheme: dark)").matches);
    const next = dark ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    localStorage.setItem("sandboxd-theme", next);
  });
}

function chrome() {
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("sign-out").hidden = !signedIn;
}

function signInPage(message) {
  const key = h("input", { id: "key", name: "key", type: "password", autocomplete: "off", required: true,
    "aria-describedby": "key-error", spellcheck: "false" });
  const error = h("p", { id: "key-error", class: "error-text", role: "alert" }, message || "");
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { class: "panel sign-in", onsubmit: async (event) => {
    event.preventDefault();
    submit.disabled = true;
    error.textContent = "";
    try {
      signedIn = await api.signIn(key.value.trim());
      key.value = "";
      chrome();
      route();
    } catch (failure) {
      error.textContent = failure.status === 401
        ? "That key is not valid: check it, or ask an administrator for a new one."
        : failure.status === 429 ? "Too many attempts; wait a moment and try again." : failure.message;
      submit.disabled = false;
      key.focus();
    }
  } },
  h("h1", {}, "Sign in to sandboxd"),
  h("div", { class: "field" }, h("label", { for: "key" }, "API key"), key, error),
  h("p", { class: "muted" }, "The key is exchanged for a session cookie; the browser does not keep it."),
  submit);
  show(form);
  key.focus();
}

async function route() {
  leave();
  leave = () => {};
  if (!signedIn) return signInPage();
  const path = location.hash.replace(/^#/, "") || "/";
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts.length === 0) leave = (await projectsPage()) || leave;
    else if (parts[0] === "env" && parts[2] === "new") leave = (await createPage(parts[1])) || leave;
    else if (parts[0] === "env" && parts[1]) leave = (await environmentPage(parts[1])) || leave;
    else if (parts[0] === "sandbox" && parts[1]) leave = (await sandboxPage(parts[1])) || leave;
    else if (parts[0] === "audit") await auditPage();
    else if (parts[0] === "snapshots") await snapshotsPage();
    else if (parts[0] === "volumes") await volumesPage();
    else if (parts[0] === "templates") leave = (await templatesPage()) || leave;
    else if (parts[0] === "access") await accessPage();
    else if (parts[0] === "egress") leave = (await egressRequestsPage()) || leave;
    else show(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/" }, "Back to the projects")));
  } catch (error) {
    if (error.status === 401) {
      signedIn = null;
      chrome();
      return signInPage("You were signed out (the key was revoked or the session ended). Sign in again.");
    }
    show(notice(error.message, "error"));
  }
  document.getElementById("app").focus({ preventScroll: true });
}

/// Any page's request that finds the session gone brings back the sign-in form.
function signedOut() {
  if (!signedIn) return;
  leave();
  leave = () => {};
  signedIn = null;
  chrome();
  signInPage("You were signed out (the key was revoked or the session ended). Sign in again.");
}

async function start() {
  theme();
  document.getElementById("sign-out").addEventListener("click", async () => {
    try { await api.signOut(); } catch { /* the session may be gone already */ }
    signedIn = null;
    chrome();
    location.hash = "#/";
    signInPage();
  });
  window.addEventListener("hashchange", route);
  window.addEventListener("sandboxd:signed-out", signedOut);
  try {
    signedIn = await api.session();
  } catch (error) {
    show(notice(`The server did not answer: ${error.message}`, "error"));
    return;
  }
  chrome();
  route();
}

start();
