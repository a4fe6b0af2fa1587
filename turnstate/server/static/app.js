// turnstate chat page: plain ES module, no build step, no third-party code.
// Talks to the JSON API (docs/server.md) and streams turns over SSE with fetch.

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "turnstate.token";
const SETTINGS_KEY = "turnstate.settings";

const FALLBACK_WORDS = {
  system_prompt_changed: "the conversation was replayed because the system prompt changed",
  model_changed: "the conversation was replayed because the model changed",
  provider_changed: "the conversation was replayed because the provider changed",
  toolset_changed: "the conversation was replayed because the enabled tools changed",
  cursor_expired: "the conversation was replayed because the provider no longer had it (the cursor expired)",
  cursor_invalid: "the conversation was replayed because the stored cursor was unusable",
  envelope_malformed: "the conversation was replayed because the stored continuation state was unreadable",
};
const ABORT_WORDS = {
  cancelled: "the turn was stopped before it finished",
  provider_failed: "the provider returned an error",
  tool_result_cursor_loss: "the provider lost the conversation while tool results were in flight",
  tool_iteration_limit: "the model kept calling tools past the limit",
  commit_conflict: "the chat changed while the turn ran",
  commit_failed: "the turn could not be saved",
  lease_expired: "the turn ran out of time",
};

const state = { token: null, config: null, chatId: null, next: null, controller: null, busy: false };

// --- small helpers ------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function toast(title, text, kind = "") {
  const node = el("div", { class: `toast ${kind}` }, el("strong", {}, title), text);
  $("toasts").append(node);
  setTimeout(() => node.remove(), 9000);
}

function fmt(n) { return Number(n || 0).toLocaleString("en-US"); }

function fragmentParams() { return new URLSearchParams(location.hash.slice(1)); }

class ApiError extends Error {
  constructor(status, body) {
    super(body.message || body.error || `HTTP ${status}`);
    this.status = status; this.body = body;
  }
}

async function api(method, path, body) {
  const init = { method, headers: { Authorization: `Bearer ${state.token}` } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) { askForToken(); throw new ApiError(401, { error: "unauthorized" }); }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => ({ error: "bad_response" }));
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// --- token --------------------------------------------------------------------------

function askForToken() {
  localStorage.removeItem(TOKEN_KEY);
  $("login").hidden = false;
  $("login-token").focus();
}

function takeToken() {
  const params = fragmentParams();
  const fromUrl = params.get("token");
  if (fromUrl) {
    localStorage.setItem(TOKEN_KEY, fromUrl);
    params.delete("token");
    history.replaceState(null, "", params.toString() ? `#${params}` : location.pathname);
  }
  state.token = localStorage.getItem(TOKEN_KEY);
  return Boolean(state.token);
}

// --- settings and pickers -------------------------------------------------------------

function settings() {
  return {
    provider: $("provider").value,
    model: $("model").value,
    system_prompt: $("system-prompt").value,
    tools: [...document.querySelectorAll("#tools input:checked")].map((box) => box.value),
    compaction: $("compaction").checked,
  };
}

function saveSettings() {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings()));
  const s = settings();
  const tools = s.tools.length ? ` · tools: ${s.tools.join(", ")}` : "";
  $("settings-summary").textContent = `${s.provider} / ${s.model}${tools}`;
}

function fillModels(selected) {
  const provider = state.config.providers.find((p) => p.name === $("provider").value);
  $("model").replaceChildren(...provider.models.map((m) =>
    el("option", { value: m.name }, `${m.name} (${fmt(m.contextLimit)} tokens)`)));
  if (selected && provider.models.some((m) => m.name === selected)) $("model").value = selected;
}

