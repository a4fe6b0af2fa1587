// A streamed answer drawn as markdown while it arrives, at most once per frame.
//
// Its finished blocks are rendered once each, when the block after them starts (a line
// after a blank line, not indented, outside a code fence; or after a code fence opened or
// closed at the line's start). What is left, the unfinished block, is drawn in one of
// two ways. A code fence opened at a line's start is the block's own box, whose text is
// appended as it comes: a 200 KB code block costs its deltas, never a parse. Anything
// else (a long table, a list) is rendered again, but not sooner than three times its
// last render's time after it: its renders take at most about a quarter of the main
// thread, however long the block grows. Markdown that reaches across blocks (a link whose
// reference is defined further down, a loose list) may show differently while it
// streams; ``flushMarkdown`` renders the whole text at the end, exactly.

import { el } from "./dom.js";
import { codeBox, markdown } from "./markdown.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const WAIT_FACTOR = 3;  // after a tail render of t ms, the next one waits 3t
const CHUNK = 4096;  // characters in one laid-out block of a streaming code block

/** A node showing ``text`` as markdown; ``appendMarkdown`` streams into it. */
export function markdownNode(text = "") {
  const node = el("div", { class: "text md", dir: "auto" });
  node.source = text;
  node.replaceChildren(markdown(text));
  resetLive(node);
  return node;
}

function resetLive(node) {
  node.pending = null;  // the scheduled render: { frame } or { timer }
  node.frozenChars = 0;  // the source's prefix drawn as finished blocks
  node.frozenNodes = 0;  // the children those blocks are
  node.scanned = 0;  // where the first line not yet read starts
  node.cut = 0;  // the start of the last block known to follow finished ones
  node.afterBlank = -1;  // where the line after the last blank line starts
  node.fence = null;  // the open code fence's marker ("```", "~~~~", ...)
  node.open = null;  // a fence opened at a line's start: { start, body } (its text's start)
  node.code = null;  // that fence's live box: { code, chunk, size, shown }
  node.closed = null;  // that fence once closed: { start, body, closing, end }
  node.quietUntil = 0;  // no tail render before this time (performance.now())
}

/** The fence ``line`` opens, or null (a backtick fence's info string has no backtick). */
function opening(line) {
  const fence = FENCE.exec(line);
  if (!fence || (fence[1][0] === "`" && fence[2].includes("`"))) return null;
  return fence[1];
}

function closes(line, marker) {
  const fence = FENCE.exec(line);
  return Boolean(fence) && fence[1][0] === marker[0] && fence[1].length >= marker.length
    && fence[2].trim() === "";
}

/** Read the source's newly completed lines: where the last block known to start fresh
 *  starts, and the fence left open. */
function scanBlocks(node) {
  const source = node.source;
  let start = node.scanned;
  for (let end = source.indexOf("\n", start); end >= 0; end = source.indexOf("\n", start)) {
    const line = source.slice(start, end);
    const blank = line.trim() === "";
    if (!node.fence && !blank && start === node.afterBlank && !/^[ \t]/.test(line)) {
      node.cut = start;
    }
    if (node.fence) {
      if (closes(line, node.fence)) {
        node.fence = null;
        // A fence closed at a line's start ends a top-level block: what follows is new.
        if (node.open) {
          node.cut = end + 1;
          node.afterBlank = end + 1;
          node.closed = { ...node.open, closing: start, end: end + 1 };
        }
        node.open = null;
      }
    } else {
      node.fence = opening(line);
      if (node.fence && !/^[ \t]/.test(line)) {
        // A fence at a line's start interrupts any block before it (a paragraph, a list
        // item whose text is indented): that block is finished.
        node.cut = start;
        node.open = { start, body: end + 1 };
      } else if (blank) {
        node.afterBlank = end + 1;
      }
    }
    start = end + 1;
  }
  node.scanned = start;
}

function dropTail(node) {
  while (node.childNodes.length > node.frozenNodes) node.lastChild.remove();
  node.code = null;
}

/** The open fence's text, appended to its box since the last frame. The box holds its
 *  lines in blocks of about CHUNK characters: the browser lays out only the last block
 *  again, not the whole growing code. */
function drawFence(node) {
  if (!node.code) {
    dropTail(node);
    const code = el("code");
    node.append(codeBox(el("pre", {}, code)));
    node.code = { code, chunk: null, size: 0, shown: node.open.body };
  }
  const live = node.code;
  while (live.shown < node.source.length) {
    if (!live.chunk || live.size >= CHUNK) {
      live.chunk = el("span", { class: "chunk" });
      live.chunk.from = live.shown;
      live.code.append(live.chunk);
      live.size = 0;
    }
    // A block ends at a line's end once it is full (a long line stays in one block).
    const lineEnd = node.source.indexOf("\n", live.shown + Math.max(0, CHUNK - live.size - 1));
    const end = lineEnd < 0 ? node.source.length : lineEnd + 1;
    live.chunk.append(node.source.slice(live.shown, end));
    live.size += end - live.shown;
    live.shown = end;
  }
}

/** A live fence closed: its box, cut to the text before the closing line, is a finished
 *  block as it stands (what marked would draw, without parsing the code again). */
function settleFence(node) {
  const { closing, end } = node.closed;
  const live = node.code;
  const chunks = [...live.code.children];
  while (chunks.length > 1 && chunks[chunks.length - 1].from >= closing) chunks.pop().remove();
  const last = chunks[chunks.length - 1];
  last.textContent = node.source.slice(last.from, closing);
  node.code = null;
  node.append("\n");  // as marked writes after a block
  node.frozenNodes = node.childNodes.length;
  node.frozenChars = end;
}

/** One frame of a streamed answer: blocks finished since the last frame drawn once, the
 *  tail drawn again (or appended to, an open fence). */
function renderLive(node) {
  node.pending = null;
  scanBlocks(node);
  if (node.closed && node.code && node.closed.start === node.frozenChars) settleFence(node);
  node.closed = null;
  if (node.cut > node.frozenChars) {
    dropTail(node);
    const finished = markdown(node.source.slice(node.frozenChars, node.cut));
    node.frozenNodes += finished.childNodes.length;
    node.append(finished);
    node.frozenChars = node.cut;
    node.quietUntil = 0;
  }
  if (node.open && node.open.start === node.frozenChars) {
    if (node.source.length >= node.open.body) drawFence(node);
    return;
  }
  const now = performance.now();
  if (now < node.quietUntil) {
    schedule(node, node.quietUntil - now);
    return;
  }
  dropTail(node);
  node.append(markdown(node.source.slice(node.frozenChars)));
  node.quietUntil = performance.now() + WAIT_FACTOR * (performance.now() - now);
}

function schedule(node, wait = 0) {
  if (wait > 0) {
    node.pending = { timer: setTimeout(() => schedule(node), wait) };
  } else {
    node.pending = { frame: requestAnimationFrame(() => renderLive(node)) };
  }
}

function cancel(node) {
  if (node.pending?.frame) cancelAnimationFrame(node.pending.frame);
  if (node.pending?.timer) clearTimeout(node.pending.timer);
  node.pending = null;
}

/** Append ``delta`` to a markdown node, re-rendering at most once per frame. */
export function appendMarkdown(node, delta) {
  node.source = (node.source || "") + delta;
  if (!node.pending) schedule(node);
}

/** Render the whole of what a markdown node has received, exactly (at the end of a
 *  stream, or a text run's end before a tool call). */
export function flushMarkdown(node) {
  cancel(node);
  node.replaceChildren(markdown(node.source || ""));
  resetLive(node);
}
