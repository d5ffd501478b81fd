// Volumes: named storage that outlives sandboxes. Listed with the sandboxes that mount
// each; a new one made from a form; one removed behind a confirmation (refused while a
// sandbox mounts it).

import * as api from "./api.js";
import { h, show, notice, when, confirmAction } from "./dom.js";

export async function volumesPage() {
  const [volumes, projects] = await Promise.all([api.get("volume.all"), api.get("project.all")]);
  const message = h("div", { role: "status" });
  const projectName = (id) => (projects.find((p) => p.projectId === id) || {}).name || id;
  const rows = volumes.map((volume) => h("tr", { "data-volume": volume.volumeId },
    h("td", {}, volume.name, h("br"), h("code", { class: "muted" }, volume.volumeId)),
    h("td", { class: "hide-narrow" }, projectName(volume.projectId)),
    h("td", {}, `${volume.sizeMb} MiB`),
    h("td", { class: "hide-narrow" }, volume.serverId || "local"),
    h("td", { "data-mounted": "" }, volume.sandboxes.length === 0 ? "—" : volume.sandboxes.flatMap((id, i) =>
      [i ? ", " : "", h("a", { href: `#/sandbox/${encodeURIComponent(id)}` }, id)])),
    h("td", { class: "hide-narrow" }, when(volume.createdAt)),
    h("td", {},
      h("button", { type: "button", class: "danger", "data-remove": "", onclick: async () => {
        if (!(await confirmAction(`Remove the volume ${volume.name} and everything in it?`, "Remove"))) return;
        try {
          await api.post("volume.remove", { volumeId: volume.volumeId });
          await volumesPage();
        } catch (error) { message.replaceChildren(notice(error.message, "error")); }
      } }, "Remove"))));
  const name = h("input", { id: "v-name", placeholder: "cache", autocomplete: "off", required: true });
  const size = h("input", { id: "v-size", type: "number", min: "1", value: "1024" });
  const project = h("select", { id: "v-project" },
    projects.map((p) => h("option", { value: p.projectId }, p.name)));
  const made = h("div", { role: "status" });
  const form = h("form", { class: "panel", id: "new-volume", onsubmit: async (event) => {
    event.preventDefault();
    try {
      await api.post("volume.create", {
        name: name.value.trim(),
        sizeMb: Number(size.value) || undefined,
        projectId: project.value || undefined,
      });
      await volumesPage();
    } catch (error) { made.replaceChildren(notice(error.message, "error")); }
  } },
  h("h2", {}, "New volume"),
  h("div", { class: "grid" },
    h("div", { class: "field" }, h("label", { for: "v-name" }, "Name"), name),
    h("div", { class: "field" }, h("label", { for: "v-size" }, "Size (MiB, reserved against the quota)"), size),
    projects.length > 1 ? h("div", { class: "field" }, h("label", { for: "v-project" }, "Project"), project) : null),
  made,
  h("button", { type: "submit" }, "Create volume"));
  show(h("h1", {}, "Volumes"),
    h("p", { class: "muted" }, "A volume keeps files across sandboxes: mount it when you create a sandbox (read-write or read-only), and the next sandbox that mounts it finds what the last one wrote."),
    message,
    rows.length === 0
      ? h("p", { class: "muted", role: "status" }, "No volumes yet.")
      : h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, h("th", {}, "Volume"), h("th", { class: "hide-narrow" }, "Project"), h("th", {}, "Size"),
          h("th", { class: "hide-narrow" }, "Server"), h("th", {}, "Mounted by"), h("th", { class: "hide-narrow" }, "Made"), h("th", {}, ""))),
        h("tbody", {}, rows))),
    form);
}
