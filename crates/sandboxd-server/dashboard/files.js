// A sandbox's files: a directory at a time, downloads (files raw, directories as a tar)
// and uploads, both through the streamed transfer path, so size is no concern of the page.

import * as api from "./api.js";
import { h, when } from "./dom.js";

function join(dir, name) {
  return dir.endsWith("/") ? `${dir}${name}` : `${dir}/${name}`;
}

function parent(dir) {
  const trimmed = dir.replace(/\/+$/, "");
  const cut = trimmed.lastIndexOf("/");
  return cut <= 0 ? "/" : trimmed.slice(0, cut);
}

function size(bytes) {
  if (bytes === null || bytes === undefined) return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1048576) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

function downloadHref(sandboxId, path) {
  const query = new URLSearchParams({ sandboxId, path });
  return `/api/sandbox.download?${query}`;
}

export function filesPanel(sandbox) {
  let dir = sandbox.workdir || "/";
  const where = h("input", { id: "files-path", value: dir, "aria-label": "Directory", spellcheck: "false" });
  const body = h("tbody");
  const state = h("p", { class: "muted", role: "status" });
  const picker = h("input", { type: "file", id: "upload-file", "aria-label": "File to upload" });
  async function list(next) {
    state.textContent = "Loading…";
    try {
      const listing = await api.get("sandbox.listFiles", { sandboxId: sandbox.sandboxId, path: next });
      dir = listing.path || next;
      where.value = dir;
      const rows = listing.entries.map((entry) => {
        const path = join(dir, entry.name);
        const name = entry.type === "directory"
          ? h("button", { type: "button", class: "quiet", onclick: () => list(path) }, `${entry.name}/`)
          : h("span", {}, entry.name);
        return h("tr", { "data-file": entry.name },
          h("td", {}, name),
          h("td", { class: "hide-narrow" }, entry.type),
          h("td", {}, size(entry.size)),
          h("td", { class: "hide-narrow" }, when(entry.modifiedAt)),
          h("td", {}, entry.type === "file" || entry.type === "directory"
            ? h("a", { href: downloadHref(sandbox.sandboxId, path), download: entry.type === "directory" ? `${entry.name}.tar` : entry.name }, "Download")
            : ""));
      });
      if (dir !== "/") {
        rows.unshift(h("tr", {}, h("td", { colspan: "5" },
          h("button", { type: "button", class: "quiet", onclick: () => list(parent(dir)) }, "../"))));
      }
      body.replaceChildren(...rows);
      state.textContent = listing.entries.length === 0 ? "This directory is empty." : "";
    } catch (error) {
      state.textContent = error.message;
    }
  }
  const upload = h("button", { type: "button", id: "upload", onclick: async () => {
    const file = picker.files && picker.files[0];
    if (!file) { state.textContent = "Choose a file to upload first."; return; }
    upload.disabled = true;
    state.textContent = `Uploading ${file.name}…`;
    try {
      await api.upload(sandbox.sandboxId, join(dir, file.name), file);
      picker.value = "";
      await list(dir);
      state.textContent = `Uploaded ${file.name}.`;
    } catch (error) {
      state.textContent = `Upload failed: ${error.message}`;
    }
    upload.disabled = false;
  } }, "Upload");
  const go = h("form", { class: "console-input", onsubmit: (event) => { event.preventDefault(); list(where.value.trim() || "/"); } },
    where, h("button", { type: "submit", class: "quiet" }, "Go"));
  if (sandbox.status === "running") list(dir);
  else state.textContent = "Not running.";
  return h("section", { class: "panel" }, h("h2", {}, "Files"), go,
    h("div", { class: "actions" }, picker, upload), state,
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", { class: "hide-narrow" }, "Type"),
        h("th", {}, "Size"), h("th", { class: "hide-narrow" }, "Modified"), h("th", {}, ""))),
      body)));
}
