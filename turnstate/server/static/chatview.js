// One chat's view: open, render, page in older messages on scroll, clear, and the
// message edits (edit, delete from here, regenerate).

import { api, unanswered } from "./api.js";
import { attachmentsOf, restoreAttachments } from "./attach.js";
import { markActive, refreshChats } from "./chatlist.js";
import { sendTurn } from "./composer.js";
import { $ } from "./dom.js";
import { assistantView, storedMedia, usd, userText, userView } from "./messages.js";
import { renderContinuation, renderMeter } from "./meter.js";
import { stopRename } from "./rename.js";
import { resumeTurn } from "./resume.js";
import { state } from "./state.js";
import { toast } from "./toasts.js";

const chatPath = (chatId) => `/api/chats/${encodeURIComponent(chatId)}`;

function messageNodes(messages) {
  const nodes = [];
  let asked = null;
  for (const message of messages) {
    if (message.role === "user") {
      asked = { seq: message.seq, text: userText(message), media: storedMedia(message),
        etag: message.etag };
      nodes.push(userView(message));
    } else {
      const node = assistantView(message, asked);
      // What this answer adds to the cost of the turns shown (kept when older pages stay).
      const meta = (message.turn && message.turn.metadata) || {};
      node.costUsd = Number((message.turn && message.turn.costUsd) || 0);
      node.costUnknown = meta.usageMissing || meta.serviceTier || meta.serverToolCalls ? 1 : 0;
      nodes.push(node);
    }
  }
  return nodes;
}

const PINNED_PX = 60;  // this close to the bottom, the view is at the chat's end

/** Where the user reads in the chat shown: the first message in view and its offset from
 *  the view's top; null at the chat's end (or nothing shown). */
function readingPlace() {
  const box = $("messages");
  if (box.scrollHeight - box.scrollTop - box.clientHeight < PINNED_PX) return null;
  const top = box.getBoundingClientRect().top;
  const node = [...box.querySelectorAll(".msg[data-seq]")]
    .find((n) => n.getBoundingClientRect().bottom > top);
  return node ? { seq: node.dataset.seq, offset: node.getBoundingClientRect().top - top } : null;
}

/** Render ``chat``. ``keepPlace`` (the same chat read again after a turn): where the user
 *  reads above the chat's end stays in view, and the older messages paged in stay (the
 *  turn changed nothing before its question); else the view goes to the end. */
export function renderChat(chat, keepPlace = false) {
  const place = keepPlace && chat.id === state.shownId ? readingPlace() : null;
  if (chat.id !== state.shownId) stopRename();  // another chat: a rename under way ends
  state.shownId = chat.id;
  $("chat-title").textContent = chat.title;
  $("rename-chat").hidden = !$("rename-form").hidden;
  $("welcome").hidden = chat.messages.length > 0;
  $("not-found").hidden = true;
  $("delete-chat").hidden = false;
  const first = chat.messages.length ? chat.messages[0].seq : -Infinity;
  const kept = (node) => place && node.dataset.seq !== undefined && Number(node.dataset.seq) < first;
  let keptAny = false;
  let keptCost = 0;
  let keptUnknown = 0;
  for (const old of document.querySelectorAll("#messages .msg, #messages .older")) {
    if (!kept(old)) { old.remove(); continue; }
    keptAny = true;
    keptCost += old.costUsd || 0;
    keptUnknown += old.costUnknown || 0;
  }
  $("messages").append(...messageNodes(chat.messages));
  if (!keptAny) state.older = chat.older;
  state.shownStamp = stamp(chat);
  renderMeter(chat.context);
  renderContinuation(chat.continuation);
  state.cost = Number(chat.costUsd || 0) + keptCost;
  state.costUnknown = (chat.costUnknownTurns || 0) + keptUnknown;
  showCost();
  const box = $("messages");
  const read = place && box.querySelector(`.msg[data-seq="${place.seq}"]`);
  if (read) box.scrollTop += read.getBoundingClientRect().top - box.getBoundingClientRect().top - place.offset;
  else box.scrollTop = box.scrollHeight;
}

