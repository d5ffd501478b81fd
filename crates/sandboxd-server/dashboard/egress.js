// Egress of `allowlist` sandboxes: on a sandbox's page, the hosts it may reach, the
// requests waiting for a decision (approve, deny) and the latest decisions of its proxy;
// on the requests page, every request waiting in the organization. What a request or a
// log entry says came from a sandbox: it goes in as text only (dom.js).

import * as api from "./api.js";
import { h, show, relative, when } from "./dom.js";

const REFRESH_MS = 3000;
/// Log entries shown, the latest.
const SHOWN_ENTRIES = 50;

function failure(error) {
  return (error.issues && error.issues[0] && `${error.issues[0].path}: ${error.issues[0].message}`) || error.message;
}

/// Brings the rows of `body` to `requests` (newest first) by removing the rows of
/// requests gone and adding rows for new ones (`make`): a row that stays is the same
/// element, so a button is never swapped under a pointer about to press it.
function syncRequests(body, requests, make) {
  const wanted = new Set(requests.map((r) => r.requestId));
  for (const row of [...body.children]) if (!wanted.has(row.dataset.request)) row.remove();
  const shown = new Set([...body.children].map((row) => row.dataset.request));
  const added = requests.filter((r) => !shown.has(r.requestId));
  body.prepend(...added.map(make));
}

/// A request's row, with its decision buttons; `decided` runs after a decision.
function requestRow(request, state, decided, withSandbox) {
  const decide = (approve) => async () => {
    try {
      await api.post("egress.decide", { requestId: request.requestId, approve });
      state.textContent = `${request.host} ${approve ? "approved" : "denied"}.`;
    } catch (error) {
      state.textContent = failure(error);
    }
    decided();
  };
  return h("tr", { "data-request": request.requestId },
    withSandbox ? h("td", {}, h("a", { href: `#/sandbox/${encodeURIComponent(request.sandboxId)}` }, request.sandboxId)) : null,
    h("td", {}, h("code", {}, request.host)),
    h("td", { class: "request-reason" }, request.reason || "—"),
    h("td", { class: "hide-narrow" }, relative(request.createdAt)),
    h("td", {}, h("button", { type: "button", class: "approve", onclick: decide(true) }, "Approve"),
      " ", h("button", { type: "button", class: "quiet deny", onclick: decide(false) }, "Deny")));
}

function entryRow(entry) {
  const bytes = entry.decision !== "allowed" ? "—"
    : entry.endedAt ? `${entry.bytesOut} / ${entry.bytesIn}` : "open";
  return h("tr", { "data-entry": entry.entryId, "data-decision": entry.decision },
    h("td", { class: "hide-narrow" }, when(entry.at)),
    h("td", {}, h("span", { class: `badge ${entry.decision === "allowed" ? "running" : "killed"}` }, entry.decision)),
    h("td", {}, h("code", {}, `${entry.host}:${entry.port}`)),
    h("td", {}, bytes),
    h("td", {}, entry.reason || ""));
}

/// The egress panel of an `allowlist` sandbox's page (`null` for other modes).
export function egressPanel(sandbox) {
  if (sandbox.networkMode !== "allowlist") return { element: null, close: () => {} };
  const running = sandbox.status === "running";
  const allowed = h("ul", { class: "egress-allowed" });
  const requests = h("tbody");
  const entries = h("tbody");
  const state = h("p", { class: "muted", role: "status" });
  /// The latest log entries by id (an entry is written again when its connection ends).
  const shown = new Map();
  let cursor = null;
  let stopped = false;
  let shownAllowed = null;
  async function refresh() {
    if (stopped) return;
    try {
      const [one, waiting] = await Promise.all([
        api.get("sandbox.one", { sandboxId: sandbox.sandboxId }),
        api.get("egress.requests", { sandboxId: sandbox.sandboxId }),
      ]);
      const list = (one.egress && one.egress.allow) || [];
      if (list.join(",") !== shownAllowed) {
        shownAllowed = list.join(",");
        allowed.replaceChildren(...(list.length ? list.map((entry) => h("li", { "data-allowed": entry }, h("code", {}, entry)))
          : [h("li", { class: "muted" }, "Nothing: no host is reachable.")]));
      }
      syncRequests(requests, waiting, (r) => requestRow(r, state, refresh, false));
      for (;;) {
        const query = { sandboxId: sandbox.sandboxId, limit: 500 };
        if (cursor) query.cursor = cursor;
        const page = await api.get("sandbox.egressLog", query);
        for (const entry of page.entries) {
          shown.delete(entry.entryId);
          shown.set(entry.entryId, entry);
          if (shown.size > SHOWN_ENTRIES) shown.delete(shown.keys().next().value);
        }
        cursor = page.nextCursor || cursor;
        if (!page.more) break;
      }
      entries.replaceChildren(...[...shown.values()].reverse().map(entryRow));
    } catch (error) {
      state.textContent = failure(error);
    }
  }
  refresh();
  const timer = running ? setInterval(refresh, REFRESH_MS) : null;
  const element = h("section", { class: "panel", id: "egress" }, h("h2", {}, "Egress"),
    h("p", { class: "muted" }, "The hosts this sandbox may reach through sandboxd's proxy; what it asked for; what its connections met."),
    state,
    h("h3", {}, "Allowed"), allowed,
    h("h3", {}, "Waiting for a decision"),
    h("div", { class: "table-wrap" }, h("table", { id: "egress-requests" },
      h("thead", {}, h("tr", {}, h("th", {}, "Host"), h("th", {}, "Reason"), h("th", { class: "hide-narrow" }, "Asked"), h("th", {}, ""))),
      requests)),
    h("h3", {}, "Latest connections"),
    h("div", { class: "table-wrap" }, h("table", { id: "egress-log" },
      h("thead", {}, h("tr", {}, h("th", { class: "hide-narrow" }, "Time"), h("th", {}, "Decision"),
        h("th", {}, "Host"), h("th", {}, "Bytes out / in"), h("th", {}, "Reason"))),
      entries)));
  return { element, close: () => { stopped = true; if (timer) clearInterval(timer); } };
}

/// Every egress request of the organization waiting for a decision.
export async function egressRequestsPage() {
  const body = h("tbody");
  const state = h("p", { class: "muted", role: "status" });
  let stopped = false;
  async function refresh() {
    if (stopped) return;
    try {
      const waiting = await api.get("egress.requests", {});
      syncRequests(body, waiting, (r) => requestRow(r, state, refresh, true));
      if (waiting.length === 0 && !state.textContent) state.textContent = "No request is waiting.";
    } catch (error) {
      state.textContent = failure(error);
    }
  }
  await refresh();
  const timer = setInterval(refresh, REFRESH_MS);
  show(h("h1", {}, "Egress requests"),
    h("p", { class: "muted" }, "Sandboxes asking to reach one more host. Approving adds it to the running sandbox's list at once; a request is decided with another key than the one that asked, holding egress:decide."),
    state,
    h("div", { class: "table-wrap" }, h("table", { id: "egress-requests" },
      h("thead", {}, h("tr", {}, h("th", {}, "Sandbox"), h("th", {}, "Host"), h("th", {}, "Reason"),
        h("th", { class: "hide-narrow" }, "Asked"), h("th", {}, ""))),
      body)));
  return () => { stopped = true; clearInterval(timer); };
}
