// Turns that outlive their connection: follow a turn's stream (remembering the last
// event id), resume a running turn after a reload or in another tab, and Stop, which the
// server records and the node running the turn acts on, wherever it runs.

import { authHeaders } from "./api.js";
import { loadChats } from "./chatlist.js";
import { openChat } from "./chatview.js";
import { setBusy } from "./composer.js";
import { $ } from "./dom.js";
import { state } from "./state.js";
import { LiveTurn, sseEvents } from "./stream.js";
import { toast } from "./toasts.js";

const turnPath = (chatId, turnId) =>
  `/api/chats/${encodeURIComponent(chatId)}/turns/${encodeURIComponent(turnId)}`;

/** Render ``response``'s events into ``live``; a dropped connection resumes once from the
 *  last id seen (the turn itself runs on at the server). */
export async function follow(response, live, chatId) {
  state.live = live;
  state.turn = { chatId, turnId: response.headers.get("X-Turn-Id"), last: "0" };
  if (state.stopAsked) stopTurn();  // Stop was pressed before the turn had an id
  for (let attempt = 0; ; attempt += 1) {
    try {
      for await (const event of sseEvents(response)) {
        if (event.id) state.turn.last = event.id;
        handle(live, event);
      }
      return;
    } catch (error) {
      if (error.name === "AbortError" || attempt > 0 || !state.turn.turnId || live.done) throw error;
      response = await fetch(`${turnPath(chatId, state.turn.turnId)}/events`, {
        signal: state.controller ? state.controller.signal : undefined,
        headers: authHeaders({ "Last-Event-ID": state.turn.last }),
      });
      if (!response.ok) throw error;
    }
  }
}

/** One resumed event: a notice (earlier events are gone) is a toast, the rest the answer. */
function handle(live, event) {
  if (event.name === "resume_notice") toast("Part of the answer is gone", event.data.message);
  else live.handle(event);
}

/** A chat whose turn is running (a reload, a second tab): show the answer so far and
 *  continue it live, with a working Stop. */
export async function resumeTurn(chat) {
  if (state.busy) return;
  const pending = [...document.querySelectorAll("#messages .msg.assistant.in-progress")];
  pending.forEach((node) => node.remove());
  setBusy(true);
  const live = new LiveTurn(null);
  state.controller = new AbortController();
  try {
    const response = await fetch(`${turnPath(chat.id, chat.activeTurnId)}/events?after=0`, {
      signal: state.controller.signal, headers: authHeaders(),
    });
    if (response.ok) {
      state.live = live;
      state.turn = { chatId: chat.id, turnId: chat.activeTurnId, last: "0" };
      for await (const event of sseEvents(response)) {
        if (event.id) state.turn.last = event.id;
        handle(live, event);
      }
    }
  } catch (error) {
    if (error.name !== "AbortError") toast("Connection lost", error.message, "error");
  } finally {
    state.controller = null;
    state.live = null;
    setBusy(false);
    if (state.chatId === chat.id) await openChat(chat.id);  // the stored turn replaces it
    await loadChats();
  }
}

/** Stop: shown at once on the answer (the text so far stays), then asked of the server. */
export async function stopTurn() {
  const turn = state.turn;
  if (state.live) state.live.stopping();
  // Before the response named the turn, the stop waits for its id (``follow``): aborting
  // the request would only leave the turn running on the server.
  state.stopAsked = !turn || !turn.turnId;
  if (state.stopAsked) return;
  const response = await fetch(`${turnPath(turn.chatId, turn.turnId)}/stop`, {
    method: "POST", headers: authHeaders(),
  });
  if (response.status === 409) {
    const body = await response.json().catch(() => ({}));
    toast("Already finished", `The turn had already ended (${body.state || "done"}).`);
  } else if (!response.ok) {
    toast("Could not stop", `HTTP ${response.status}`, "error");
  }
  // The answer may come after this turn ended and the next one began: its Stop stays.
  if (state.turn === turn) $("stop").hidden = true;
}
