// Templates users build: each template with its versions (newest first), a build form
// with a Dockerfile editor and the files COPY reads, and a build's log as it is written
// (server-sent events), with a line per step; a version's log read back; a template
// removed behind a confirmation (refused while a sandbox uses it). Every line of a log
// is text: what a build prints is the build's, never markup.

import * as api from "./api.js";
import { h, show, notice, when, confirmAction } from "./dom.js";

const EXAMPLE = "FROM base\nRUN echo \"hello from the build\"\nWORKDIR /home/user/app\n";

/// A file's content as base64 (what `files` takes).
function base64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

/// The log panel: a line per entry, a progress line per step, the outcome.
function logPanel() {
  const progress = h("p", { id: "build-progress", role: "status" });
  const lines = h("pre", { id: "build-log", class: "console", tabindex: "0", "aria-label": "Build log" });
  const outcome = h("div", { id: "build-outcome", role: "status" });
  const panel = h("section", { class: "panel", "aria-labelledby": "build-log-title" },
    h("h2", { id: "build-log-title" }, "Build log"), progress, lines, outcome);
  const add = (entry) => {
    const step = entry.stream === "system" && /^Step \d+\/\d+ : /.test(entry.line);
    if (step) progress.textContent = entry.line;
    const text = entry.step > 0 ? `[${entry.step}] ${entry.line}` : entry.line;
    const kind = entry.stream === "stderr" ? "stderr" : entry.stream === "system" ? "note" : "";
    lines.append(h("span", { class: kind, "data-step": entry.step }, text), "\n");
    lines.scrollTop = lines.scrollHeight;
  };
  const end = (status, error) => {
    outcome.replaceChildren(status === "ready"
      ? notice("The template is ready: new sandboxes can be made of it.", "ok")
      : notice(error ? `The build failed at step ${error.step}: ${error.message}` : `The build ended: ${status}`, "error"));
    outcome.dataset.status = status;
  };
  return { panel, add, end, clear: () => { lines.replaceChildren(); progress.textContent = ""; outcome.replaceChildren(); delete outcome.dataset.status; } };
}

/// Follows a build's log as it is written; returns a function that stops following.
function follow(buildId, log, onEnd) {
  const source = new EventSource(`/api/template.buildLogStream?buildId=${encodeURIComponent(buildId)}`);
  source.addEventListener("entry", (event) => log.add(JSON.parse(event.data)));
  source.addEventListener("end", (event) => {
    source.close();
    const end = JSON.parse(event.data);
    log.end(end.status, end.error);
    onEnd();
  });
  source.onerror = () => {
    // The stream ends after its `end` event; an error before it is the connection's.
    if (source.readyState === EventSource.CLOSED) log.end("unknown", { step: 0, message: "the log stream was cut; reload the page to read it" });
  };
  return () => source.close();
}

/// A version's whole log, read back page by page.
async function readLog(buildId, log) {
  log.clear();
  let offset = 0;
  for (;;) {
    const page = await api.get("template.buildLog", { buildId, offset });
    page.entries.forEach(log.add);
    offset = page.nextOffset;
    if (page.status !== "building" && page.entries.length === 0) {
      log.end(page.status, page.error);
      return;
    }
    if (page.status === "building" && page.entries.length === 0) return;
  }
}

