// Snapshots: a sandbox's files kept; a new sandbox started from one, or one removed
// (behind a confirmation; refused while sandboxes made from it run).

import * as api from "./api.js";
import { h, show, notice, when, confirmAction } from "./dom.js";

function size(bytes) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export async function snapshotsPage() {
  const [snapshots, projects] = await Promise.all([api.get("snapshot.all"), api.get("project.all")]);
  const message = h("div", { role: "status" });
  // A sandbox from a snapshot starts in the first environment of the snapshot's project.
  const environmentOf = (projectId) => {
    const project = projects.find((p) => p.projectId === projectId);
    return project && project.environments[0] ? project.environments[0].environmentId : null;
  };
  const rows = snapshots.map((snapshot) => h("tr", { "data-snapshot": snapshot.snapshotId },
    h("td", {}, snapshot.name, h("br"), h("code", { class: "muted" }, snapshot.snapshotId)),
    h("td", {}, h("a", { href: `#/sandbox/${encodeURIComponent(snapshot.sandboxId)}` }, snapshot.sandboxId)),
    h("td", {}, size(snapshot.sizeBytes),
      snapshot.memoryBytes == null ? null : h("br"),
      snapshot.memoryBytes == null ? null
        : h("span", { class: "muted", "data-memory": "" }, `+ ${size(snapshot.memoryBytes)} of memory`)),
    h("td", { class: "hide-narrow" }, snapshot.serverId || "local"),
    h("td", { class: "hide-narrow" }, when(snapshot.createdAt)),
    h("td", {},
      h("button", { type: "button", "data-start": "", disabled: !environmentOf(snapshot.projectId), onclick: async () => {
        try {
          const made = await api.post("sandbox.create",
            { environmentId: environmentOf(snapshot.projectId), snapshotId: snapshot.snapshotId });
          location.hash = `#/sandbox/${encodeURIComponent(made.sandboxId)}`;
        } catch (error) { message.replaceChildren(notice(error.message, "error")); }
      } }, "New sandbox"),
      " ",
      h("button", { type: "button", class: "danger", "data-remove": "", onclick: async () => {
        if (!(await confirmAction(`Remove the snapshot ${snapshot.name}?`, "Remove"))) return;
        try {
          await api.post("snapshot.remove", { snapshotId: snapshot.snapshotId });
          await snapshotsPage();
        } catch (error) { message.replaceChildren(notice(error.message, "error")); }
      } }, "Remove"))));
  show(h("h1", {}, "Snapshots"),
    h("p", { class: "muted" }, "A snapshot keeps a sandbox's files, user and working directory (not its processes or environment variables); new sandboxes start from it."),
    message,
    rows.length === 0
      ? h("p", { class: "muted", role: "status" }, "No snapshots yet: take one from a sandbox's page.")
      : h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, h("th", {}, "Snapshot"), h("th", {}, "Taken of"), h("th", {}, "Size"),
          h("th", { class: "hide-narrow" }, "Server"), h("th", { class: "hide-narrow" }, "Taken"), h("th", {}, ""))),
        h("tbody", {}, rows))));
}
