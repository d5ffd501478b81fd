// Building the page from data without ever parsing it as HTML: every text goes in as a
// text node, so names, outputs and messages from sandboxes cannot inject markup.

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (value === true) {
      element.setAttribute(name, "");
    } else {
      element.setAttribute(name, String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/// Replaces what `main` shows.
export function show(...children) {
  const main = document.getElementById("app");
  main.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return main;
}

export function notice(text, kind = "") {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

/// "in 4 min", "3 h ago": a time relative to now.
export function relative(iso) {
  if (!iso) return "—";
  const seconds = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  const abs = Math.abs(seconds);
  if (abs < 5) return "just now";
  const [n, unit] = abs < 60 ? [abs, "s"] : abs < 3600 ? [Math.round(abs / 60), "min"]
    : abs < 86400 ? [Math.round(abs / 3600), "h"] : [Math.round(abs / 86400), "d"];
  return seconds >= 0 ? `in ${n} ${unit}` : `${n} ${unit} ago`;
}

export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "—";
}

/// Asks before a destructive action; resolves to whether the person confirmed.
export function confirmAction(message, action) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { "aria-label": message },
      h("p", {}, message),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "quiet", onclick: () => { dialog.close(); resolve(false); } }, "Cancel"),
        h("button", { type: "button", class: "danger", "data-confirm": "", onclick: () => { dialog.close(); resolve(true); } }, action)));
    dialog.addEventListener("close", () => { dialog.remove(); resolve(false); });
    document.body.append(dialog);
    dialog.showModal();
  });
}
