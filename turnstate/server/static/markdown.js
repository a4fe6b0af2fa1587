// Answers as markdown: marked renders, DOMPurify sanitizes (both vendored, see vendor/).
// The sanitized result is a DOM fragment, never an HTML string set on the page; links
// open in a new tab without a referrer; code blocks get a Copy button. A streamed answer
// is drawn by livemd.js.

import { el } from "./dom.js";
import { announce } from "./toasts.js";
import { marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.js";

// Nothing an answer carries loads, runs, hides or relabels anything: no media elements
// (the policy would block their loads; an embedder may loosen it), no legacy loader
// attributes, no hidden text, no ARIA (an aria-label reads a link as another address to a
// screen reader) and no data attributes.
const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img", "svg", "math",
                "video", "audio", "picture", "source", "track", "area", "map", "template"],
  FORBID_ATTR: ["style", "class", "id", "background", "poster", "srcset", "hidden", "popover"],
  ALLOW_ARIA_ATTR: false,
  ALLOW_DATA_ATTR: false,
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
  for (const pre of fragment.querySelectorAll("pre")) pre.replaceWith(codeBox(pre.cloneNode(true)));
  // A wide table scrolls in its own box, never the page (a phone's 390 px).
  for (const table of fragment.querySelectorAll("table")) {
    const box = el("div", { class: "table" });
    table.before(box);
    box.append(table);
  }
  return fragment;
}

/** ``pre`` in the box a code block is shown in: left to right, with a Copy button that
 *  copies what ``pre`` holds when clicked (a streaming block's text so far). */
export function codeBox(pre) {
  pre.setAttribute("dir", "ltr");
  const copy = el("button", { class: "copy", type: "button", title: "Copy the code" }, "Copy");
  copy.addEventListener("click", () => copyText(pre.textContent, copy));
  return el("div", { class: "code" }, copy, pre);
}

/** Copy ``text`` (``what`` it is: "Code", "Answer"); ``button`` says whether it worked,
 *  and so does the status region, for a screen reader (a button's new text is not read). */
export async function copyText(text, button, what = "Code") {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
    announce(`${what} copied`);
  } catch {
    button.textContent = "Select and copy";
    announce(`${what} not copied: the browser refused; select it and copy`);
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}