export async function templatesPage() {
  let stop = () => {};
  const [templates, projects] = await Promise.all([api.get("template.all"), api.get("project.all")]);
  const message = h("div", { role: "status" });
  const list = h("div", { id: "templates" });
  const log = logPanel();
  const projectName = (id) => (projects.find((p) => p.projectId === id) || {}).name || id;
  const versionRows = (template) => template.versions.map((version) => h("li", { "data-version": version.version },
    `v${version.version} · `,
    h("span", { "data-status": version.status }, version.status),
    ` · ${when(version.createdAt)} `,
    h("button", { type: "button", class: "quiet", "data-log": version.buildId, onclick: async () => {
      stop();
      stop = () => {};
      try {
        if (version.status === "building") stop = follow(version.buildId, log, () => {});
        else await readLog(version.buildId, log);
        log.panel.scrollIntoView();
      } catch (error) { message.replaceChildren(notice(error.message, "error")); }
    } }, "Log")));
  const row = (template) => h("tr", { "data-template": template.name },
    h("td", {}, template.name, h("br"), h("code", { class: "muted" }, template.templateId)),
    h("td", { class: "hide-narrow" }, projectName(template.projectId)),
    h("td", {}, template.version === null ? "none ready" : `v${template.version}`),
    h("td", { class: "hide-narrow" }, template.workdir || "—", template.user ? ` as ${template.user}` : ""),
    h("td", {}, h("details", {}, h("summary", {}, `${template.versions.length} version${template.versions.length === 1 ? "" : "s"}`),
      h("ul", { class: "plain" }, versionRows(template)))),
    h("td", {},
      h("button", { type: "button", class: "danger", "data-remove": "", onclick: async () => {
        if (!(await confirmAction(`Remove the template ${template.name} and every version of it?`, "Remove"))) return;
        try {
          await api.post("template.remove", { templateId: template.templateId });
          await refresh();
        } catch (error) { message.replaceChildren(notice(error.message, "error")); }
      } }, "Remove")));
  /// The list, as the server has it now.
  const render = (all) => list.replaceChildren(all.length === 0
    ? h("p", { class: "muted", role: "status" }, "No templates built yet.")
    : h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Template"), h("th", { class: "hide-narrow" }, "Project"), h("th", {}, "In use"),
        h("th", { class: "hide-narrow" }, "Workdir"), h("th", {}, "Versions"), h("th", {}, ""))),
      h("tbody", {}, all.map(row)))));
  const refresh = async () => render(await api.get("template.all"));
  render(templates);

  const name = h("input", { id: "t-name", placeholder: "my-python", autocomplete: "off", required: true, spellcheck: "false" });
  const dockerfile = h("textarea", { id: "t-dockerfile", class: "code", rows: "12", spellcheck: "false", required: true,
    "aria-describedby": "t-dockerfile-help",
    // Tab indents rather than leaving the editor (Escape, then Tab, leaves it).
    onkeydown: (event) => {
      if (event.key !== "Tab" || event.shiftKey || dockerfile.dataset.escaped) return;
      event.preventDefault();
      dockerfile.setRangeText("  ", dockerfile.selectionStart, dockerfile.selectionEnd, "end");
    },
    onkeyup: (event) => {
      if (event.key === "Escape") dockerfile.dataset.escaped = "1";
    },
    onfocus: () => { delete dockerfile.dataset.escaped; },
  });
  dockerfile.value = EXAMPLE;
  const files = h("input", { id: "t-files", type: "file", multiple: true });
  const network = h("select", { id: "t-network" },
    h("option", { value: "isolated" }, "isolated (no network)"),
    h("option", { value: "internet" }, "internet"));
  const project = h("select", { id: "t-project" },
    projects.map((p) => h("option", { value: p.projectId }, p.name)));
  const made = h("div", { role: "status" });
  const submit = h("button", { type: "submit" }, "Build");
  const form = h("form", { class: "panel", id: "new-template", onsubmit: async (event) => {
    event.preventDefault();
    made.replaceChildren();
    submit.disabled = true;
    try {
      const given = {};
      for (const file of files.files) {
        // A folder's files keep their path in it; single files are at the top.
        given[file.webkitRelativePath || file.name] = await base64(file);
      }
      const started = await api.post("template.build", {
        name: name.value.trim(),
        dockerfile: dockerfile.value,
        files: Object.keys(given).length ? given : undefined,
        networkMode: network.value,
        projectId: project.value || undefined,
      });
      made.replaceChildren(notice(`Building ${name.value.trim()} v${started.version}…`));
      stop();
      log.clear();
      await refresh();
      stop = follow(started.buildId, log, async () => {
        submit.disabled = false;
        try { await refresh(); } catch (error) { message.replaceChildren(notice(error.message, "error")); }
        const ended = log.panel.querySelector("#build-outcome").dataset.status;
        if (ended === "ready") made.replaceChildren(notice(`${name.value.trim()} v${started.version} is ready.`, "ok"));
      });
      log.panel.scrollIntoView();
    } catch (error) {
      submit.disabled = false;
      const issue = error.issues && error.issues[0];
      made.replaceChildren(notice(issue ? `${issue.path}: ${issue.message}` : error.message, "error"));
    }
  } },
  h("h2", {}, "Build a template"),
  h("div", { class: "grid" },
    h("div", { class: "field" }, h("label", { for: "t-name" }, "Name"), name),
    h("div", { class: "field" }, h("label", { for: "t-network" }, "Network of RUN steps"), network),
    projects.length > 1 ? h("div", { class: "field" }, h("label", { for: "t-project" }, "Project"), project) : null),
  h("div", { class: "field" }, h("label", { for: "t-dockerfile" }, "Dockerfile"), dockerfile,
    h("p", { id: "t-dockerfile-help", class: "muted" },
      "FROM a configured template, one of your templates or an allowed image; RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, CMD, ENTRYPOINT, LABEL. Tab indents; Escape then Tab leaves the editor.")),
  h("div", { class: "field" }, h("label", { for: "t-files" }, "Files COPY and ADD read (optional)"), files),
  made,
  submit);

  show(h("h1", {}, "Templates"),
    h("p", { class: "muted" }, "A template is an environment you describe in a Dockerfile: each build makes a new version, and new sandboxes of the template use the newest ready one. Unchanged steps come from the cache."),
    message,
    list,
    form,
    log.panel);
  return () => stop();
}
