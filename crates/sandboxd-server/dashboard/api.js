// The API as the dashboard uses it: same-origin requests carrying the session cookie,
// the CSRF token on every mutation, errors as `ApiError` with the server's issues.

let csrf = null;

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `request failed (${status})`);
    this.status = status;
    this.code = body && body.code;
    this.issues = (body && body.issues) || [];
  }
}

async function answer(response) {
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = null; }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

/// An API call whose session is gone (key revoked, session ended) tells the app.
async function answerSigned(response) {
  try {
    return await answer(response);
  } catch (error) {
    if (error.status === 401) window.dispatchEvent(new Event("sandboxd:signed-out"));
    throw error;
  }
}

/// Signs in with an API key; the key goes to the server once and is not kept here.
export async function signIn(key) {
  const body = await answer(await fetch("/ui/session", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ key }),
    credentials: "same-origin",
  }));
  csrf = body.csrf;
  return body;
}

/// The current session, or null when signed out.
export async function session() {
  try {
    const body = await answer(await fetch("/ui/session", { credentials: "same-origin" }));
    csrf = body.csrf;
    return body;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

export async function signOut() {
  await answer(await fetch("/ui/session", {
    method: "DELETE",
    headers: { "x-sandboxd-csrf": csrf || "" },
    credentials: "same-origin",
  }));
  csrf = null;
}

/// GET /api/<procedure>?query
export async function get(procedure, query = {}) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null) params.set(name, value);
  }
  const suffix = params.toString() ? `?${params}` : "";
  return answerSigned(await fetch(`/api/${procedure}${suffix}`, { credentials: "same-origin" }));
}

/// POST /api/<procedure> with a JSON body.
export async function post(procedure, body) {
  return answerSigned(await fetch(`/api/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-sandboxd-csrf": csrf || "" },
    body: JSON.stringify(body),
    credentials: "same-origin",
  }));
}

/// A WebSocket on this server (the cookie goes with it).
export function socket(path) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return new WebSocket(`${scheme}//${location.host}${path}`);
}

/// Streams `file` to `path` in the sandbox (`sandbox.upload`; the browser sends its length).
export async function upload(sandboxId, path, file) {
  const query = new URLSearchParams({ sandboxId, path });
  return answerSigned(await fetch(`/api/sandbox.upload?${query}`, {
    method: "POST",
    headers: { "content-type": "application/octet-stream", "x-sandboxd-csrf": csrf || "" },
    body: file,
    credentials: "same-origin",
  }));
}
