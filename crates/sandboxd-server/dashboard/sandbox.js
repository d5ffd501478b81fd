// One sandbox: its facts, rename, extend-timeout, kill and delete behind confirmations, and a
// console streaming commands over the exec WebSocket.

import * as api from "./api.js";
import { h, show, notice, relative, when, confirmAction } from "./dom.js";
import { egressPanel } from "./egress.js";
import { filesPanel } from "./files.js";
import { portsPanel } from "./ports.js";
import { processesPanel } from "./processes.js";
import { terminalPanel } from "./terminal.js";
import { usagePanel } from "./usage.js";

const REFRESH_MS = 2000;
/// The console keeps at most this much text; older output scrolls away.
const CONSOLE_CHARS = 200_000;

function facts(sandbox) {
  const rows = [
    ["Status", h("span", { class: `badge ${sandbox.status}`, "data-status": sandbox.status }, sandbox.status)],
    ["Paused to", sandbox.pausedTo === "disk"
      ? `disk (${Math.max(1, Math.round((sandbox.hibernatedBytes || 0) / 1048576))} MiB of memory saved)`
      : sandbox.pausedTo === "ram" ? "memory" : "—"],
    ["Image", sandbox.image], ["Template", sandbox.template || "—"],
    ["CPU", `${sandbox.cpu}`], ["Memory", `${sandbox.memoryMb} MiB`], ["PIDs limit", `${sandbox.pidsLimit}`],
    ["Network", sandbox.networkMode], ["Workdir", sandbox.workdir], ["User", sandbox.user || "—"],
    ["Server", sandbox.serverId || "local"], ["Isolation", sandbox.isolation],
    ["Volumes", (sandbox.volumes || []).length === 0 ? "—"
      : sandbox.volumes.map((v) => `${v.path}${v.readOnly ? " (read-only)" : ""}`).join(", ")],
    ["Idle timeout", `${Math.round(sandbox.timeoutMs / 60000)} min`],
    ["Expires", sandbox.status === "running" ? `${relative(sandbox.expiresAt)} (${when(sandbox.expiresAt)})` : "—"],
    ["Created", when(sandbox.createdAt)], ["Killed", when(sandbox.killedAt)],
    ["Container", sandbox.containerId || "—"], ["Sandbox id", sandbox.sandboxId],
  ];
  return h("dl", { class: "facts", "data-facts": "" },
    rows.flatMap(([name, value]) => [h("dt", {}, name), h("dd", { "data-fact": name }, value)]));
}

function extendDialog(sandbox, done) {
  const minutes = h("input", { id: "extend-minutes", type: "number", value: "30", min: "1", max: "1440" });
  const error = h("p", { class: "error-text", role: "alert" });
  const dialog = h("dialog", { "aria-label": "Extend the timeout" },
    h("form", { method: "dialog", onsubmit: async (event) => {
      event.preventDefault();
      try {
        await api.post("sandbox.setTimeout", { sandboxId: sandbox.sandboxId, timeoutMs: Math.round(Number(minutes.value) * 60000) });
        dialog.close();
        done();
      } catch (failure) {
        error.textContent = (failure.issues[0] && failure.issues[0].message) || failure.message;
      }
    } },
    h("h2", {}, "Extend the timeout"),
    h("div", { class: "field" }, h("label", { for: "extend-minutes" }, "Idle timeout from now (minutes)"), minutes, error),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "quiet", onclick: () => dialog.close() }, "Cancel"),
      h("button", { type: "submit" }, "Extend"))));
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  minutes.select();
}

function renameDialog(sandbox, done) {
  const name = h("input", { id: "rename-name", value: sandbox.name || "", maxlength: "64", required: "" });
  const error = h("p", { class: "error-text", role: "alert" });
  const dialog = h("dialog", { "aria-label": "Rename the sandbox" },
    h("form", { method: "dialog", onsubmit: async (event) => {
      event.preventDefault();
      try {
        await api.post("sandbox.rename", { sandboxId: sandbox.sandboxId, name: name.value });
        dialog.close();
        done();
      } catch (failure) {
        error.textContent = (failure.issues[0] && failure.issues[0].message) || failure.message;
      }
    } },
    h("h2", {}, "Rename the sandbox"),
    h("div", { class: "field" }, h("label", { for: "rename-name" }, "Name"), name, error),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "quiet", onclick: () => dialog.close() }, "Cancel"),
      h("button", { type: "submit" }, "Rename"))));
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  name.select();
}

/// The console: one command at a time over `/sandbox-exec`.
function console_(sandbox) {
  const output = h("div", { class: "console", id: "console-output", role: "log", "aria-label": "Console output", tabindex: "0" });
  const input = h("input", { id: "console-input", autocomplete: "off", spellcheck: "false",
    placeholder: "echo hello", "aria-label": "Command" });
  const run = h("button", { type: "submit" }, "Run");
  let ws = null;
  let ready = false;
  let busy = false;
  const write = (text, kind = "") => {
    output.append(h("span", { class: kind }, text));
    while (output.textContent.length > CONSOLE_CHARS && output.firstChild) output.firstChild.remove();
    output.scrollTop = output.scrollHeight;
  };
  const connect = () => {
    ws = api.socket(`/sandbox-exec?sandboxId=${encodeURIComponent(sandbox.sandboxId)}`);
    ws.addEventListener("message", (event) => {
      let message;
      try { message = JSON.parse(event.data); } catch { return; }
      if (message.type === "ready") { ready = true; run.disabled = busy; }
      else if (message.type === "stdout") write(message.data);
      else if (message.type === "stderr") write(message.data, "stderr");
      else if (message.type === "exit") {
        write(`[exit ${message.exitCode}${message.timedOut ? ", timed out" : ""}]\n`, "note");
        busy = false; run.disabled = false;
      } else if (message.type === "error") {
        write(`[${message.message}]\n`, "stderr");
        busy = false; run.disabled = false;
      }
    });
    ws.addEventListener("close", (event) => {
      ready = false;
      run.disabled = true;
      if (event.code !== 1000) write(`[disconnected${event.reason ? `: ${event.reason}` : ""}]\n`, "note");
    });
  };
  const form = h("form", { class: "console-input", onsubmit: (event) => {
    event.preventDefault();
    const cmd = input.value;
    if (!cmd.trim() || !ready || busy) return;
    busy = true;
    run.disabled = true;
    write(`$ ${cmd}\n`, "note");
    ws.send(JSON.stringify({ type: "exec", cmd }));
    input.value = "";
  } }, input, run);
  run.disabled = true;
  if (sandbox.status === "running") connect();
  else write("[the sandbox is not running]\n", "note");
  return {
    element: h("section", { class: "panel" }, h("h2", {}, "Console"), output, form),
    close: () => { if (ws) ws.close(1000); },
  };
}

