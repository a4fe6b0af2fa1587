// Notifications: shown at the top of the chat, never over the composer's controls. A
// repeat of the one already shown adds a count instead of stacking; Escape (or a click
// on ×) dismisses them; each fades after a while, at most four at once.

import { $, el } from "./dom.js";

const SHOWN_MS = 7000;
const MAX_SHOWN = 4;

export function toast(title, text, kind = "") {
  const key = `${kind}|${title}|${text}`;
  const same = [...$("toasts").children].find((node) => node.dataset.key === key);
  if (same) {
    const count = Number(same.dataset.count || 1) + 1;
    same.dataset.count = String(count);
    same.querySelector(".count").textContent = `×${count}`;
    arm(same);
    return;
  }
  const node = el("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status",
    "data-key": key },
    el("button", { class: "dismiss", type: "button", "aria-label": "Dismiss",
      onclick: () => node.remove() }, "×"),
    el("strong", {}, title, el("span", { class: "count" })), text);
  $("toasts").append(node);
  while ($("toasts").children.length > MAX_SHOWN) $("toasts").firstElementChild.remove();
  arm(node);
}

function arm(node) {
  clearTimeout(Number(node.dataset.timer || 0));
  node.dataset.timer = String(setTimeout(() => node.remove(), SHOWN_MS));
}

/** Dismisses every notification; true when there was one. */
export function dismissToasts() {
  const any = $("toasts").children.length > 0;
  $("toasts").replaceChildren();
  return any;
}

const ANNOUNCED_CHARS = 1000;  // a screen reader reads this much of an answer; the rest is there to read

/** Say ``text`` once to a screen reader (the message list is no live region). */
export function announce(text) {
  const clean = text.replace(/\s+/g, " ").trim();
  const cut = clean.length > ANNOUNCED_CHARS ? `${clean.slice(0, ANNOUNCED_CHARS)}… (the answer goes on)` : clean;
  $("announce").textContent = cut;
}
