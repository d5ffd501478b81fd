// An environment's sandboxes, refreshing live, and the create form.

import * as api from "./api.js";
import { h, show, notice, relative, when, confirmAction } from "./dom.js";

const REFRESH_MS = 2000;

function badge(status) {
  return h("span", { class: `badge ${status}`, "data-status": status }, status);
}

function row(sandbox, refresh) {
  const open = `#/sandbox/${encodeURIComponent(sandbox.sandboxId)}`;
  return h("tr", { "data-sandbox": sandbox.sandboxId },
    h("td", {}, h("a", { href: open }, sandbox.name || sandbox.sandboxId)),
    h("td", { class: "hide-narrow" }, sandbox.image),
    h("td", {}, badge(sandbox.status)),
    h("td", { class: "hide-narrow" }, sandbox.serverId || "local"),
    h("td", { class: "hide-narrow" }, `${sandbox.cpu} CPU / ${sandbox.memoryMb} MiB`),
    h("td", {}, sandbox.status === "running" ? relative(sandbox.expiresAt) : "—"),
    h("td", { class: "hide-narrow", title: when(sandbox.createdAt) }, relative(sandbox.createdAt)),
    h("td", {}, h("div", { class: "actions" },
      h("a", { href: open }, "Open"),
      sandbox.status === "running" || sandbox.status === "paused"
        ? h("button", { type: "button", class: "danger", onclick: async () => {
          if (!(await confirmAction(`Kill ${sandbox.name || sandbox.sandboxId}? Everything in it is lost.`, "Kill"))) return;
          await api.post("sandbox.kill", { sandboxId: sandbox.sandboxId });
          refresh();
        } }, "Kill")
        : null)));
}

export async function environmentPage(environmentId) {
  const body = h("tbody");
  const status = h("p", { class: "muted", role: "status" }, "Loading…");
  const table = h("div", { class: "table-wrap" }, h("table", {},
    h("thead", {}, h("tr", {},
      h("th", {}, "Name"), h("th", { class: "hide-narrow" }, "Image"), h("th", {}, "Status"),
      h("th", { class: "hide-narrow" }, "Server"), h("th", { class: "hide-narrow" }, "CPU / RAM"),
      h("th", {}, "Expires"), h("th", { class: "hide-narrow" }, "Created"), h("th", {}, "Actions"))),
    body));
  let stopped = false;
  async function refresh() {
    if (stopped) return;
    try {
      const sandboxes = await api.get("sandbox.list", { environmentId });
      body.replaceChildren(...sandboxes.map((s) => row(s, refresh)));
      status.textContent = sandboxes.length === 0
        ? "No sandboxes in this environment yet. Create one to start."
        : `${sandboxes.length} sandbox${sandboxes.length === 1 ? "" : "es"}; refreshed ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      status.textContent = `Could not refresh: ${error.message}`;
    }
  }
  await refresh();
  const timer = setInterval(refresh, REFRESH_MS);
  show(
    h("h1", {}, "Sandboxes"),
    h("div", { class: "actions" },
      h("a", { class: "button", href: `#/env/${encodeURIComponent(environmentId)}/new` }, "New sandbox"),
      h("a", { href: "#/" }, "All projects")),
    status, table);
  return () => { stopped = true; clearInterval(timer); };
}

function field(name, label, input, help) {
  input.id = `f-${name}`;
  input.name = name;
  input.setAttribute("aria-describedby", `e-${name}`);
  return h("div", { class: "field" },
    h("label", { for: `f-${name}` }, label), input,
    help ? h("p", { class: "muted" }, help) : null,
    h("p", { class: "error", id: `e-${name}`, "data-error-for": name, role: "alert" }));
}

/// The server's issues shown next to the fields they name.
function showIssues(form, issues) {
  for (const slot of form.querySelectorAll("[data-error-for]")) slot.textContent = "";
  const unplaced = [];
  for (const issue of issues) {
    const top = issue.path.split(".")[0];
    const name = top === "timeoutMs" ? "timeout" : top;
    const slot = form.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
    if (slot) slot.textContent = issue.message;
    else unplaced.push(`${issue.path}: ${issue.message}`);
  }
  return unplaced;
}