export async function sandboxPage(sandboxId) {
  let sandbox = await api.get("sandbox.one", { sandboxId });
  const factsSlot = h("div");
  const title = h("h1", { id: "sandbox-title" });
  const actions = h("div", { class: "actions" });
  const message = h("div", { role: "status" });
  let stopped = false;
  let shownStatus = null;
  const render = () => {
    factsSlot.replaceChildren(facts(sandbox));
    title.textContent = sandbox.name || sandbox.sandboxId;
    // The buttons stay as they are (and keep focus) until the status changes.
    if (shownStatus === sandbox.status) return;
    shownStatus = sandbox.status;
    const running = sandbox.status === "running";
    const paused = sandbox.status === "paused";
    // A refusal stays on the page to be read; only a done pause or resume reloads it.
    const freeze = (procedure, fields = {}) => async () => {
      try { sandbox = await api.post(procedure, { sandboxId, ...fields }); } catch (error) { message.replaceChildren(notice(error.message, "error")); return; }
      location.reload();
    };
    const hibernates = sandbox.isolation === "gvisor" && !sandbox.serverId && sandbox.pausedTo !== "disk";
    actions.replaceChildren(...[
      h("a", { href: `#/env/${encodeURIComponent(sandbox.environmentId)}` }, "Back to the sandboxes"),
      running || paused ? h("button", { type: "button", class: "quiet", id: "rename", onclick: () => renameDialog(sandbox, refresh) }, "Rename") : null,
      running ? h("button", { type: "button", class: "quiet", id: "extend", onclick: () => extendDialog(sandbox, refresh) }, "Extend timeout") : null,
      running ? h("button", { type: "button", class: "quiet", id: "pause", title: "Freeze its processes (memory kept, no CPU); any call resumes it", onclick: freeze("sandbox.pause") }, "Pause") : null,
      (running || paused) && hibernates ? h("button", { type: "button", class: "quiet", id: "pause-to-disk", title: "Save its processes and memory to the host's disk and stop its container; a resume restores them", onclick: freeze("sandbox.pause", { memory: "disk" }) }, "Pause to disk") : null,
      paused ? h("button", { type: "button", id: "resume", onclick: freeze("sandbox.resume") }, "Resume") : null,
      running || paused ? h("button", { type: "button", class: "quiet", id: "snapshot", title: "Keep its files as a snapshot new sandboxes start from", onclick: async () => {
        try {
          const taken = await api.post("sandbox.snapshot", { sandboxId });
          message.replaceChildren(h("p", { class: "notice", role: "status", "data-snapshot-taken": taken.snapshotId },
            `Snapshot ${taken.name} taken. `, h("a", { href: "#/snapshots" }, "See the snapshots")));
        } catch (error) { message.replaceChildren(notice(error.message, "error")); }
      } }, "Snapshot") : null,
      running || paused ? h("button", { type: "button", class: "danger", id: "kill", onclick: async () => {
        if (!(await confirmAction("Kill this sandbox? Its processes and files are gone.", "Kill"))) return;
        try { await api.post("sandbox.kill", { sandboxId }); } catch (error) { message.replaceChildren(notice(error.message, "error")); }
        refresh();
      } }, "Kill") : null,
      h("button", { type: "button", class: "danger", id: "delete", onclick: async () => {
        if (!(await confirmAction("Delete this sandbox and its record?", "Delete"))) return;
        try {
          await api.post("sandbox.remove", { sandboxId });
          location.hash = `#/env/${encodeURIComponent(sandbox.environmentId)}`;
        } catch (error) { message.replaceChildren(notice(error.message, "error")); }
      } }, "Delete")].filter(Boolean));
  };
  async function refresh() {
    if (stopped) return;
    try {
      sandbox = await api.get("sandbox.one", { sandboxId });
      render();
    } catch (error) {
      if (error.status === 404) { stopped = true; message.replaceChildren(notice("This sandbox was deleted.")); }
    }
  }
  render();
  const consoleView = console_(sandbox);
  const usage = usagePanel(sandbox);
  const terminal = terminalPanel(sandbox);
  const processes = processesPanel(sandbox);
  const egress = egressPanel(sandbox);
  const timer = setInterval(refresh, REFRESH_MS);
  show(title, actions, message,
    h("section", { class: "panel" }, factsSlot), usage.element, consoleView.element, terminal.element,
    processes.element, portsPanel(sandbox), egress.element, filesPanel(sandbox));
  return () => {
    stopped = true;
    clearInterval(timer);
    consoleView.close();
    usage.close();
    terminal.close();
    processes.close();
    egress.close();
  };
}
