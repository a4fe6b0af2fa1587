// The sidebar's chat list and navigation between chats (the URL fragment names the chat).

import { api } from "./api.js";
import { $, cutChars, el } from "./dom.js";
import { state } from "./state.js";
import { toast } from "./toasts.js";

const SEARCH_WAIT_MS = 250;  // typing pauses this long before the list is searched
const MAX_QUERY_CHARS = 200;  // the server's limit, in code points

function chatItem(chat) {
  const when = new Date(chat.updatedAt).toLocaleString();
  return el("button", {
    class: `chat-item${chat.id === state.chatId ? " active" : ""}`, type: "button",
    "data-chat": chat.id, onclick: () => go(chat.id), title: chat.title,
    "aria-current": chat.id === state.chatId ? "page" : null,
  }, chat.busy ? el("span", { class: "running", title: "A turn is running" }, "●") : null,
  el("span", { class: "title", dir: "auto" }, chat.title), el("small", {}, when));
}

const MAX_PAGE = 100;  // the most chats the API gives a page
const FIRST_PAGE = 20;  // the server's default page

async function chatPage(after, wanted = 0) {
  const params = new URLSearchParams();
  if (state.query) params.set("q", state.query);
  if (after) params.set("after", after);
  if (wanted) params.set("limit", String(Math.min(MAX_PAGE, wanted)));
  const query = params.toString();
  return api("GET", `/api/chats${query ? `?${query}` : ""}`);
}

/** The chat list: its first page (``more``: the next page, appended). ``keep``: as many
 *  chats as are shown now and the list's scroll position, as after a turn (the first
 *  page alone put a user scrolled deep into the list back at its top). */
export async function loadChats(more = false, { keep = false } = {}) {
  const list = $("chat-list");
  if (more && !state.next) return;
  // one more than shown: a chat made by this turn comes in at the top
  const wanted = keep ? Math.max(FIRST_PAGE, list.querySelectorAll(".chat-item").length + 1) : 0;
  const query = state.query;
  const pages = [await chatPage(more ? state.next : null, wanted)];
  const count = () => pages.reduce((n, page) => n + page.chats.length, 0);
  while (wanted > count() && pages.at(-1).next) {
    pages.push(await chatPage(pages.at(-1).next, wanted - count()));
  }
  if (query !== state.query) return;  // a newer search is on its way
  const items = pages.flatMap((page) => page.chats.map(chatItem));
  const scrolled = list.scrollTop;
  if (more) list.append(...items); else list.replaceChildren(...items);
  if (keep) list.scrollTop = scrolled;
  state.next = pages.at(-1).next;
  $("more-chats").hidden = !state.next;
  $("no-chats").hidden = Boolean(list.childElementCount) || !state.query;
}

/** The list shown again as it stands (after a turn, an edit): see ``loadChats``. */
export const refreshChats = () => loadChats(false, { keep: true });

function wireSearch() {
  let timer = 0;
  $("chat-search").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      state.query = cutChars($("chat-search").value.trim(), MAX_QUERY_CHARS);
      loadChats().catch((error) => toast("Could not search", error.message, "error"));
    }, SEARCH_WAIT_MS);
  });
}

/** A chat's new title in the list, where it stands (a rename does not move it). */
export function retitle(chatId, title) {
  for (const item of document.querySelectorAll(".chat-item")) {
    if (item.dataset.chat !== chatId) continue;
    item.querySelector(".title").textContent = title;
    item.title = title;
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
    if (item.dataset.chat === chatId) item.setAttribute("aria-current", "page");
    else item.removeAttribute("aria-current");
  }
}

export function wireChatList(openChat) {
  $("menu").addEventListener("click", toggleDrawer);
  $("scrim").addEventListener("click", closeDrawer);
  $("new-chat").addEventListener("click", () => { go(null); openChat(null); });
  $("more-chats").addEventListener("click", () => loadChats(true));
  wireSearch();
  $("delete-chat").addEventListener("click", async () => {
    if (!state.chatId || !window.confirm("Delete this chat?")) return;
    try { await api("DELETE", `/api/chats/${state.chatId}`); go(null); await refreshChats(); }
    catch (error) { toast("Could not delete", error.message, "error"); }
  });
}
