// Members and keys, for administrators: who belongs to the organization, with what
// role and grants (added, changed, removed here); every key, with its scopes and
// expiry; new keys (shown once) for oneself or a member, and revocation. The server
// decides what each administrator may grant: a refusal is shown as it gives it.

import * as api from "./api.js";
import { h, show, notice, when, confirmAction } from "./dom.js";

const ROLES = ["member", "admin", "owner"];
const PERMISSIONS = ["service:create", "service:read", "service:delete", "deployment:create", "project:create", "egress:decide"];

function failure(error) {
  return (error.issues && error.issues[0] && `${error.issues[0].path}: ${error.issues[0].message}`) || error.message;
}

export async function accessPage() {
  let members;
  let keys;
  let projects;
  try {
    [members, keys, projects] = await Promise.all([api.get("member.all"), api.get("apiKey.all"), api.get("project.all")]);
  } catch (error) {
    if (error.status === 403) {
      show(h("h1", {}, "Members and keys"), notice("Only administrators see the organization's members and keys."));
      return;
    }
    throw error;
  }
  let names = new Map(members.map((m) => [m.userId, m.name]));
  const created = h("div", { role: "status" });
  const memberMessage = h("div", { role: "status" });
  const keyRows = h("tbody");
  const memberRows = h("tbody");
  const keyOwner = h("select", { id: "k-user" });
  async function reload() {
    [members, keys] = await Promise.all([api.get("member.all"), api.get("apiKey.all")]);
    names = new Map(members.map((m) => [m.userId, m.name]));
    memberRows.replaceChildren(...members.map(memberRow));
    keyRows.replaceChildren(...keys.map(keyRow));
    keyOwner.replaceChildren(h("option", { value: "" }, "Me"),
      ...members.map((m) => h("option", { value: m.userId }, m.name)));
  }
  function memberRow(member) {
    const role = h("select", { "aria-label": `Role of ${member.name}`, "data-role-of": member.name },
      ROLES.map((r) => h("option", { value: r, selected: r === member.role }, r)));
    role.addEventListener("change", async () => {
      try {
        await api.post("member.update", { userId: member.userId, role: role.value });
        memberMessage.replaceChildren(notice(`${member.name} is now ${role.value}.`));
      } catch (error) {
        memberMessage.replaceChildren(notice(failure(error), "error"));
      }
      await reload();
    });
    return h("tr", { "data-member": member.name },
      h("td", {}, member.name), h("td", {}, role),
      h("td", { class: "hide-narrow" }, member.permissions.join(", ") || "—"),
      h("td", { class: "hide-narrow" }, `${member.projectIds.length} projects, ${member.sandboxIds.length} sandboxes, ${member.serverIds.length} servers`),
      h("td", { class: "hide-narrow" }, when(member.createdAt)),
      h("td", {}, h("button", { type: "button", class: "danger", onclick: async () => {
        if (!(await confirmAction(`Remove ${member.name}? Their keys stop working.`, "Remove"))) return;
        try { await api.post("member.remove", { userId: member.userId }); } catch (error) { memberMessage.replaceChildren(notice(failure(error), "error")); }
        await reload();
      } }, "Remove")));
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
  await reload();
  const memberName = h("input", { id: "m-name", placeholder: "Ada", autocomplete: "off" });
  const memberRole = h("select", { id: "m-role" }, ROLES.map((r) => h("option", { value: r }, r)));
  const permissionBoxes = PERMISSIONS.map((p) => h("input", { type: "checkbox", value: p, id: `m-p-${p}`, checked: p === "service:read" }));
  const projectBoxes = projects.map((p) => h("input", { type: "checkbox", value: p.projectId, id: `m-project-${p.projectId}` }));
  const checks = (boxes, labels) => h("div", { class: "actions" }, boxes.map((box, i) =>
    h("label", { class: "check", for: box.id }, box, ` ${labels[i]}`)));
  const newMember = h("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    try {
      await api.post("member.create", {
        name: memberName.value.trim(),
        role: memberRole.value,
        permissions: permissionBoxes.filter((b) => b.checked).map((b) => b.value),
        projectIds: projectBoxes.filter((b) => b.checked).map((b) => b.value),
      });
      memberMessage.replaceChildren(notice(`${memberName.value.trim()} was added.`));
      memberName.value = "";
      await reload();
    } catch (error) {
      memberMessage.replaceChildren(notice(failure(error), "error"));
    }
  } },
  h("h2", {}, "Add a member"),
  h("div", { class: "grid" },
    h("div", { class: "field" }, h("label", { for: "m-name" }, "Name"), memberName),
    h("div", { class: "field" }, h("label", { for: "m-role" }, "Role"), memberRole)),
  h("fieldset", {}, h("legend", {}, "Permissions"), checks(permissionBoxes, PERMISSIONS)),
  projects.length ? h("fieldset", {}, h("legend", {}, "Projects"), checks(projectBoxes, projects.map((p) => p.name))) : null,
  h("button", { type: "submit" }, "Add member"));
  const keyName = h("input", { id: "k-name", placeholder: "ci-runner", autocomplete: "off" });
  const keyDays = h("input", { id: "k-days", type: "number", min: "1", placeholder: "never" });
  const keyE2b = h("input", { id: "k-e2b", type: "checkbox" });
  const newKey = h("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    const days = Number(keyDays.value);
    try {
      const made = await api.post("apiKey.create", {
        name: keyName.value.trim(),
        userId: keyOwner.value || undefined,
        expiresInMs: days > 0 ? Math.round(days * 86400000) : undefined,
        format: keyE2b.checked ? "e2b" : undefined,
      });
      keyName.value = "";
      created.replaceChildren(h("div", { class: "notice" },
        h("p", {}, "The new key, shown this once: keep it now."),
        h("code", { "data-secret": "" }, made.secret)));
      await reload();
    } catch (error) {
      created.replaceChildren(notice(failure(error), "error"));
    }
  } },
  h("h2", {}, "New key"),
  h("div", { class: "grid" },
    h("div", { class: "field" }, h("label", { for: "k-name" }, "Name"), keyName),
    h("div", { class: "field" }, h("label", { for: "k-user" }, "For"), keyOwner),
    h("div", { class: "field" }, h("label", { for: "k-days" }, "Expires in (days)"), keyDays)),
  h("label", { class: "check", for: "k-e2b", title: "e2b_ and hex, the form E2B's SDKs check for; it works everywhere a key does" }, keyE2b, " In E2B's form (for E2B's SDKs)"),
  h("button", { type: "submit" }, "Create key"));
  show(h("h1", {}, "Members and keys"),
    h("h2", {}, "Members"),
    memberMessage,
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Role"), h("th", { class: "hide-narrow" }, "Permissions"),
        h("th", { class: "hide-narrow" }, "Grants"), h("th", { class: "hide-narrow" }, "Since"), h("th", {}, ""))),
      memberRows)),
    newMember,
    h("h2", {}, "Keys"),
    created,
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Key"), h("th", { class: "hide-narrow" }, "User"),
        h("th", { class: "hide-narrow" }, "Scopes"), h("th", { class: "hide-narrow" }, "Expires"), h("th", {}, "State"), h("th", {}, ""))),
      keyRows)),
    newKey);
}
