// The audit log: who did what, newest first, filtered by action, resource, actor and
// time, a page at a time.

import * as api from "./api.js";
import { h, show, when } from "./dom.js";

export async function auditPage() {
  const inputs = {
    action: h("input", { id: "a-action", placeholder: "sandbox.create", spellcheck: "false" }),
    resourceId: h("input", { id: "a-resource", spellcheck: "false" }),
    actorId: h("input", { id: "a-actor", spellcheck: "false" }),
    from: h("input", { id: "a-from", type: "datetime-local" }),
    to: h("input", { id: "a-to", type: "datetime-local" }),
  };
  const body = h("tbody");
  const state = h("p", { class: "muted", role: "status" });
  const more = h("button", { type: "button", class: "quiet", hidden: true }, "Older entries");
  let cursor = null;
  const query = () => {
    const iso = (value) => (value ? new Date(value).toISOString() : undefined);
    return {
      action: inputs.action.value.trim() || undefined,
      resourceId: inputs.resourceId.value.trim() || undefined,
      actorId: inputs.actorId.value.trim() || undefined,
      from: iso(inputs.from.value),
      to: iso(inputs.to.value),
      limit: 100,
    };
  };
  async function load(append) {
    state.textContent = "Loading…";
    try {
      const page = await api.get("audit.list", { ...query(), cursor: append ? cursor : undefined });
      const rows = page.entries.map((entry) => h("tr", { "data-action": entry.action },
        h("td", {}, when(entry.createdAt)),
        h("td", {}, h("code", {}, entry.action)),
        h("td", {}, entry.resourceName ? `${entry.resourceName} (${entry.resourceId})` : entry.resourceId),
        h("td", { class: "hide-narrow" }, entry.actorId || "sandboxd"),
        h("td", { class: "hide-narrow" }, h("code", {}, JSON.stringify(entry.metadata)))));
      if (append) body.append(...rows); else body.replaceChildren(...rows);
      cursor = page.nextCursor || null;
      more.hidden = !cursor;
      state.textContent = body.children.length === 0 ? "Nothing recorded matches." : "";
    } catch (error) {
      state.textContent = error.message;
    }
  }
  more.addEventListener("click", () => load(true));
  const filters = h("form", { class: "panel", onsubmit: (event) => { event.preventDefault(); load(false); } },
    h("div", { class: "grid" },
      h("div", { class: "field" }, h("label", { for: "a-action" }, "Action"), inputs.action),
      h("div", { class: "field" }, h("label", { for: "a-resource" }, "Resource id"), inputs.resourceId),
      h("div", { class: "field" }, h("label", { for: "a-actor" }, "Actor (user id)"), inputs.actorId),
      h("div", { class: "field" }, h("label", { for: "a-from" }, "From"), inputs.from),
      h("div", { class: "field" }, h("label", { for: "a-to" }, "To"), inputs.to)),
    h("button", { type: "submit" }, "Filter"));
  show(h("h1", {}, "Audit log"), filters, state,
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "When"), h("th", {}, "Action"), h("th", {}, "Resource"),
        h("th", { class: "hide-narrow" }, "Actor"), h("th", { class: "hide-narrow" }, "Details"))),
      body)), more);
  await load(false);
}
