// The composer: sending a turn (creating the chat first if needed), busy state, Stop,
// and the keys: Enter sends (never while an input method is composing), Escape stops a
// running turn or else dismisses the notifications.

import { ApiError, askForToken, authHeaders, api } from "./api.js";
import { contentParts, hasAttachments, restoreAttachments, takeAttachments, thumbnails } from "./attach.js";
import { escapeDrawer } from "./chatlist.js";
import { $, chars } from "./dom.js";
import { settings } from "./settings.js";
import { state } from "./state.js";
import { follow, followFailed, settle, stopTurn } from "./resume.js";
import { LiveTurn } from "./stream.js";
import { dismissToasts, toast } from "./toasts.js";
import { statusWords } from "./words.js";

/** The chat to send into; ``created`` when it was made for this turn. */
async function ensureChat() {
  if (state.chatId) return { chatId: state.chatId, created: false };
  const chat = await api("POST", "/api/chats");
  state.chatId = chat.id;
  history.replaceState(null, "", `#chat=${encodeURIComponent(chat.id)}`);
  return { chatId: chat.id, created: true };
}

export function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("stop").hidden = !busy;
}

async function refused(response, text) {
  if (!$("text").value) $("text").value = text;  // a refused turn keeps what was typed
  if (response.status === 401) { askForToken(); return; }
  if (response.status === 412) {  // the question asked again is not the one shown: the
    // chat is read again when the turn settles (``settle``), as a stale edit's is
    toast("Not regenerated", "This question was changed or deleted in another tab since this page "
      + "showed it. Nothing was changed here; the chat was reloaded: look at it again.", "error");
    return;
  }
  const body = await response.json().catch(() => ({}));
  const why = body.error === "chat_busy" ? "Another turn is still running in this chat."
    : typeof body.message === "string" && body.message
      ? `${body.message}${body.field ? ` (${body.field})` : ""}`
      : statusWords(response.status);
  toast("Turn refused", why, "error");
}

/** Why ``POST /api/chats`` refused, in words. */
function chatRefusal(error) {
  if (error.body.error === "too_many_chats") {
    return `You have ${Number(error.body.limit).toLocaleString("en-US")} chats, the most this server keeps: delete one to start another.`;
  }
  return error.message;
}

/** Why ``text`` cannot be sent, checked before anything is created; null when it can. */
function tooLong(text) {
  const limit = state.config && state.config.limits ? state.config.limits.maxTextChars : null;
  const count = limit ? chars(text) : 0;  // code points, as the server counts
  return limit && count > limit
    ? `The message has ${count.toLocaleString("en-US")} characters; the server takes at most ${limit.toLocaleString("en-US")}.`
    : null;
}

/** A chat made for a turn the server refused holds nothing: it goes again. */
async function dropEmptyChat(chatId) {
  try { await api("DELETE", `/api/chats/${encodeURIComponent(chatId)}`); } catch { return; }
  state.chatId = null;
  history.replaceState(null, "", location.pathname);
}

/** Send ``text`` as a turn; with ``replaceFrom`` (a stored message's seq) the turn's own
 *  begin deletes that message and every later one first, so a refused turn deletes nothing;
 *  ``etag`` names that message as this page showed it (``If-Match``: 412 when stale). */
export async function sendTurn(text, replaceFrom = null, etag = null) {
  if (state.busy || (!text.trim() && !hasAttachments())) return;
  const problem = tooLong(text);
  if (problem) {
    if (!$("text").value) $("text").value = text;
    toast("Turn refused", problem, "error");
    return;
  }
  setBusy(true);
  state.turn = null;
  state.stopAsked = false;
  const attached = takeAttachments();
  if (replaceFrom !== null) {  // shown gone now; a refused turn re-renders them (openChat)
    document.querySelectorAll("#messages .msg[data-seq]").forEach((node) => {
      if (Number(node.dataset.seq) >= replaceFrom) node.remove();
    });
  }
  const live = new LiveTurn(text);
  if (attached.length) live.user.append(...thumbnails(attached));
  state.controller = new AbortController();
  let made = null;
  let sentTo = null;
  let wait = 0;  // a refused reconnect's Retry-After
  try {
    const { chatId, created } = await ensureChat();
    sentTo = chatId;
    if (created) made = chatId;
    const content = await contentParts(attached);
    const response = await fetch(`/api/chats/${encodeURIComponent(chatId)}/turns`, {
      method: "POST", signal: state.controller.signal,
      headers: authHeaders({ "Content-Type": "application/json",
        ...(replaceFrom !== null && etag ? { "If-Match": etag } : {}) }),
      body: JSON.stringify({ ...settings(), text, ...(content.length ? { content } : {}),
        ...(replaceFrom !== null ? { replace_from: replaceFrom } : {}) }),
    });
    if (!response.ok) {
      await refused(response, text);
      restoreAttachments(attached);  // a refused turn keeps what was attached too
      if (made) await dropEmptyChat(made);
    } else await follow(response, live, chatId);
  } catch (error) {
    if (error instanceof ApiError) {  // the chat could not be made: the text is kept
      if (!$("text").value) $("text").value = text;
      restoreAttachments(attached);
      if (error.status !== 401) toast("Could not start a chat", chatRefusal(error), "error");
    } else wait = followFailed(error);
  } finally {
    state.controller = null;
    state.live = null;
    if (!state.chatId) { live.user.remove(); live.node.remove(); $("welcome").hidden = false; }
    await settle(sentTo, wait);  // the stored turn replaces the live one
  }
}

/** A touch screen and no mouse or trackpad: a phone, a tablet without a keyboard's pad. */
const touchOnly = () => matchMedia("(pointer: coarse)").matches
  && !matchMedia("(any-pointer: fine)").matches;

const NARROW = matchMedia("(max-width: 720px)");
const HINTS = {  // the message field's placeholder, [wide, narrow]: two rows at 375 px
  keys: ["Message (Enter to send, Shift+Enter for a new line)", "Message (Enter to send)"],
  touch: ["Message (Send sends; Enter is a new line)", "Message (Enter is a new line)"],
};

/** The keys' hint in the message field, as short as a narrow screen's field needs. */
function placeHint() {
  const [wide, narrow] = HINTS[touchOnly() ? "touch" : "keys"];
  $("text").placeholder = NARROW.matches ? narrow : wide;
}

export function wireComposer() {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("text").value;
    $("text").value = "";
    $("text").focus();  // Send clicked: the next message is typed without a click back
    sendTurn(text);
  });
  placeHint();
  NARROW.addEventListener("change", placeHint);  // a phone turned, a window resized
  $("text").addEventListener("keydown", (event) => {
    if (event.isComposing || event.keyCode === 229) return;  // an IME is composing
    if (event.key !== "Enter" || event.shiftKey) return;
    // A phone's keyboard has no Shift+Enter: there Enter is a new line, Send sends
    // (Ctrl or Cmd+Enter sends anywhere).
    if (touchOnly() && !event.ctrlKey && !event.metaKey) return;
    event.preventDefault();
    $("composer").requestSubmit();
  });
  $("stop").addEventListener("click", stopTurn);
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.isComposing) return;
    if (escapeDrawer()) return;
    if (state.busy && !$("stop").hidden) $("stop").click();
    else dismissToasts();
  });
}
