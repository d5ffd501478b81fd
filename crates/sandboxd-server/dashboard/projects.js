// Projects and their environments.

import * as api from "./api.js";
import { h, show } from "./dom.js";

export async function projectsPage() {
  const projects = await api.get("project.all");
  const list = projects.length === 0
    ? [h("p", { class: "muted" }, "No projects yet.")]
    : projects.map((project) => h("section", { class: "panel" },
      h("h2", {}, project.name),
      project.description ? h("p", { class: "muted" }, project.description) : null,
      project.environments.length === 0
        ? h("p", { class: "muted" }, "No environments.")
        : h("ul", {}, project.environments.map((env) => h("li", {},
          h("a", { href: `#/env/${encodeURIComponent(env.environmentId)}`, "data-environment": env.environmentId },
            env.name))))));
  show(h("h1", {}, "Projects"), list);
}
