// CPU, memory and processes of a running sandbox as small charts drawn in SVG: the
// readings the server kept (`sandbox.metrics`, every 5 s) up to the page's opening, then
// live ones (`sandbox.stats`) every 2 s.

import * as api from "./api.js";
import { h } from "./dom.js";

const EVERY_MS = 2000;
const POINTS = 30;
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attributes = {}) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  return element;
}

/// One chart: a line of `values` against `max`, with its label and current figure.
function chart(name, unit) {
  const area = svg("polygon", { fill: "currentColor", "fill-opacity": 0.15, stroke: "none", points: "" });
  const line = svg("polyline", { fill: "none", stroke: "currentColor", "stroke-width": 2,
    "vector-effect": "non-scaling-stroke", points: "" });
  const drawing = svg("svg", { viewBox: `0 0 ${POINTS - 1} 40`, preserveAspectRatio: "none", class: "spark", role: "img" });
  drawing.append(area, line);
  const figure = h("span", { class: "figure", "data-usage": name }, "—");
  const element = h("div", { class: "chart" }, h("div", { class: "chart-head" }, h("span", {}, name), figure), drawing);
  return {
    element,
    draw(values, max, text) {
      const top = Math.max(max, ...values, 1e-9);
      const first = POINTS - values.length;
      const points = values.map((v, i) => `${i + first},${(40 - (v / top) * 38 - 1).toFixed(2)}`);
      // A single reading is drawn as a short level line.
      if (points.length === 1) points.unshift(`${first - 1},${points[0].split(",")[1]}`);
      line.setAttribute("points", points.join(" "));
      area.setAttribute("points", `${Math.max(first - (values.length === 1 ? 1 : 0), 0)},40 ${points.join(" ")} ${POINTS - 1},40`);
      drawing.setAttribute("aria-label", `${name}: ${text}`);
      figure.textContent = text;
      figure.dataset.value = String(values[values.length - 1] ?? 0);
      void unit;
    },
  };
}

function mib(bytes) { return `${(bytes / 1048576).toFixed(1)} MiB`; }

export function usagePanel(sandbox) {
  const cpu = chart("CPU");
  const memory = chart("Memory");
  const pids = chart("Processes");
  const state = h("p", { class: "muted", role: "status" }, sandbox.status === "running" ? "Reading…" : "Not running.");
  const readings = [];
  let stopped = sandbox.status !== "running";
  async function read() {
    if (stopped) return;
    try {
      const stats = await api.get("sandbox.stats", { sandboxId: sandbox.sandboxId });
      readings.push(stats);
      if (readings.length > POINTS) readings.shift();
      cpu.draw(readings.map((r) => r.cpuPercent), stats.cpuLimit * 100,
        `${stats.cpuPercent.toFixed(0)}% of ${stats.cpuLimit} CPU`);
      memory.draw(readings.map((r) => r.memoryBytes), stats.memoryLimitBytes,
        `${mib(stats.memoryBytes)} of ${mib(stats.memoryLimitBytes)}`);
      pids.draw(readings.map((r) => r.pids), stats.pidsLimit, `${stats.pids} of ${stats.pidsLimit}`);
      state.textContent = `Read ${new Date(stats.sampledAt).toLocaleTimeString()}`;
    } catch (error) {
      state.textContent = error.status === 412 ? "Not running." : `Could not read: ${error.message}`;
      if (error.status === 412 || error.status === 404) stopped = true;
    }
  }
  // What the server kept before the page opened comes first, then the live readings.
  let timer = null;
  (async () => {
    if (!stopped) {
      try {
        const kept = await api.get("sandbox.metrics", { sandboxId: sandbox.sandboxId });
        for (const r of kept.readings.slice(-(POINTS - 1))) readings.push({ ...r, kept: true });
        if (readings.length) state.dataset.kept = String(readings.length);
      } catch { /* the live readings still come */ }
    }
    await read();
    if (!stopped) timer = setInterval(read, EVERY_MS);
  })();
  return {
    element: h("section", { class: "panel" }, h("h2", {}, "Usage"),
      h("div", { class: "charts" }, cpu.element, memory.element, pids.element), state),
    close: () => { stopped = true; if (timer) clearInterval(timer); },
  };
}
