// An interactive terminal on the PTY WebSocket, drawn by xterm.js (vendored, loaded the
// first time a terminal opens). Keys go out as binary messages, output comes back as
// binary; resizes follow the page.

import * as api from "./api.js";
import { h } from "./dom.js";

let loading = null;

function load(src) {
  return new Promise((resolve, reject) => {
    const script = h("script", { src });
    script.addEventListener("load", resolve);
    script.addEventListener("error", () => reject(new Error(`cannot load ${src}`)));
    document.head.append(script);
  });
}

/// xterm.js and its fit addon, once.
function xterm() {
  if (!loading) {
    document.head.append(h("link", { rel: "stylesheet", href: "/ui/assets/vendor/xterm.css" }));
    loading = load("/ui/assets/vendor/xterm.js").then(() => load("/ui/assets/vendor/xterm-addon-fit.js"));
  }
  return loading;
}

export function terminalPanel(sandbox) {
  const screen = h("div", { class: "terminal", id: "terminal", "aria-label": "Terminal" });
  const state = h("p", { class: "muted", role: "status" }, "");
  const open = h("button", { type: "button", id: "open-terminal" }, "Open a terminal");
  let ws = null;
  let term = null;
  let onResize = null;
  const close = () => {
    if (ws) ws.close(1000);
    if (onResize) window.removeEventListener("resize", onResize);
    if (term) term.dispose();
    ws = null; term = null; onResize = null;
  };
  open.addEventListener("click", async () => {
    open.disabled = true;
    state.textContent = "Connecting…";
    try { await xterm(); } catch (error) { state.textContent = error.message; open.disabled = false; return; }
    close();
    // The canvas renderer needs no style sheet of its own (the policy allows none made
    // at run time); screen-reader mode keeps the screen's text in the page as well.
    term = new window.Terminal({ rendererType: "canvas", screenReaderMode: true, cursorBlink: true, fontSize: 14,
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, monospace", scrollback: 5000 });
    const fit = new window.FitAddon.FitAddon();
    term.loadAddon(fit);
    term.open(screen);
    fit.fit();
    ws = api.socket(`/sandbox-pty?sandboxId=${encodeURIComponent(sandbox.sandboxId)}&cols=${term.cols}&rows=${term.rows}`);
    ws.binaryType = "arraybuffer";
    const encoder = new TextEncoder();
    ws.addEventListener("message", (event) => {
      if (typeof event.data !== "string") { term.write(new Uint8Array(event.data)); return; }
      let message;
      try { message = JSON.parse(event.data); } catch { return; }
      if (message.type === "ready") { state.textContent = "Connected."; term.focus(); }
      else if (message.type === "exit") state.textContent = `The shell ended (exit ${message.exitCode}).`;
      else if (message.type === "error") state.textContent = message.message;
    });
    ws.addEventListener("close", (event) => {
      open.disabled = false;
      open.textContent = "Open a new terminal";
      if (event.code !== 1000 && !state.textContent.startsWith("The shell ended")) {
        state.textContent = `Disconnected${event.reason ? `: ${event.reason}` : ""}.`;
      }
    });
    term.onData((data) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(data)); });
    term.onResize(({ cols, rows }) => {
      if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols, rows }));
    });
    onResize = () => fit.fit();
    window.addEventListener("resize", onResize);
  });
  if (sandbox.status !== "running") open.disabled = true;
  return {
    element: h("section", { class: "panel" }, h("h2", {}, "Terminal"),
      h("div", { class: "actions" }, open, state), screen),
    close,
  };
}
