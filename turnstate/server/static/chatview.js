// One chat's view: open, render, clear, and the message edits (edit, delete from here).

import { api } from "./api.js";
import { markActive } from "./chatlist.js";
import { $ } from "./dom.js";
import { assistantView, userView } from "./messages.js";
import { renderContinuation, renderMeter } from "./meter.js";
import { state } from "./state.js";
import { toast } from "./toasts.js";

export function renderChat(chat) {
  $("chat-title").textContent = chat.title;
  $("welcome").hidden = chat.messages.length > 0;
  $("not-found").hidden = true;
  $("delete-chat").hidden = false;
  const nodes = [];
  let lastUser = "";
  for (const message of chat.messages) {
    if (message.role === "user") {
      lastUser = message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
      nodes.push(userView(message));
    } else nodes.push(assistantView(message, lastUser));
  }
  for (const old of document.querySelectorAll("#messages .msg")) old.remove();
  $("messages").append(...nodes);
  renderMeter(chat.context);
  renderContinuation(chat.continuation);
  $("messages").scrollTop = $("messages").scrollHeight;
}

function clearChat() {
  for (const old of document.querySelectorAll("#messages .msg")) old.remove();
  $("chat-title").textContent = "New chat";
  $("welcome").hidden = false;
  $("not-found").hidden = true;
  $("delete-chat").hidden = true;
  renderMeter(null);
  renderContinuation(null);
}

export async function openChat(chatId) {
  state.chatId = chatId;
  markActive(chatId);
  if (!chatId) { clearChat(); return; }
  try {
    renderChat(await api("GET", `/api/chats/${encodeURIComponent(chatId)}`));
  } catch (error) {
    if (error.status !== 404) throw error;
    clearChat();
    $("welcome").hidden = true;
    $("not-found").hidden = false;
    $("chat-title").textContent = "Not found";
    state.chatId = null;
  }
}

export async function editMessage(seq, text) {
  try {
    renderChat(await api("PATCH", `/api/chats/${state.chatId}/messages/${seq}`, { text }));
    toast("Message edited", "The stored cursor was cleared: the next turn replays the history.", "ok");
  } catch (error) { toast("Could not edit", error.message, "error"); }
}

export async function deleteFrom(seq) {
  if (!window.confirm("Delete this message and everything after it?")) return;
  try {
    const result = await api("DELETE", `/api/chats/${state.chatId}/messages/${seq}`);
    renderChat(result);
    toast("Deleted", `${result.deleted} message(s) removed; the next turn replays the history.`, "ok");
  } catch (error) { toast("Could not delete", error.message, "error"); }
}
