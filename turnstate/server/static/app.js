// turnstate chat page: plain ES modules, no build step. This entry point wires the modules
// and starts the page; each module holds one part of it:
//   dom.js (element helpers) · state.js (shared state) · api.js (JSON API, token, login)
//   settings.js (provider/model/tools panel) · chatlist.js (sidebar, navigation, drawer)
//   chatview.js (one chat: open, render, paging, edits) · messages.js (message rendering)
//   markdown.js (answers as sanitized markdown; vendor/ holds marked and DOMPurify)
//   meter.js (context meter, cursor label) · stream.js (SSE reader, live answer)
//   composer.js (send, busy, Stop, keys) · emulator.js (emulator controls)
//   rename.js (renaming the chat shown)
//   toasts.js (notifications) · words.js (reasons in plain words)

import { api, askForToken, ignoreTokenInUrl, takeToken, wireLogin } from "./api.js";
import { wireAttachments } from "./attach.js";
import { loadChats, wireChatList } from "./chatlist.js";
import { openChat, wireChatView } from "./chatview.js";
import { wireComposer } from "./composer.js";
import { $, fragmentParams } from "./dom.js";
import { wireEmulator } from "./emulator.js";
import { wireRename } from "./rename.js";
import { setupPickers } from "./settings.js";
import { state } from "./state.js";
import { toast } from "./toasts.js";

function wire() {
  wireComposer();
  wireAttachments();
  wireChatList(openChat);
  wireRename();
  wireChatView();
  wireEmulator();
  wireLogin();
  window.addEventListener("hashchange", () => {
    if (ignoreTokenInUrl()) {
      toast("Sign-in link ignored", "A link cannot switch accounts mid-session; open it in a new tab to do so.", "error");
    }
    if (state.token) openChat(fragmentParams().get("chat"));
  });
}

async function start() {
  wire();
  if (!await takeToken()) { askForToken(); return; }
  try {
    state.config = await api("GET", "/api/config");
  } catch { return; }
  $("owner").textContent = state.config.owner;
  setupPickers();
  await loadChats();
  await openChat(fragmentParams().get("chat"));
  document.body.dataset.ready = "true";
}

start();
