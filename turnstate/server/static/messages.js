// Rendering stored messages: text (answers as markdown), reasoning, tool calls, audit
// chips, aborts; the per-message actions (edit, delete from here, regenerate, retry).

import { mediaView } from "./attach.js";
import { deleteFrom, editMessage, openChat, regenerate } from "./chatview.js";
import { el, fmt } from "./dom.js";
import { copyText } from "./markdown.js";
import { markdownNode } from "./livemd.js";
import { state } from "./state.js";
import { ABORT_WORDS, FINISH_WORDS } from "./words.js";

const SVG = "http://www.w3.org/2000/svg";

/** A wrench drawn inline (an emoji needs a font the machine may not have). */
export function toolIcon() {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "icon");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", "M10.5 1a4.5 4.5 0 0 0-4.3 5.8L1.4 11.6a1.4 1.4 0 0 0 2 2l4.8-4.8" +
    "A4.5 4.5 0 0 0 14.8 4l-2.6 2.6-2.2-.6-.6-2.2L12 1.2A4.5 4.5 0 0 0 10.5 1z");
  svg.append(path);
  return svg;
}

export function toolBlock(call, result) {
  const failed = result && result.isError;
  return el("details", { class: `tool${failed ? " error" : ""}`, "data-tool": call.name },
    el("summary", {}, toolIcon(), el("span", { class: "call" },
      ` ${call.name}(${call.arguments})${result ? "" : " …"}`)),
    el("pre", { class: "tool-result" }, result ? result.output : "running…"));
}

/** Whether ``url`` is an http(s) URL: nothing else becomes a link (``javascript:``,
 *  ``data:`` and the like are left out). */
export function isLink(url) {
  if (typeof url !== "string") return false;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:";
  } catch {
    return false;
  }
}

/** An answer's sources as links (its citations' http(s) URLs, each once, titled by the
 *  first title given), or null when it cites none. Text goes in as text nodes. */
export function sourcesView(citations) {
  const titles = new Map();
  for (const citation of citations || []) {
    if (citation && isLink(citation.url) && !titles.get(citation.url)) {
      titles.set(citation.url, typeof citation.title === "string" ? citation.title : "");
    }
  }
  if (!titles.size) return null;
  return el("div", { class: "sources" }, el("span", { class: "sources-label" }, "Sources"),
    el("ol", {}, [...titles].map(([url, title]) => el("li", {},
      el("a", { href: url, target: "_blank", rel: "noopener noreferrer nofollow" }, title || url)))));
}

function partsView(message) {
  const parts = message.parts;
  const nodes = [];
  const results = new Map(parts.filter((p) => p.type === "tool_result").map((p) => [p.callId, p]));
  for (const part of parts) {
    if (part.type === "text") nodes.push(markdownNode(part.text));
    else if (part.type === "image" && part.src) nodes.push(mediaView(part, message));  // generated
    else if (part.type === "reasoning" && part.text) {
      nodes.push(el("details", { class: "reasoning" }, el("summary", {}, "reasoning"), part.text));
    } else if (part.type === "tool_call") nodes.push(toolBlock(part, results.get(part.callId)));
  }
  nodes.push(sourcesView(parts.filter((p) => p.type === "text").flatMap((p) => p.citations || [])));
  return nodes;
}

function auditChips(turn) {
  const chips = [];
  if (turn.strategy) chips.push(el("span", { class: `chip strategy-${turn.strategy}` }, turn.strategy));
  if (turn.path && turn.path.length) chips.push(el("span", { class: "chip path" }, turn.path.join(" → ")));
  if (turn.degradation) chips.push(el("span", { class: "chip degraded" }, `degraded: ${turn.degradation}`));
  const finish = turn.metadata && turn.metadata.finishReason;
  if (FINISH_WORDS[finish]) chips.push(el("span", { class: "chip finish", "data-finish": finish }, FINISH_WORDS[finish]));
  chips.push(el("span", { class: "chip" }, `${turn.provider} / ${turn.model}`));
  if (turn.cacheHitTokens) chips.push(el("span", { class: "chip" }, `cache hits ${fmt(turn.cacheHitTokens)} tokens`));
  const meta = turn.metadata || {};
  if (meta.usageMissing || meta.serviceTier || meta.serverToolCalls) {
    const why = meta.serviceTier ? `billed at the provider's ${meta.serviceTier} tier, which has no list price here`
      : meta.serverToolCalls ? `${meta.serverToolCalls} call(s) of the provider's own tools, billed at fees not listed here`
      : "the provider billed a request of this turn without reporting its usage";
    chips.push(el("span", { class: "chip cost", title: why }, "cost unknown"));
  } else if (turn.costUsd && meta.cutRequests) {
    chips.push(el("span", { class: "chip cost", title: `this turn at list price; the output of ${meta.cutRequests} request(s) cut mid-answer is estimated` }, `≥ ${usd(turn.costUsd)}`));
  } else if (turn.costUsd) chips.push(el("span", { class: "chip cost", title: "this turn at list price" }, usd(turn.costUsd)));
  if (turn.requests !== null && turn.requests !== undefined) {
    chips.push(el("span", { class: "chip bytes" }, `${fmt(turn.requestBytes)} bytes in ${turn.requests} request(s)`));
  }
  return el("div", { class: "audit" }, chips);
}

