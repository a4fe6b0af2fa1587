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

/** A node showing ``text`` as markdown; ``appendMarkdown`` streams into it. */
export function markdownNode(text = "") {
  const node = el("div", { class: "text md", dir: "auto" });
  node.source = text;
  node.replaceChildren(markdown(text));
  resetLive(node);
  return node;
}

// A streamed answer is drawn in two parts: its finished blocks, each rendered once when
// the block after it starts (a line after a blank line, not indented, outside a code
// fence), and the unfinished tail, rendered again each frame. A frame then costs the
// text since the last blank line, not the whole answer (a 200 KB answer re-parsed every
// frame took longer than a frame). Markdown that reaches across blocks (a link whose
// reference is defined further down, a loose list) may show differently while it
// streams; ``flushMarkdown`` renders the whole text at the end, exactly.

const FENCE = /^ {0,3}(`{3,}|~{3,})/;

function resetLive(node) {
  node.pending = 0;
  node.frozenChars = 0;  // the source's prefix drawn as finished blocks
  node.frozenNodes = 0;  // the children those blocks are
  node.scanned = 0;  // where the first line not yet read starts
  node.cut = 0;  // the start of the last block known to follow finished ones
  node.afterBlank = -1;  // where the line after the last blank line starts
  node.fence = null;  // the open code fence's marker ("```", "~~~~", ...)
}

/** Read the source's newly completed lines: where the last block outside a fence starts. */
function scanBlocks(node) {
  const source = node.source;
  let start = node.scanned;
  for (let end = source.indexOf("\n", start); end >= 0; end = source.indexOf("\n", start)) {
    const line = source.slice(start, end);
    const blank = line.trim() === "";
    if (!node.fence && !blank && start === node.afterBlank && !/^[ \t]/.test(line)) {
      node.cut = start;
    }
    const fence = FENCE.exec(line);
    if (node.fence) {
      const closing = fence && fence[1][0] === node.fence[0]
        && fence[1].length >= node.fence.length && line.trim() === fence[1];
      if (closing) node.fence = null;
    } else if (fence) {
      node.fence = fence[1];
    } else if (blank) {
      node.afterBlank = end + 1;
    }
    start = end + 1;
  }
  node.scanned = start;
}

/** One frame of a streamed answer: blocks finished since the last frame drawn once, the
 *  tail drawn again. */
function renderLive(node) {
  node.pending = 0;
  scanBlocks(node);
  while (node.childNodes.length > node.frozenNodes) node.lastChild.remove();
  if (node.cut > node.frozenChars) {
    const finished = markdown(node.source.slice(node.frozenChars, node.cut));
    node.frozenNodes += finished.childNodes.length;
    node.append(finished);
    node.frozenChars = node.cut;
  }
  node.append(markdown(node.source.slice(node.frozenChars)));
}

/** Append ``delta`` to a markdown node, re-rendering at most once per frame. */
export function appendMarkdown(node, delta) {
  node.source = (node.source || "") + delta;
  if (node.pending) return;
  node.pending = requestAnimationFrame(() => renderLive(node));
}

/** Render the whole of what a markdown node has received, exactly (at the end of a
 *  stream, or a text run's end before a tool call). */
export function flushMarkdown(node) {
  if (node.pending) cancelAnimationFrame(node.pending);
  node.replaceChildren(markdown(node.source || ""));
  resetLive(node);
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