function setupPickers() {
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(SETTINGS_KEY) || "{}"); } catch { saved = {}; }
  const { providers, tools } = state.config;
  $("provider").replaceChildren(...providers.map((p) =>
    el("option", { value: p.name }, p.durable ? `${p.name} (durable cursor)` : p.name)));
  if (providers.some((p) => p.name === saved.provider)) $("provider").value = saved.provider;
  fillModels(saved.model);
  $("system-prompt").value = saved.system_prompt || "";
  $("compaction").checked = saved.compaction !== false;
  $("tools").replaceChildren(...tools.map((t) => el("label", { class: "check", title: t.description },
    el("input", { type: "checkbox", value: t.name, checked: (saved.tools || []).includes(t.name) }),
    ` ${t.name}`)));
  $("emulator-controls").hidden = !state.config.emulated;
  for (const id of ["provider", "model", "system-prompt", "compaction"]) {
    $(id).addEventListener("change", () => { if (id === "provider") fillModels(); saveSettings(); });
  }
  $("tools").addEventListener("change", saveSettings);
  saveSettings();
}

// --- chat list ----------------------------------------------------------------------

async function loadChats(append = false) {
  const query = append && state.next ? `?after=${encodeURIComponent(state.next)}` : "";
  const page = await api("GET", `/api/chats${query}`);
  const items = page.chats.map((chat) => el("button", {
    class: `chat-item${chat.id === state.chatId ? " active" : ""}`, type: "button",
    "data-chat": chat.id, onclick: () => go(chat.id),
  }, chat.title, el("small", {}, new Date(chat.updatedAt).toLocaleString())));
  if (append) $("chat-list").append(...items); else $("chat-list").replaceChildren(...items);
  state.next = page.next;
  $("more-chats").hidden = !page.next;
}

function go(chatId) {
  location.hash = chatId ? `chat=${encodeURIComponent(chatId)}` : "";
}

// --- rendering a chat ---------------------------------------------------------------

function renderMeter(context) {
  const meter = $("meter");
  if (!context) {
    meter.dataset.severity = "none";
    $("meter-fill").style.width = "0";
    $("meter-label").textContent = "context: no turn yet";
    return;
  }
  const ratio = context.estimatedUsageRatio;
  meter.dataset.severity = context.severity;
  meter.dataset.ratio = ratio.toFixed(4);
  $("meter-fill").style.width = `${Math.min(100, ratio * 100).toFixed(1)}%`;
  $("meter-label").textContent = `context ${Math.round(ratio * 100)}% · ` +
    `${fmt(context.estimatedInputTokens)} / ${fmt(context.contextLimit)} tokens · ` +
    `${context.severity} · ${context.source === "provider" ? "reported by provider" : "estimated"}`;
}

function renderContinuation(cont) {
  const node = $("continuation");
  if (!cont) { node.textContent = "no stored cursor"; return; }
  if (cont.malformed) { node.textContent = "stored state unreadable"; return; }
  const age = cont.ageSeconds === null ? "" : ` · ${cont.ageSeconds}s old`;
  node.textContent = `cursor: ${cont.provider} ${cont.mode} ${cont.model}${age}`;
}

function toolBlock(call, result) {
  const failed = result && result.isError;
  return el("details", { class: `tool${failed ? " error" : ""}`, "data-tool": call.name },
    el("summary", {}, `🔧 ${call.name}(${call.arguments})${result ? "" : " …"}`),
    el("pre", { class: "tool-result" }, result ? result.output : "running…"));
}

function partsView(parts) {
  const nodes = [];
  const results = new Map(parts.filter((p) => p.type === "tool_result").map((p) => [p.callId, p]));
  for (const part of parts) {
    if (part.type === "text") nodes.push(el("span", { class: "text" }, part.text));
    else if (part.type === "reasoning" && part.text) {
      nodes.push(el("details", { class: "reasoning" }, el("summary", {}, "reasoning"), part.text));
    } else if (part.type === "tool_call") nodes.push(toolBlock(part, results.get(part.callId)));
  }
  return nodes;
}

