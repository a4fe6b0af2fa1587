// The parts of a streamed block that livemd.js draws by adding to what is shown: a
// table's rows, and the pieces of any other long block (a list, a quote, a paragraph).
// Each frame renders only what arrived since the last one, so a frame's cost does not
// grow with the block.

import { el } from "./dom.js";
import { markdown } from "./markdown.js";

// A table's delimiter row (marked's rule: a pipe or a colon in it), and a line that
// underlines a heading (never a place to cut a block).
const DELIMITER = /^ {0,3}\|?(?: *:?-+:? *\|)*(?: *:?-+:? *)\|? *$/;
const UNDERLINE = /^ {0,3}(?:=+|-+) *$/;
const PART_ROWS = 100;  // rows in one laid-out table of a streaming table

/** Whether ``line`` (after a line holding a pipe) makes that line a table's header. */
export function delimiterRow(line) {
  return DELIMITER.test(line) && /[|:]/.test(line);
}

/** Whether a block may be cut before ``line`` when it grows long: a line that starts at
 *  the margin, neither blank nor a heading's underline. */
export function cuttable(line) {
  return /^[^ \t]/.test(line) && !UNDERLINE.test(line);
}

/** Remove what was shown only until the next frame (nodes moved into finished ones). */
export function dropMoved(node) {
  for (const moved of node.moved) moved.remove();
  node.moved = [];
}

/** The rows ``text`` (whole lines) renders to under the table's head, or null when they
 *  are not one row a line (a blank line, a heading, a list: the table ended there). */
function rowsOf(rows, text) {
  const lines = text.split("\n");
  if (text.endsWith("\n")) lines.pop();
  if (lines.some((line) => line.trim() === "")) return null;
  const fragment = markdown(rows.head + text);
  const body = fragment.firstChild?.firstChild?.querySelector?.(":scope > tbody");
  if (fragment.children.length !== 1 || !body || body.children.length !== lines.length) return null;
  return body;
}

/** A new table for the next rows, under the last: its columns as wide as the first's
 *  (measured once), laid out on its own (``table-layout: fixed``). */
function newPart(rows) {
  if (!rows.widths) {
    const first = rows.table.rows[0];
    rows.widths = [...first.cells].map((cell) => cell.getBoundingClientRect().width);
    rows.width = rows.table.getBoundingClientRect().width;
  }
  const columns = rows.widths.map((width) => {
    const column = el("col");
    column.style.width = `${width}px`;
    return column;
  });
  const body = el("tbody");
  const table = el("table", { class: "part" }, el("colgroup", {}, ...columns), body);
  table.style.width = `${rows.width}px`;
  rows.table.after(table);
  Object.assign(rows, { table, body, count: 0 });
}

/** Rows added to the table shown (``moved``: for this frame only). A streamed table is
 *  shown as tables of PART_ROWS rows each, one under the other: the browser lays out a
 *  whole table again when a row is added (~80 ms at 2,400 rows), a part of it only. */
function attach(rows, body, moved) {
  if (!rows.body) {
    // The first rows: their body is the table's (marked's, whitespace and all).
    const empty = el("tbody");
    rows.table.append(empty);
    if (moved) moved.push(empty);
    else rows.body = empty;
    attachTo(rows, empty, body, moved);
    return;
  }
  attachTo(rows, rows.body, body, moved);
}

function attachTo(rows, target, body, moved) {
  const nodes = [...body.childNodes];
  let at = 0;
  while (at < nodes.length) {
    if (!moved && rows.count >= PART_ROWS) {
      newPart(rows);
      target = rows.body;
    }
    // Up to the part's last row, and the text after it.
    let end = at;
    let count = 0;
    while (end < nodes.length && (moved || rows.count + count < PART_ROWS || nodes[end].nodeType !== Node.ELEMENT_NODE)) {
      if (nodes[end].nodeType === Node.ELEMENT_NODE) count += 1;
      end += 1;
    }
    target.append(...nodes.slice(at, end));
    if (moved) moved.push(...nodes.slice(at, end));
    else rows.count += count;
    at = end;
  }
}

/** The head of a table to draw row by row, when the block at ``node.frozenChars`` starts
 *  with one (a header line and its delimiter row): the caller shows it; else null. */
export function startTable(node) {
  const source = node.source;
  const at = node.frozenChars;
  if (node.tableChecked === at) return null;
  const one = source.indexOf("\n", at);
  const two = one < 0 ? -1 : source.indexOf("\n", one + 1);
  if (two < 0) return null;
  node.tableChecked = at;
  if (!source.slice(at, one).includes("|") || !delimiterRow(source.slice(one + 1, two))) return null;
  const head = source.slice(at, two + 1);
  // The head and the rows already complete in one render, when they are all rows (one
  // parse, not two); else the head alone, and the rows as growTable finds them.
  const end = linesEnd(source, two + 1);
  const rows = end > two + 1 ? rowsOf({ head }, source.slice(two + 1, end)) : null;
  const fragment = rows ? rows.getRootNode() : markdown(head);
  const box = fragment.firstChild;
  if (fragment.children.length !== 1 || !box.matches("div.table")) return null;
  const table = box.firstElementChild;
  node.rows = rows
    ? { head, from: end, table, body: rows, count: rows.children.length }
    : { head, from: two + 1, table, body: null, count: 0 };
  return fragment;
}

/** Where the first PART_ROWS complete lines from ``from`` end (``from`` if none is). */
function linesEnd(source, from) {
  let complete = from;
  for (let n = 0; n < PART_ROWS; n += 1) {
    const end = source.indexOf("\n", complete);
    if (end < 0) break;
    complete = end + 1;
  }
  return complete;
}

/** Add the table's rows completed since the last render, PART_ROWS at most, and show its
 *  last, unfinished line as a row until the next. The table ends at the first line that
 *  is no row: what follows is a new block. True when rows are left for the next render
 *  (the stream outran the renders). */
export function growTable(node) {
  const rows = node.rows;
  const source = node.source;
  dropMoved(node);
  const complete = linesEnd(source, rows.from);
  const behind = source.indexOf("\n", complete) >= 0;
  if (complete > rows.from) {
    const body = rowsOf(rows, source.slice(rows.from, complete));
    if (body) {
      attach(rows, body, null);
      rows.from = complete;
    } else {
      // Line by line, to the first that is no row.
      for (let end = source.indexOf("\n", rows.from); end >= 0; end = source.indexOf("\n", rows.from)) {
        const line = rowsOf(rows, source.slice(rows.from, end + 1));
        if (!line) {
          node.rows = null;
          node.frozenChars = rows.from;
          node.frozenNodes = node.childNodes.length;
          return false;
        }
        attach(rows, line, null);
        rows.from = end + 1;
      }
    }
  }
  if (!behind && complete < source.length) {
    const body = rowsOf(rows, source.slice(complete));
    if (body) attach(rows, body, node.moved);
  }
  return behind;
}

/** ``fragment`` (the next part of a long block) shown as going on from ``before`` (the
 *  element the part before it ended with): no margin between them, an ordered list's
 *  numbers going on (marked gives its ``start``). Parts are never merged into one element:
 *  the browser lays out a paragraph's lines or a list's items again when one is added to
 *  it (~350 ms for a paragraph of 2,000 lines, ~50 ms for a list of 2,000 items). */
export function markPart(before, fragment) {
  const part = fragment.firstChild;
  if (!before || !part || part.nodeType !== Node.ELEMENT_NODE) return;
  before.classList.add("part-before");
  part.classList.add("part-after");
}
