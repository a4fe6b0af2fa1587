// Turns that outlive their connection: follow a turn's stream (remembering the last
// event id), resume a running turn after a reload or in another tab, and Stop, which the
// server records and the node running the turn acts on, wherever it runs.

import { askForToken, authHeaders } from "./api.js";
import { openChat, reloadView } from "./chatview.js";
import { setBusy } from "./composer.js";
import { $ } from "./dom.js";
import { state } from "./state.js";
import { LiveTurn, sseEvents } from "./stream.js";
import { toast } from "./toasts.js";

const RECONNECT_MS = 60_000;  // a restarting server, a network coming back

const turnPath = (chatId, turnId) =>
  `/api/chats/${encodeURIComponent(chatId)}/turns/${encodeURIComponent(turnId)}`;

/** Render ``response``'s events into ``live``. A stream that breaks, or ends before the
 *  turn's final event (the server restarted, a proxy cut it), resumes from the last id
 *  seen once the server answers again: the turn itself runs on at the server. */
export async function follow(response, live, chatId, turnId = response.headers.get("X-Turn-Id")) {
  const turn = { chatId, turnId, last: "0" };
  state.live = live;
  state.turn = turn;
  if (state.stopAsked) stopTurn();  // Stop was pressed before the turn had an id
  const signal = state.controller ? state.controller.signal : undefined;
  for (let cut = 0; ; cut += 1) {
    try {
      for await (const event of sseEvents(response)) {
        if (event.id) turn.last = event.id;
        handle(live, event);
      }
    } catch (error) {
      if (error.name === "AbortError" || !turn.turnId) throw error;
    }
    if (live.done || !turn.turnId) return;
    if (cut === 0) toast("Connection lost", "Reconnecting to the answer…", "error");
    response = await reconnect(turn, live, signal);
    if (!response) throw new Error("the server did not answer; the answer is kept there, reload to see it");
  }
}

/** The server answered a reconnect but would not stream the turn (429: the owner's
 *  streams are all open; 503): said as a fresh resume's refusal is, and asked again
 *  ``wait`` ms later (``settle``), not reported as a server that never answered. */
class StreamRefused extends Error {
  constructor(wait) { super("the server refused to stream the answer"); this.name = "StreamRefused"; this.wait = wait; }
}

/** A failure of ``follow``: the ms to wait before the chat is opened again (a refused
 *  reconnect's ``Retry-After``), after saying what happened; 0 for an abort. */
export function followFailed(error) {
  if (error.name === "StreamRefused") return error.wait;
  if (error.name !== "AbortError") toast("Connection lost", error.message, "error");
  return 0;
}

const pause = (ms, signal) => new Promise((resolve, reject) => {
  const timer = setTimeout(resolve, ms);
  if (signal) signal.addEventListener("abort", () => { clearTimeout(timer); reject(signal.reason); }, { once: true });
});

/** ``turn``'s stream after its last id seen, tried until the server answers (a restart
 *  takes seconds) for at most RECONNECT_MS; null when the turn is gone or it never does.
 *  A log that lost the tail this page saw (its node died before writing it: 400) is
 *  followed from its start, the live answer drawn again from it. */
async function reconnect(turn, live, signal) {
  const until = Date.now() + RECONNECT_MS;
  for (let attempt = 0; Date.now() < until; attempt += 1) {
    await pause(Math.min(5000, attempt && 250 * 2 ** attempt), signal);
    try {
      const response = await fetch(`${turnPath(turn.chatId, turn.turnId)}/events`, {
        signal, headers: authHeaders({ "Last-Event-ID": turn.last }),
      });
      if (response.ok) {
        if (turn.last === "0") live.restart();
        return response;
      }
      if (response.status === 400 && turn.last !== "0") turn.last = "0";
      else if (response.status === 429 || response.status === 503) {
        throw new StreamRefused(await resumeRefused(response));
      } else if (response.status < 500) return null;  // the turn is gone (404), the token refused
    } catch (error) {
      if (error.name === "AbortError" || error.name === "StreamRefused") throw error;
    }
  }
  return null;
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
  let wait = 0;
  try {
    const response = await fetch(`${turnPath(chat.id, chat.activeTurnId)}/events?after=0`, {
      signal: state.controller.signal, headers: authHeaders(),
    });
    if (response.ok) await follow(response, live, chat.id, chat.activeTurnId);
    else wait = await resumeRefused(response);
  } catch (error) {
    wait = followFailed(error);
  } finally {
    state.controller = null;
    state.live = null;
    await settle(chat.id, wait);  // the stored turn replaces it
  }
}

const RETRY_RESUME_MS = [2000, 10_000];  // the default and the longest wait

/** The server would not stream the running turn: said (but for a turn that just ended,
 *  404, or a token refused), and the milliseconds to wait before asking again; asking at
 *  once looped (the chat re-read still names the turn), a hundred requests a second. */
async function resumeRefused(response) {
  if (response.status === 401) { askForToken(); return 0; }
  if (response.status !== 404) {
    const body = await response.json().catch(() => ({}));
    toast("Cannot show the running answer", body.message || `HTTP ${response.status}`, "error");
  }
  const after = Number(response.headers.get("Retry-After")) * 1000;
  return Math.min(RETRY_RESUME_MS[1], after > 0 ? after : RETRY_RESUME_MS[0]);
}

/** A turn's end on the page: the chat it ran in re-read if still shown (busy until it is,
 *  so Send comes back with the stored answer), then a turn running there (another tab's,
 *  one that refused this page's question) followed, as after a reload; ``wait`` ms later
 *  when the server just refused to stream it. */
export async function settle(chatId, wait = 0) {
  let shown = null;
  try {
    shown = await reloadView(chatId);
  } finally {
    setBusy(false);
  }
  if (!shown || !shown.activeTurnId || state.chatId !== shown.id) return;
  if (!wait) { resumeTurn(shown); return; }
  setTimeout(() => { if (state.chatId === shown.id && !state.busy) openChat(shown.id); }, wait);
}

/** Stop: shown at once on the answer (the text so far stays), then asked of the server. */
export async function stopTurn() {
  const turn = state.turn;
  if (state.live) state.live.stopping();
  // Before the response named the turn, the stop waits for its id (``follow``): aborting
  // the request would only leave the turn running on the server.
  state.stopAsked = !turn || !turn.turnId;
  if (state.stopAsked) return;
  let response;
  try {
    response = await fetch(`${turnPath(turn.chatId, turn.turnId)}/stop`, {
      method: "POST", headers: authHeaders(),
    });
  } catch (error) {
    toast("Could not stop", `${error.message}; the server did not answer`, "error");
    return;
  }
  if (response.status === 409) {
    const body = await response.json().catch(() => ({}));
    toast("Already finished", `The turn had already ended (${body.state || "done"}).`);
  } else if (!response.ok) {
    toast("Could not stop", `HTTP ${response.status}`, "error");
  }
  // The answer may come after this turn ended and the next one began: its Stop stays.
  if (state.turn === turn) $("stop").hidden = true;
}