function auditChips(turn) {
  const chips = [];
  if (turn.strategy) chips.push(el("span", { class: `chip strategy-${turn.strategy}` }, turn.strategy));
  if (turn.path && turn.path.length) chips.push(el("span", { class: "chip path" }, turn.path.join(" → ")));
  if (turn.degradation) chips.push(el("span", { class: "chip degraded" }, `degraded: ${turn.degradation}`));
  chips.push(el("span", { class: "chip" }, `${turn.provider} / ${turn.model}`));
  if (turn.cacheHitTokens) chips.push(el("span", { class: "chip" }, `cache hits ${fmt(turn.cacheHitTokens)} tokens`));
  if (turn.requests !== null && turn.requests !== undefined) {
    chips.push(el("span", { class: "chip bytes" }, `${fmt(turn.requestBytes)} bytes in ${turn.requests} request(s)`));
  }
  return el("div", { class: "audit" }, chips);
}

function abortView(reason, detail, retryText) {
  const words = ABORT_WORDS[reason] || reason;
  return el("div", { class: "abort" },
    el("span", { class: "abort-reason" }, `Aborted: ${words}${detail && reason !== "cancelled" ? ` (${detail})` : ""}`),
    retryText === null ? null : el("button", { class: "ghost retry", type: "button",
      onclick: () => sendTurn(retryText) }, "Retry"));
}

function userView(message) {
  const text = message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
  const node = el("div", { class: "msg user", "data-seq": message.seq }, el("span", { class: "text" }, text));
  const edit = () => {
    const box = el("textarea", { rows: 3 });
    box.value = text;
    node.replaceChildren(box, el("div", { class: "actions" },
      el("button", { class: "ghost", type: "button", onclick: () => openChat(state.chatId) }, "Cancel"),
      el("button", { class: "primary save", type: "button", onclick: () => editMessage(message.seq, box.value) }, "Save")));
    box.focus();
  };
  node.append(el("div", { class: "actions" },
    el("button", { class: "link edit", type: "button", onclick: edit }, "Edit"),
    el("button", { class: "link delete", type: "button", onclick: () => deleteFrom(message.seq) }, "Delete from here")));
  return node;
}

function assistantView(message, userText) {
  const aborted = message.status === "aborted";
  const node = el("div", { class: `msg assistant${aborted ? " aborted" : ""}`, "data-seq": message.seq },
    partsView(message.parts));
  const turn = message.turn;
  if (turn) {
    node.append(auditChips(turn));
    if (aborted) node.append(abortView(turn.reason, turn.detail, userText));
  }
  return node;
}

function renderChat(chat) {
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

async function openChat(chatId) {
  state.chatId = chatId;
  for (const item of document.querySelectorAll(".chat-item")) {
    item.classList.toggle("active", item.dataset.chat === chatId);
  }
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

// --- edits ----------------------------------------------------------------------------

async function editMessage(seq, text) {
  try {
    renderChat(await api("PATCH", `/api/chats/${state.chatId}/messages/${seq}`, { text }));
    toast("Message edited", "The stored cursor was cleared: the next turn replays the history.", "ok");
  } catch (error) { toast("Could not edit", error.message, "error"); }
}

async function deleteFrom(seq) {
  if (!window.confirm("Delete this message and everything after it?")) return;
  try {
    const result = await api("DELETE", `/api/chats/${state.chatId}/messages/${seq}`);
    renderChat(result);
    toast("Deleted", `${result.deleted} message(s) removed; the next turn replays the history.`, "ok");
  } catch (error) { toast("Could not delete", error.message, "error"); }
}

// --- a streamed turn ------------------------------------------------------------------

async function* sseEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length) yield { name, data: JSON.parse(data.join("\n")) };
    }
  }
}

