// Answers as markdown: marked renders, DOMPurify sanitizes (both vendored, see vendor/).
// The sanitized result is a DOM fragment, never an HTML string set on the page; links
// open in a new tab without a referrer; code blocks get a Copy button.

import { el } from "./dom.js";
import { marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.js";

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img", "svg", "math"],
  FORBID_ATTR: ["style", "class", "id"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
};

/** A fragment of sanitized nodes for ``text`` read as markdown. */
export function markdown(text) {
  const html = marked.parse(text, { gfm: true, breaks: true, async: false });
  const fragment = DOMPurify.sanitize(html, PURIFY);
  for (const link of fragment.querySelectorAll("a[href]")) {
    link.setAttribute("target", "_blank");
    link.setAttribute("rel", "noopener noreferrer nofollow");
  }
  // Each block takes the direction of its own first letter (an Arabic or Hebrew paragraph
  // right to left beside English ones); code stays left to right.
  for (const block of fragment.querySelectorAll("p, li, h1, h2, h3, h4, h5, h6, blockquote, th, td")) {
    if (!block.hasAttribute("dir")) block.setAttribute("dir", "auto");
  }
  for (const pre of fragment.querySelectorAll("pre")) {
    pre.setAttribute("dir", "ltr");
    const copy = el("button", { class: "copy", type: "button", title: "Copy the code" }, "Copy");
    copy.addEventListener("click", () => copyText(pre.textContent, copy));
    pre.replaceWith(el("div", { class: "code" }, copy, pre.cloneNode(true)));
  }
  return fragment;
}

/** A node showing ``text`` as markdown; ``update`` re-renders it (streaming). */
export function markdownNode(text = "") {
  const node = el("div", { class: "text md", dir: "auto" });
  node.source = text;
  node.replaceChildren(markdown(text));
  return node;
}

/** Append ``delta`` to a markdown node, re-rendering at most once per frame. */
export function appendMarkdown(node, delta) {
  node.source = (node.source || "") + delta;
  if (node.pending) return;
  node.pending = requestAnimationFrame(() => flushMarkdown(node));
}

/** Render whatever a markdown node has received (at the end of a stream). */
export function flushMarkdown(node) {
  if (node.pending) cancelAnimationFrame(node.pending);
  node.pending = 0;
  node.replaceChildren(markdown(node.source || ""));
}

/** Copy ``text``; ``button`` says whether it worked. */
export async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Select and copy";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}