export async function createPage(environmentId) {
  const [templates, servers, volumes] = await Promise.all([
    api.get("sandbox.templates"),
    api.get("server.all").catch(() => []),
    api.get("volume.all").catch(() => []),
  ]);
  const source = h("select", {},
    h("option", { value: "template" }, "Template"), h("option", { value: "image" }, "Custom image"));
  const template = h("select", {}, templates.map((t) => h("option", { value: t.name }, `${t.name} (${t.image})`)));
  const image = h("input", { placeholder: "python:3.12-slim", autocomplete: "off" });
  const server = h("select", {}, h("option", { value: "" }, "This server"),
    servers.map((s) => h("option", { value: s.serverId }, s.name)));
  const form = h("form", { class: "panel", novalidate: true });
  const templateField = field("template", "Template", template);
  const imageField = field("image", "Image", image);
  imageField.hidden = true;
  source.addEventListener("change", () => {
    templateField.hidden = source.value !== "template";
    imageField.hidden = source.value !== "image";
  });
  const inputs = {
    name: h("input", { placeholder: "my-sandbox", autocomplete: "off" }),
    cpu: h("input", { type: "number", step: "0.1", value: "1" }),
    memoryMb: h("input", { type: "number", step: "64", value: "512" }),
    timeout: h("input", { type: "number", value: "5" }),
    networkMode: h("select", {}, h("option", { value: "isolated" }, "Isolated (no network)"),
      h("option", { value: "internet" }, "Internet (egress)")),
    envVars: h("textarea", { placeholder: "KEY=value, one per line", spellcheck: "false" }),
    volume: h("select", {}, h("option", { value: "" }, "None"),
      volumes.map((v) => h("option", { value: v.volumeId }, v.name))),
    mountPath: h("input", { placeholder: "/data", autocomplete: "off" }),
    readOnly: h("input", { type: "checkbox", id: "f-readOnly" }),
  };
  const general = h("p", { class: "error-text", role: "alert" });
  const submit = h("button", { type: "submit" }, "Create");
  form.append(...[
    field("name", "Name", inputs.name),
    field("source", "Source", source),
    templateField, imageField,
    servers.length ? field("serverId", "Server", server) : null,
    h("div", { class: "grid" },
      field("cpu", "CPU", inputs.cpu),
      field("memoryMb", "Memory (MiB)", inputs.memoryMb),
      field("timeout", "Idle timeout (minutes)", inputs.timeout)),
    field("networkMode", "Network", inputs.networkMode),
    field("envVars", "Environment variables", inputs.envVars, "Kept sealed on the server; never shown again."),
    volumes.length ? h("div", { class: "grid" },
      field("volumes", "Volume", inputs.volume),
      field("mountPath", "Mounted at", inputs.mountPath),
      h("div", { class: "field" }, h("label", {}, inputs.readOnly, " Read-only"))) : null,
    general,
    h("div", { class: "actions" }, submit,
      h("a", { href: `#/env/${encodeURIComponent(environmentId)}` }, "Cancel")),
  ].filter(Boolean));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.disabled = true;
    general.textContent = "";
    const minutes = Number(inputs.timeout.value);
    const body = {
      environmentId,
      name: inputs.name.value.trim() || undefined,
      cpu: Number(inputs.cpu.value),
      memoryMb: Number(inputs.memoryMb.value),
      timeoutMs: Number.isFinite(minutes) ? Math.round(minutes * 60000) : undefined,
      networkMode: inputs.networkMode.value,
      envVars: inputs.envVars.value.trim() || undefined,
      serverId: server.value || undefined,
    };
    if (inputs.volume.value) {
      body.volumes = [{ volumeId: inputs.volume.value, path: inputs.mountPath.value.trim() || "/data",
        readOnly: inputs.readOnly.checked }];
    }
    if (source.value === "template") body.template = template.value;
    else body.image = image.value.trim();
    submit.textContent = "Creating…";
    try {
      const sandbox = await api.post("sandbox.create", body);
      location.hash = `#/sandbox/${encodeURIComponent(sandbox.sandboxId)}`;
    } catch (error) {
      const unplaced = showIssues(form, error.issues || []);
      general.textContent = error.issues && error.issues.length
        ? unplaced.join("; ") || "Fix the fields marked above."
        : error.message;
      submit.disabled = false;
      submit.textContent = "Create";
    }
  });
  show(h("h1", {}, "New sandbox"), form);
  inputs.name.focus();
}
