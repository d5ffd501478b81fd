// A sandbox's exposed ports: each with a link to open its preview in a new tab, a
// button to unexpose it, and a form to expose one (private behind a signed link, or
// public).

import * as api from "./api.js";
import { h, relative } from "./dom.js";

const LIFETIMES = [["1 hour", 3600], ["8 hours", 28800], ["1 day", 86400], ["7 days", 604800]];

export function portsPanel(sandbox) {
  const body = h("tbody");
  const state = h("p", { class: "muted", role: "status" });
  const running = sandbox.status === "running";
  async function refresh() {
    try {
      const ports = await api.get("sandbox.ports", { sandboxId: sandbox.sandboxId });
      body.replaceChildren(...ports.map((p) => h("tr", { "data-port": String(p.port) },
        h("td", {}, String(p.port)),
        h("td", {}, p.public ? "public" : "signed link"),
        h("td", { class: "hide-narrow" }, relative(p.expiresAt)),
        h("td", {}, h("a", { href: p.url, target: "_blank", rel: "noopener noreferrer", class: "open-preview" }, "Open")),
        h("td", {}, h("button", { type: "button", class: "quiet", onclick: async () => {
          try { await api.post("sandbox.unexposePort", { sandboxId: sandbox.sandboxId, port: p.port }); }
          catch (error) { state.textContent = error.message; }
          refresh();
        } }, "Unexpose")))));
      state.textContent = ports.length === 0 ? "No exposed ports." : "";
    } catch (error) {
      state.textContent = error.message;
    }
  }
  const port = h("input", { type: "number", name: "port", min: "1", max: "65535", required: true, placeholder: "8000", "aria-label": "Port" });
  const open = h("input", { type: "checkbox", name: "public", id: "expose-public" });
  const ttl = h("select", { name: "ttl", "aria-label": "Lifetime" },
    LIFETIMES.map(([label, seconds]) => h("option", { value: String(seconds) }, label)));
  const form = h("form", { class: "actions", id: "expose", onsubmit: async (event) => {
    event.preventDefault();
    try {
      await api.post("sandbox.exposePort", {
        sandboxId: sandbox.sandboxId,
        port: Number(port.value),
        public: open.checked,
        ttlSeconds: Number(ttl.value),
      });
      port.value = "";
      state.textContent = "";
    } catch (error) {
      state.textContent = error.message;
    }
    refresh();
  } }, port, ttl, h("label", { for: "expose-public" }, open, " public"),
    h("button", { type: "submit" }, "Expose"));
  if (running) refresh();
  else state.textContent = "Not running.";
  return h("section", { class: "panel" }, h("h2", {}, "Ports"),
    h("p", { class: "muted" }, "What listens on 127.0.0.1:<port> inside the sandbox, opened in a new tab."),
    state,
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Port"), h("th", {}, "Access"),
        h("th", { class: "hide-narrow" }, "Expires"), h("th", {}, ""), h("th", {}, ""))), body)),
    running ? form : null);
}
