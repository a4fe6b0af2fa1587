// The composer: sending a turn (creating the chat first if needed), busy state, Stop.

import { askForToken, authHeaders, api } from "./api.js";
import { loadChats } from "./chatlist.js";
import { openChat } from "./chatview.js";
import { $ } from "./dom.js";
import { settings } from "./settings.js";
import { state } from "./state.js";
import { LiveTurn, sseEvents } from "./stream.js";
import { toast } from "./toasts.js";

async function ensureChat() {
  if (state.chatId) return state.chatId;
  const chat = await api("POST", "/api/chats");
  state.chatId = chat.id;
  history.replaceState(null, "", `#chat=${encodeURIComponent(chat.id)}`);
  return chat.id;
}

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("stop").hidden = !busy;
}

async function refused(response, text) {
  if (!$("text").value) $("text").value = text;  // a refused turn keeps what was typed
  if (response.status === 401) { askForToken(); return; }
  const body = await response.json().catch(() => ({}));
  const why = body.error === "chat_busy" ? "Another turn is still running in this chat."
    : `${body.message || body.error}${body.field ? ` (${body.field})` : ""}`;
  toast("Turn refused", why, "error");
}

export async function sendTurn(text) {
  if (state.busy || !text.trim()) return;
  setBusy(true);
  const live = new LiveTurn(text);
  state.controller = new AbortController();
  try {
    const chatId = await ensureChat();
    const response = await fetch(`/api/chats/${encodeURIComponent(chatId)}/turns`, {
      method: "POST", signal: state.controller.signal,
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify({ ...settings(), text }),
    });
    if (!response.ok) await refused(response, text);
    else for await (const event of sseEvents(response)) live.handle(event);
  } catch (error) {
    if (error.name !== "AbortError") toast("Connection lost", error.message, "error");
  } finally {
    state.controller = null;
    try {
      if (state.chatId) {
        await openChat(state.chatId);  // the stored turn, with its audit, replaces the live one
        await loadChats();
      }
    } finally {
      setBusy(false);
    }
  }
}

export function wireComposer() {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("text").value;
    $("text").value = "";
    sendTurn(text);
  });
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
  });
  $("stop").addEventListener("click", () => state.controller && state.controller.abort());
}
