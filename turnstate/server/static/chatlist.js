// The sidebar's chat list and navigation between chats (the URL fragment names the chat).

import { api } from "./api.js";
import { $, el } from "./dom.js";
import { state } from "./state.js";
import { toast } from "./toasts.js";

export async function loadChats(append = false) {
  const query = append && state.next ? `?after=${encodeURIComponent(state.next)}` : "";
  const page = await api("GET", `/api/chats${query}`);
  const items = page.chats.map((chat) => el("button", {
    class: `chat-item${chat.id === state.chatId ? " active" : ""}`, type: "button",
    "data-chat": chat.id, onclick: () => go(chat.id),
  }, chat.busy ? el("span", { class: "running", title: "A turn is running" }, "●") : null,
  el("span", { class: "title" }, chat.title), el("small", {}, new Date(chat.updatedAt).toLocaleString())));
  if (append) $("chat-list").append(...items); else $("chat-list").replaceChildren(...items);
  state.next = page.next;
  $("more-chats").hidden = !page.next;
}

/** A chat's new title in the list, where it stands (a rename does not move it). */
export function retitle(chatId, title) {
  for (const item of document.querySelectorAll(".chat-item")) {
    if (item.dataset.chat === chatId) item.querySelector(".title").textContent = title;
  }
}

export function go(chatId) {
  if (drawerOpen()) { closeDrawer(); $("text").focus(); }  // the chosen chat's composer
  location.hash = chatId ? `chat=${encodeURIComponent(chatId)}` : "";
}

// On a narrow screen the sidebar is a drawer over the chat, opened by the ☰ button. Closed,
// it is hidden from the keyboard too (Tab walked through every chat off screen); opened,
// the keyboard starts in it, and Escape closes it.
const drawerOpen = () => document.body.classList.contains("drawer-open");

function closeDrawer() { document.body.classList.remove("drawer-open"); }

function toggleDrawer() {
  if (drawerOpen()) { closeDrawer(); return; }
  document.body.classList.add("drawer-open");
  (document.querySelector(".chat-item.active") || $("new-chat")).focus();
}

/** Escape: closes the open drawer; false when there was none. */
export function escapeDrawer() {
  if (!drawerOpen()) return false;
  closeDrawer();
  $("menu").focus();
  return true;
}

export function markActive(chatId) {
  for (const item of document.querySelectorAll(".chat-item")) {
    item.classList.toggle("active", item.dataset.chat === chatId);
  }
}

export function wireChatList(openChat) {
  $("menu").addEventListener("click", toggleDrawer);
  $("scrim").addEventListener("click", closeDrawer);
  $("new-chat").addEventListener("click", () => { go(null); openChat(null); });
  $("more-chats").addEventListener("click", () => loadChats(true));
  $("delete-chat").addEventListener("click", async () => {
    if (!state.chatId || !window.confirm("Delete this chat?")) return;
    try { await api("DELETE", `/api/chats/${state.chatId}`); go(null); await loadChats(); }
    catch (error) { toast("Could not delete", error.message, "error"); }
  });
}