/** The cost of the turns loaded: the whole chat's once no older page is left; a floor
 * when some turns billed figures the provider never reported. */
function showCost() {
  const shown = state.cost ? usd(String(state.cost)) : "";
  const unknown = state.costUnknown ? ` + ${state.costUnknown} turn(s) of unknown cost` : "";
  const text = !shown ? (unknown ? unknown.slice(3) : "") : `${shown}${unknown}`;
  $("chat-cost").textContent = !text ? "" : state.older ? `${text} in the turns shown` : `${text} so far`;
}

/** Older messages, put above the first one shown, keeping the scroll position. */
async function loadOlder() {
  if (!state.older || state.loadingOlder || !state.chatId) return;
  state.loadingOlder = true;
  const chatId = state.chatId;
  try {
    const page = await api("GET", `${chatPath(chatId)}?before=${state.older}`);
    if (chatId !== state.chatId) return;
    const box = $("messages");
    const before = box.scrollHeight;
    const first = box.querySelector(".msg");
    for (const node of messageNodes(page.messages)) box.insertBefore(node, first);
    box.scrollTop += box.scrollHeight - before;
    state.older = page.older;
    state.cost += Number(page.costUsd || 0);
    state.costUnknown += page.costUnknownTurns || 0;
    showCost();
  } catch (error) {
    toast("Could not load older messages", error.message, "error");
  } finally {
    state.loadingOlder = false;
  }
}

/** What changes with any write to a chat (a turn, an edit, a delete, a rename). */
const stamp = (chat) => `${chat.version}|${chat.updatedAt}|${chat.messageCount}|${chat.title}`;

/** The tab seen again (or the network back): another tab or device may have taken turns
 *  in the chat shown, or runs one now, while this one was hidden or asleep. The chat is
 *  read again and, when it changed, shown anew and a running turn followed; an unchanged
 *  chat keeps its view, older messages and scroll position included. */
async function catchUp() {
  const chatId = state.chatId;
  if (document.visibilityState === "hidden" || !chatId || state.busy || state.catchingUp) return;
  state.catchingUp = true;
  try {
    const chat = await api("GET", chatPath(chatId));
    if (state.chatId !== chatId || state.busy) return;
    if (stamp(chat) === state.shownStamp && !chat.activeTurnId) return;
    renderChat(chat);
    if (chat.activeTurnId) resumeTurn(chat);
    await refreshChats();
  } catch {
    // Not now (the server restarting, the network not back yet): the next visit asks again.
  } finally {
    state.catchingUp = false;
  }
}

export function wireChatView() {
  $("messages").addEventListener("scroll", () => {
    if ($("messages").scrollTop < 120) loadOlder();
  });
  document.addEventListener("visibilitychange", catchUp);
  window.addEventListener("online", catchUp);
}

export function clearChat() {
  for (const old of document.querySelectorAll("#messages .msg")) old.remove();
  stopRename();
  state.shownId = null;
  $("chat-title").textContent = "New chat";
  $("rename-chat").hidden = true;
  $("welcome").hidden = false;
  $("not-found").hidden = true;
  $("delete-chat").hidden = true;
  state.older = null;
  state.cost = 0;
  state.costUnknown = 0;
  $("chat-cost").textContent = "";
  renderMeter(null);
  renderContinuation(null);
}

