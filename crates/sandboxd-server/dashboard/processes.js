// A sandbox's background processes, refreshed, with the output of the one chosen.

import * as api from "./api.js";
import { h, relative } from "./dom.js";

const EVERY_MS = 2000;
/// The output shown of a process: its last part.
const TAIL = 64 * 1024;

export function processesPanel(sandbox) {
  const body = h("tbody");
  const state = h("p", { class: "muted", role: "status" });
  const output = h("div", { class: "console", id: "process-output", role: "log", "aria-label": "Process output", tabindex: "0", hidden: true });
  let chosen = null;
  let stopped = sandbox.status !== "running";
  async function showOutput() {
    if (!chosen) return;
    try {
      const [out, err] = await Promise.all(["stdout", "stderr"].map((stream) =>
        api.get("sandbox.processOutput", { sandboxId: sandbox.sandboxId, processId: chosen, stream })));
      const tail = (text) => text.length > TAIL ? text.slice(-TAIL) : text;
      output.replaceChildren(h("span", {}, tail(out.data)), h("span", { class: "stderr" }, tail(err.data)));
      output.hidden = false;
    } catch (error) {
      output.replaceChildren(h("span", { class: "note" }, error.message));
    }
  }
  async function refresh() {
    if (stopped) return;
    try {
      const processes = await api.get("sandbox.processList", { sandboxId: sandbox.sandboxId });
      body.replaceChildren(...processes.map((p) => h("tr", { "data-process": p.processId },
        h("td", {}, h("code", {}, p.cmd)),
        h("td", {}, p.status === "exited" ? `exited (${p.exitCode})` : "running"),
        h("td", { class: "hide-narrow" }, relative(p.startedAt)),
        h("td", {}, h("button", { type: "button", class: "quiet", onclick: () => { chosen = p.processId; showOutput(); } }, "Output")))));
      state.textContent = processes.length === 0 ? "No background processes." : "";
      await showOutput();
    } catch (error) {
      state.textContent = error.status === 412 ? "Not running." : error.message;
      if (error.status === 412 || error.status === 404) stopped = true;
    }
  }
  refresh();
  const timer = setInterval(refresh, EVERY_MS);
  return {
    element: h("section", { class: "panel" }, h("h2", {}, "Background processes"), state,
      h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, h("th", {}, "Command"), h("th", {}, "Status"),
          h("th", { class: "hide-narrow" }, "Started"), h("th", {}, ""))), body)),
      output),
    close: () => { stopped = true; clearInterval(timer); },
  };
}
