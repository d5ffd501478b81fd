// Members and keys, for administrators: who belongs to the organization, with what
// role and grants; every key, with its scopes and expiry; new keys (shown once) and
// revocation.

import * as api from "./api.js";
import { h, show, notice, when, confirmAction } from "./dom.js";

export async function accessPage() {
  let members;
  let keys;
  try {
    [members, keys] = await Promise.all([api.get("member.all"), api.get("apiKey.all")]);
  } catch (error) {
    if (error.status === 403) {
      show(h("h1", {}, "Members and keys"), notice("Only administrators see the organization's members and keys."));
      return;
    }
    throw error;
  }
  const names = new Map(members.map((m) => [m.userId, m.name]));
  const created = h("div", { role: "status" });
  const keyRows = h("tbody");
  async function reload() {
    keys = await api.get("apiKey.all");
    keyRows.replaceChildren(...keys.map(keyRow));
  }
  function keyRow(key) {
    return h("tr", { "data-key": key.keyId },
      h("td", {}, key.name),
      h("td", {}, h("code", {}, `${key.prefix}…`)),
      h("td", { class: "hide-narrow" }, names.get(key.userId) || key.userId),
      h("td", { class: "hide-narrow" }, key.scopes ? key.scopes.join(", ") : "all of its user's"),
      h("td", { class: "hide-narrow" }, when(key.expiresAt)),
      h("td", {}, key.revokedAt ? `revoked ${when(key.revokedAt)}` : "active"),
      h("td", {}, key.revokedAt ? "" : h("button", { type: "button", class: "danger", onclick: async () => {
        if (!(await confirmAction(`Revoke the key ${key.name}? Whatever uses it is refused from now on.`, "Revoke"))) return;
        try { await api.post("apiKey.revoke", { keyId: key.keyId }); } catch (error) { created.replaceChildren(notice(error.message, "error")); }
        await reload();
      } }, "Revoke")));
  }
  keyRows.replaceChildren(...keys.map(keyRow));
  const keyName = h("input", { id: "k-name", placeholder: "ci-runner", autocomplete: "off" });
  const keyDays = h("input", { id: "k-days", type: "number", min: "1", placeholder: "never" });
  const newKey = h("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    const days = Number(keyDays.value);
    try {
      const made = await api.post("apiKey.create", {
        name: keyName.value.trim(),
        expiresInMs: days > 0 ? Math.round(days * 86400000) : undefined,
      });
      keyName.value = "";
      created.replaceChildren(h("div", { class: "notice" },
        h("p", {}, "The new key, shown this once: keep it now."),
        h("code", { "data-secret": "" }, made.secret)));
      await reload();
    } catch (error) {
      created.replaceChildren(notice((error.issues[0] && `${error.issues[0].path}: ${error.issues[0].message}`) || error.message, "error"));
    }
  } },
  h("h2", {}, "New key for you"),
  h("div", { class: "grid" },
    h("div", { class: "field" }, h("label", { for: "k-name" }, "Name"), keyName),
    h("div", { class: "field" }, h("label", { for: "k-days" }, "Expires in (days)"), keyDays)),
  h("button", { type: "submit" }, "Create key"));
  show(h("h1", {}, "Members and keys"),
    h("h2", {}, "Members"),
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Role"), h("th", { class: "hide-narrow" }, "Permissions"),
        h("th", { class: "hide-narrow" }, "Grants"), h("th", { class: "hide-narrow" }, "Since"))),
      h("tbody", {}, members.map((m) => h("tr", { "data-member": m.userId },
        h("td", {}, m.name), h("td", {}, m.role),
        h("td", { class: "hide-narrow" }, m.permissions.join(", ") || "—"),
        h("td", { class: "hide-narrow" }, `${m.projectIds.length} projects, ${m.sandboxIds.length} sandboxes, ${m.serverIds.length} servers`),
        h("td", { class: "hide-narrow" }, when(m.createdAt))))))),
    h("h2", {}, "Keys"),
    created,
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Key"), h("th", { class: "hide-narrow" }, "User"),
        h("th", { class: "hide-narrow" }, "Scopes"), h("th", { class: "hide-narrow" }, "Expires"), h("th", {}, "State"), h("th", {}, ""))),
      keyRows)),
    newKey);
}