export async function openChat(chatId, keepPlace = false) {
  // Leaving a chat whose answer streams here: the page stops following it (the turn runs
  // on at the server, and resumes here on coming back), so this chat takes turns at once.
  if (state.controller && state.turn && state.turn.chatId !== chatId) state.controller.abort();
  state.chatId = chatId;
  markActive(chatId);
  if (!chatId) { clearChat(); return; }
  try {
    const chat = await api("GET", chatPath(chatId));
    if (state.chatId !== chatId) return null;  // another chat was opened meanwhile: its view wins
    renderChat(chat, keepPlace);
    if (chat.activeTurnId && !state.busy) resumeTurn(chat);  // a reload, another tab
    return chat;
  } catch (error) {
    if (state.chatId !== chatId) return null;
    if (error.status !== 404) throw error;
    clearChat();
    $("welcome").hidden = true;
    $("not-found").hidden = false;
    $("chat-title").textContent = "Not found";
    state.chatId = null;
  }
}

const RELOAD_TRIES = 15;  // about a minute: a server restarting

/** After a turn: the stored chat (if still the one shown) replaces the live answer, and the
 *  list refreshes (returns the chat shown, or null); while the server does not answer (a restart, a network coming back),
 *  tried again for a while instead of leaving the live answer as it was. */
export async function reloadView(chatId) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      const shown = chatId && state.chatId === chatId ? await openChat(chatId, true) : null;
      await refreshChats();
      return shown;
    } catch (error) {
      if (!unanswered(error) || attempt >= RELOAD_TRIES) {
        toast("Could not reload the chat", error.message, "error");
        return null;
      }
    }
    await new Promise((resolve) => { setTimeout(resolve, Math.min(5000, 250 * 2 ** attempt)); });
  }
}

/** The message's ``If-Match`` (its ``etag`` as this page showed it): the server refuses
 *  412 an edit or delete of a message another tab changed or deleted since. */
const ifMatch = (etag) => (etag ? { "If-Match": etag } : {});

/** A 412: the message this page showed is no longer there as shown. The chat is read
 *  again and the user told, in words, that nothing was changed. */
async function stale(error, what) {
  if (error.status !== 412) return false;
  const chatId = state.chatId;
  toast(`Not ${what}`, "This message was changed or deleted in another tab since this page showed it. "
    + "Nothing was changed here; the chat was reloaded: look at it again.", "error");
  await reloadView(chatId);
  return true;
}

export async function editMessage(seq, text, etag) {
  try {
    renderChat(await api("PATCH", `${chatPath(state.chatId)}/messages/${seq}`, { text }, ifMatch(etag)));
    toast("Message edited", "The stored cursor was cleared: the next turn replays the history.", "ok");
    await refreshChats();  // the first message is the chat's title
  } catch (error) { if (!await stale(error, "edited")) toast("Could not edit", error.message, "error"); }
}

export async function deleteFrom(seq, etag) {
  if (!window.confirm("Delete this message and everything after it?")) return;
  try {
    const result = await api("DELETE", `${chatPath(state.chatId)}/messages/${seq}`, undefined, ifMatch(etag));
    renderChat(result);
    toast("Deleted", `${result.deleted} message(s) removed; the next turn replays the history.`, "ok");
    await refreshChats();
  } catch (error) { if (!await stale(error, "deleted")) toast("Could not delete", error.message, "error"); }
}

/** Ask again: send ``text`` in place of the question at ``seq``; the turn's begin deletes
 *  it and what follows in the write that takes the chat (``replace_from``), so a refused
 *  turn, or one that finds the chat busy, deletes nothing. ``etag``: the question as this
 *  page showed it (``If-Match``): another tab's change of that place since is refused 412. */
export async function regenerate(seq, text, media = [], etag = null) {
  if (state.busy || (!text.trim() && !media.length)) return;
  const later = [...document.querySelectorAll("#messages .msg[data-seq]")]
    .filter((node) => Number(node.dataset.seq) > seq + 1);
  if (later.length && !window.confirm("This also deletes the messages after it. Go on?")) return;
  let attached;
  try {
    attached = await attachmentsOf(media);  // the stored question's images, sent again
  } catch (error) { toast("Could not regenerate", error.message, "error"); return; }
  restoreAttachments(attached);
  await sendTurn(text, seq, etag);
}