class LiveTurn {
  constructor(text) {
    $("welcome").hidden = true;
    this.user = el("div", { class: "msg user" }, el("span", { class: "text" }, text));
    this.text = el("span", { class: "text cursor-blink" });
    this.node = el("div", { class: "msg assistant streaming" }, this.text);
    this.calls = new Map();
    this.path = [];
    $("messages").append(this.user, this.node);
  }
  scroll() { $("messages").scrollTop = $("messages").scrollHeight; }
  handle({ name, data }) {
    if (name === "text_delta") this.text.append(data.text);
    else if (name === "reasoning_delta") this.reasoning(data.text);
    else if (name === "tool_call") this.toolCall(data);
    else if (name === "tool_result") this.toolResult(data);
    else if (name === "fallback_notice") {
      toast("Conversation replayed", FALLBACK_WORDS[data.reason] || data.message);
    } else if (name === "context_snapshot") renderMeter(data.snapshot);
    else if (name === "turn_completed" || name === "turn_aborted") this.finish(name, data);
    this.scroll();
  }
  reasoning(text) {
    if (!this.thinking) {
      this.thinking = el("details", { class: "reasoning", open: true }, el("summary", {}, "reasoning"));
      this.node.prepend(this.thinking);
    }
    this.thinking.append(text);
  }
  toolCall(call) {
    const block = toolBlock(call, null);
    this.calls.set(call.callId, block);
    this.text.before(block);
    this.text = el("span", { class: "text cursor-blink" });
    block.after(this.text);
  }
  toolResult(result) {
    const block = this.calls.get(result.callId);
    if (!block) return;
    block.querySelector("summary").textContent = block.querySelector("summary").textContent.replace(/ …$/, "");
    block.querySelector(".tool-result").textContent = result.output;
    block.classList.toggle("error", result.isError);
  }
  finish(name, data) {
    this.node.querySelectorAll(".cursor-blink").forEach((n) => n.classList.remove("cursor-blink"));
    this.node.classList.remove("streaming");
    this.done = name;
  }
}

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

async function sendTurn(text) {
  if (state.busy || !text.trim()) return;
  setBusy(true);
  const live = new LiveTurn(text);
  state.controller = new AbortController();
  try {
    const chatId = await ensureChat();
    const response = await fetch(`/api/chats/${encodeURIComponent(chatId)}/turns`, {
      method: "POST", signal: state.controller.signal,
      headers: { Authorization: `Bearer ${state.token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ ...settings(), text }),
    });
    if (!response.ok) {
      if (!$("text").value) $("text").value = text;  // a refused turn keeps what was typed
      if (response.status === 401) { askForToken(); return; }
      const body = await response.json().catch(() => ({}));
      const why = body.error === "chat_busy" ? "Another turn is still running in this chat."
        : `${body.message || body.error}${body.field ? ` (${body.field})` : ""}`;
      toast("Turn refused", why, "error");
    } else {
      for await (const event of sseEvents(response)) live.handle(event);
    }
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

// --- wiring ---------------------------------------------------------------------------

async function emulatorControl(path, body, done) {
  try {
    await api("POST", path, body);
    toast("Emulator", done, "ok");
  } catch (error) { toast("Emulator", error.message, "error"); }
}

function wire() {
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
  $("new-chat").addEventListener("click", () => { go(null); openChat(null); });
  $("more-chats").addEventListener("click", () => loadChats(true));
  $("delete-chat").addEventListener("click", async () => {
    if (!state.chatId || !window.confirm("Delete this chat?")) return;
    try { await api("DELETE", `/api/chats/${state.chatId}`); go(null); await loadChats(); }
    catch (error) { toast("Could not delete", error.message, "error"); }
  });
  $("expire-cursor").addEventListener("click", () => state.chatId && emulatorControl(
    "/api/emulator/expire-cursor", { chat_id: state.chatId }, "The provider forgot this chat's cursor."));
  $("fail-next").addEventListener("click", () => emulatorControl(
    "/api/emulator/faults", { provider: $("provider").value, kind: "error" },
    `The next ${$("provider").value} request will fail.`));
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    localStorage.setItem(TOKEN_KEY, $("login-token").value.trim());
    location.reload();
  });
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
