// Rendering stored messages: text, reasoning, tool calls, audit chips, aborts.

import { el, fmt } from "./dom.js";
import { deleteFrom, editMessage, openChat } from "./chatview.js";
import { sendTurn } from "./composer.js";
import { state } from "./state.js";
import { ABORT_WORDS } from "./words.js";

export function toolBlock(call, result) {
  const failed = result && result.isError;
  return el("details", { class: `tool${failed ? " error" : ""}`, "data-tool": call.name },
    el("summary", {}, `🔧 ${call.name}(${call.arguments})${result ? "" : " …"}`),
    el("pre", { class: "tool-result" }, result ? result.output : "running…"));
}

function partsView(parts) {
  const nodes = [];
  const results = new Map(parts.filter((p) => p.type === "tool_result").map((p) => [p.callId, p]));
  for (const part of parts) {
    if (part.type === "text") nodes.push(el("span", { class: "text" }, part.text));
    else if (part.type === "reasoning" && part.text) {
      nodes.push(el("details", { class: "reasoning" }, el("summary", {}, "reasoning"), part.text));
    } else if (part.type === "tool_call") nodes.push(toolBlock(part, results.get(part.callId)));
  }
  return nodes;
}

function auditChips(turn) {
  const chips = [];
  if (turn.strategy) chips.push(el("span", { class: `chip strategy-${turn.strategy}` }, turn.strategy));
  if (turn.path && turn.path.length) chips.push(el("span", { class: "chip path" }, turn.path.join(" → ")));
  if (turn.degradation) chips.push(el("span", { class: "chip degraded" }, `degraded: ${turn.degradation}`));
  chips.push(el("span", { class: "chip" }, `${turn.provider} / ${turn.model}`));
  if (turn.cacheHitTokens) chips.push(el("span", { class: "chip" }, `cache hits ${fmt(turn.cacheHitTokens)} tokens`));
  if (turn.requests !== null && turn.requests !== undefined) {
    chips.push(el("span", { class: "chip bytes" }, `${fmt(turn.requestBytes)} bytes in ${turn.requests} request(s)`));
  }
  return el("div", { class: "audit" }, chips);
}

function abortView(reason, detail, retryText) {
  const words = ABORT_WORDS[reason] || reason;
  return el("div", { class: "abort" },
    el("span", { class: "abort-reason" }, `Aborted: ${words}${detail && reason !== "cancelled" ? ` (${detail})` : ""}`),
    retryText === null ? null : el("button", { class: "ghost retry", type: "button",
      onclick: () => sendTurn(retryText) }, "Retry"));
}

export function userView(message) {
  const text = message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
  const node = el("div", { class: "msg user", "data-seq": message.seq }, el("span", { class: "text" }, text));
  const edit = () => {
    const box = el("textarea", { rows: 3 });
    box.value = text;
    node.replaceChildren(box, el("div", { class: "actions" },
      el("button", { class: "ghost", type: "button", onclick: () => openChat(state.chatId) }, "Cancel"),
      el("button", { class: "primary save", type: "button", onclick: () => editMessage(message.seq, box.value) }, "Save")));
    box.focus();
  };
  node.append(el("div", { class: "actions" },
    el("button", { class: "link edit", type: "button", onclick: edit }, "Edit"),
    el("button", { class: "link delete", type: "button", onclick: () => deleteFrom(message.seq) }, "Delete from here")));
  return node;
}

export function assistantView(message, userText) {
  const aborted = message.status === "aborted";
  const node = el("div", { class: `msg assistant${aborted ? " aborted" : ""}`, "data-seq": message.seq },
    partsView(message.parts));
  const turn = message.turn;
  if (turn) {
    node.append(auditChips(turn));
    if (aborted) node.append(abortView(turn.reason, turn.detail, userText));
  }
  return node;
}
