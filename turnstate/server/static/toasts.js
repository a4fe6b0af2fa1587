// Notifications.

import { $, el } from "./dom.js";

export function toast(title, text, kind = "") {
  const node = el("div", { class: `toast ${kind}` }, el("strong", {}, title), text);
  $("toasts").append(node);
  setTimeout(() => node.remove(), 9000);
}
