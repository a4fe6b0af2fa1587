// turnstate chat page: plain ES modules, no build step. This entry point wires the modules
// and starts the page; each module holds one part of it:
//   dom.js (element helpers) · state.js (shared state) · api.js (JSON API, token, login)
//   settings.js (provider/model/tools panel) · chatlist.js (sidebar, navigation)
//   chatview.js (one chat: open, render, edits) · messages.js (message rendering)
//   meter.js (context meter, cursor label) · stream.js (SSE reader, live answer)
//   composer.js (send, busy, Stop) · emulator.js (emulator controls) · toasts.js · words.js

import { api, askForToken, takeToken, wireLogin } from "./api.js";
import { loadChats, wireChatList } from "./chatlist.js";
import { openChat } from "./chatview.js";
import { wireComposer } from "./composer.js";
import { $, fragmentParams } from "./dom.js";
import { wireEmulator } from "./emulator.js";
import { setupPickers } from "./settings.js";
import { state } from "./state.js";

function wire() {
  wireComposer();
  wireChatList(openChat);
  wireEmulator();
  wireLogin();
  window.addEventListener("hashchange", () => {
    if (takeToken()) openChat(fragmentParams().get("chat"));
  });
}

async function start() {
  wire();
  if (!takeToken()) { askForToken(); return; }
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
