// A streamed answer drawn as markdown while it arrives, at most once per frame.
//
// Its finished blocks are rendered once each, when the block after them starts (a line
// after a blank line, not indented, outside a code fence; or after a code fence opened or
// closed at the line's start). What is left, the unfinished block, is drawn in one of
// three ways. A code fence opened at a line's start is the block's own box, whose text is
// appended as it comes: a 200 KB code block costs its deltas, never a parse. A table
// (a header line and its delimiter row at the block's start) gets its rows added as they
// complete, each rendered once under the table's head (livetable.js). Anything else (a
// list, a paragraph) is rendered again, but not sooner than three times its last
// render's time after it, and once it is longer than SOFT characters, what it holds up to
// its last line at the margin is drawn once, as a part the rest joins (a list's items go
// into one list): no frame renders more than about SOFT characters and what arrived,
// however long the block grows. Markdown that reaches across blocks or parts (a link whose
// reference is defined further down, a loose list, emphasis over a cut) may show
// differently while it streams; ``flushMarkdown`` renders the whole text at the end,
// exactly.

import { el } from "./dom.js";
import { codeBox, markdown } from "./markdown.js";
import { cuttable, delimiterRow, dropMoved, growTable, markPart, startTable } from "./livetable.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const WAIT_FACTOR = 3;  // after a tail render of t ms, the next one waits 3t
const CHUNK = 4096;  // characters in one laid-out block of a streaming code block
const SOFT = 8192;  // an unfinished block longer than this is drawn in parts
const MAX_WAIT = 1000;  // ms: the longest wait between two renders of a block

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
  node.rows = null;  // the table at frozenChars drawn row by row: { head, from, table, body }
  node.tableChecked = -1;  // the block start last checked for a table's head
  node.softs = [];  // the line starts a long block may be cut at
  node.softTail = null;  // the element the block's last part ended with (the next goes on)
  node.moved = [];  // nodes shown in finished elements until the next frame
  node.lastLine = -1;  // where the last complete line read starts (a table's header?)
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
    if (!node.fence && node.lastLine >= 0 && delimiterRow(line)
        && source.slice(node.lastLine, start).includes("|")) {
      // A table interrupts the paragraph before it: its header line starts a block.
      node.cut = Math.max(node.cut, node.lastLine);
    } else if (!node.fence && cuttable(line)) {
      node.softs.push(start);
    }
    node.lastLine = node.fence || blank || /^[ \t]/.test(line) ? -1 : start;
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
  dropMoved(node);
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
  if (node.rows) {
    const now = performance.now();
    if (now < node.quietUntil) {
      schedule(node, node.quietUntil - now);  // or sooner, when more text comes
      return;
    }
    const behind = growTable(node);  // may end the table: then what follows it is drawn below
    if (node.rows) {
      rest(node, now);
      if (behind) schedule(node, node.quietUntil - performance.now());
      return;
    }
  }
  if (node.cut > node.frozenChars) {
    dropTail(node);
    freeze(node, node.cut);
    node.softTail = null;
    node.quietUntil = 0;
  }
  if (node.open && node.open.start === node.frozenChars) {
    if (node.source.length >= node.open.body) drawFence(node);
    return;
  }
  const head = startTable(node);
  if (head) {
    dropTail(node);
    node.softTail = null;
    node.append(head);
    node.frozenNodes = node.childNodes.length;
    if (growTable(node)) schedule(node);
    if (node.rows) return;
  }
  const now = performance.now();
  if (now < node.quietUntil) {
    schedule(node, node.quietUntil - now);  // or sooner, when more text comes
    return;
  }
  if (node.source.length - node.frozenChars > SOFT && softCut(node)
      && node.source.length - node.frozenChars > SOFT) {
    // Still behind (the stream outran the renders): the next part at the next render. (A
    // block that cannot be cut is drawn whole again, as it was before it grew long.)
    rest(node, now);
    schedule(node, node.quietUntil - performance.now());
    return;
  }
  dropTail(node);
  const tail = markdown(node.source.slice(node.frozenChars));
  markPart(node.softTail, tail);
  node.append(tail);
  rest(node, now);
}

/** After a render that began at ``began``: the next waits three times what it took, laid
 *  out (the layout is done here, and timed, rather than after the frame), so renders take
 *  at most about a quarter of the main thread; and at most MAX_WAIT ms, so what one render
 *  takes in is what a second of the stream brings (a few hundred characters from a real
 *  model), whatever the answer's size. */
function rest(node, began) {
  void node.offsetHeight;
  const took = performance.now() - began;
  node.quietUntil = performance.now() + Math.min(MAX_WAIT, WAIT_FACTOR * took);
}

/** Draw the source from frozenChars to ``end`` once, as finished, going on from the part of
 *  its block drawn before it (if any). */
function freeze(node, end) {
  const part = markdown(node.source.slice(node.frozenChars, end));
  markPart(node.softTail, part);
  node.append(part);
  node.frozenNodes = node.childNodes.length;
  node.frozenChars = end;
}

/** A long unfinished block: its next SOFT characters or so, up to a line at the margin
 *  (or, one long line, up to a space), are drawn once, a part the rest goes on from; true
 *  if cut. (A block whose later lines are all indented, one long list item, is not.) */
function softCut(node) {
  const from = node.frozenChars;
  const softs = node.softs;
  while (softs.length && softs[0] <= from) softs.shift();
  let at = -1;
  for (const start of softs) {
    if (start - from > SOFT && at > 0) break;
    at = start;
  }
  if (at < 0) {
    if (node.source.indexOf("\n", from) >= 0) return false;
    at = node.source.lastIndexOf(" ", from + SOFT);
    if (at <= from) at = node.source.indexOf(" ", from + 1);
    if (at <= from) return false;
  }
  dropTail(node);
  freeze(node, at);
  node.softTail = node.lastElementChild || node.softTail;
  return true;
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
  // Text arriving while the tail waits is still read in the next frame (a table's rows,
  // a long block's parts, a code block's lines): only the tail's render waits.
  if (node.pending?.timer) cancel(node);
  if (!node.pending) schedule(node);
}

/** Render the whole of what a markdown node has received, exactly (at the end of a
 *  stream, or a text run's end before a tool call). */
export function flushMarkdown(node) {
  cancel(node);
  node.replaceChildren(markdown(node.source || ""));
  resetLive(node);
}