/** Reasons whose words already say all their detail would ("stopped on request"). */
const PLAIN_REASONS = new Set(["cancelled", "stopped"]);

function abortView(reason, detail, asked) {
  const words = ABORT_WORDS[reason] || reason;
  return el("div", { class: "abort" },
    el("span", { class: "abort-reason" }, `Aborted: ${words}${detail && !PLAIN_REASONS.has(reason) ? ` (${detail})` : ""}`),
    asked ? el("button", { class: "ghost retry", type: "button",
      title: "Run this question again in place of the failed answer",
      onclick: () => regenerate(asked.seq, asked.text, asked.media, asked.etag) }, "Retry") : null);
}

/** A user message's images and files (inline or linked), which a question asked again
 *  sends again. */
export function storedMedia(message) {
  return message.parts.filter((p) => (p.type === "image" || p.type === "file") && (p.src || p.url));
}

export function userText(message) {
  return message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
}

export function userView(message) {
  const text = userText(message);
  const node = el("div", { class: "msg user", "data-seq": message.seq }, el("span", { class: "text", dir: "auto" }, text),
    message.parts.filter((p) => p.type === "image" || p.type === "file").map((p) => mediaView(p, message)));
  const edit = () => {
    const box = el("textarea", { rows: 3, "aria-label": "Edit the message", dir: "auto" });
    box.value = text;
    node.replaceChildren(box, el("div", { class: "actions" },
      el("button", { class: "ghost", type: "button", onclick: () => openChat(state.chatId) }, "Cancel"),
      el("button", { class: "ghost save", type: "button", title: "Keep the answers after it",
        onclick: () => editMessage(message.seq, box.value, message.etag) }, "Save"),
      el("button", { class: "primary save-regenerate", type: "button",
        title: "Delete what follows and ask again with the edited text",
        onclick: () => regenerate(message.seq, box.value, storedMedia(message), message.etag) }, "Save & regenerate")));
    box.focus();
  };
  node.append(el("div", { class: "actions" },
    el("button", { class: "link edit", type: "button", onclick: edit }, "Edit"),
    el("button", { class: "link delete", type: "button", onclick: () => deleteFrom(message.seq, message.etag) }, "Delete from here")));
  return node;
}

/** ``asked``: the user message this answers ({seq, text, media, etag}), for Retry and
 *  Regenerate. */
export function assistantView(message, asked) {
  const aborted = message.status === "aborted";
  const pending = message.status === "in_progress" ? " in-progress" : "";
  const node = el("div", { class: `msg assistant${aborted ? " aborted" : ""}${pending}`, "data-seq": message.seq },
    partsView(message));
  const turn = message.turn;
  if (turn) {
    node.dataset.turn = turn.id;
    node.append(auditChips(turn));
    if (aborted) node.append(abortView(turn.reason, turn.detail, asked));
  }
  const text = answerText(message);
  const copy = text ? el("button", { class: "link copy-answer", type: "button",
    title: "Copy the answer (as markdown)" }, "Copy") : null;
  if (copy) copy.addEventListener("click", () => copyText(text, copy, "Answer"));
  const again = asked && !aborted && !pending  // a running turn's answer is not asked again
    ? el("button", { class: "link regenerate", type: "button",
      title: "Delete this answer and ask the same question again",
      onclick: () => regenerate(asked.seq, asked.text, asked.media, asked.etag) }, "Regenerate") : null;
  if (copy || again) node.append(el("div", { class: "actions" }, copy, again));
  return node;
}

/** An answer's text as the model wrote it (markdown), its text parts apart by a blank line. */
function answerText(message) {
  return message.parts.filter((p) => p.type === "text" && p.text).map((p) => p.text).join("\n\n");
}

/** A USD amount (exact decimal text) for a chip: cents, or four significant digits below one. */
export function usd(text) {
  const value = Number(text);
  if (!Number.isFinite(value)) return "";
  return value >= 1 ? `$${value.toFixed(2)}` : `$${Number(value.toPrecision(4))}`;
}
