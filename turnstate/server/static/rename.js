// Renaming the chat shown: ✎ opens an inline field over the title. Enter (or leaving the
// field) saves, Escape cancels; an emptied field names the chat by its first message again.

import { api } from "./api.js";
import { retitle } from "./chatlist.js";
import { $, cutChars } from "./dom.js";
import { state } from "./state.js";
import { toast } from "./toasts.js";

const MAX_TITLE_CHARS = 200;  // the server's limit, in code points
let saving = false;

function editing(on) {
  $("rename-form").hidden = !on;
  $("chat-title").hidden = on;
  $("rename-chat").hidden = on || !state.chatId;
}

export function startRename() {
  if (!state.chatId) return;
  $("rename-input").value = $("chat-title").textContent;
  editing(true);
  $("rename-input").focus();
  $("rename-input").select();
}

/** Leave the field; the title shown stays what the server last said. */
export function stopRename() {
  if (!$("rename-form").hidden) editing(false);
}

async function save() {
  if (saving || $("rename-form").hidden) return;
  const chatId = state.chatId;
  const title = cutChars($("rename-input").value.trim(), MAX_TITLE_CHARS);
  if (!chatId || title === $("chat-title").textContent) { stopRename(); $("rename-chat").focus(); return; }
  saving = true;
  try {
    const chat = await api("PATCH", `/api/chats/${encodeURIComponent(chatId)}`, { title: title || null });
    if (state.chatId === chatId) $("chat-title").textContent = chat.title;
    retitle(chatId, chat.title);  // in place: an older page's chat stays where it is
    stopRename();
    $("rename-chat").focus();
  } catch (error) {
    toast("Could not rename", error.message, "error");
    $("rename-input").focus();  // the text typed stays, to be corrected
  } finally {
    saving = false;
  }
}

export function wireRename() {
  $("rename-chat").addEventListener("click", startRename);
  $("rename-form").addEventListener("submit", (event) => { event.preventDefault(); save(); });
  $("rename-input").addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.isComposing) return;
    event.stopPropagation();  // Escape here cancels the rename, not the running turn
    stopRename();
    $("rename-chat").focus();
  });
  $("rename-input").addEventListener("blur", () => { if (!saving) save(); });
}
