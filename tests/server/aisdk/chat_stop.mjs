// A useChat front end's Stop, as docs/server.md's example wires it, through the AI SDK's
// own AbstractChat (what useChat wraps) and DefaultChatTransport: send a question whose
// answer hangs at the emulator, Stop it once text arrived by POSTing the turn's stop route
// (the streaming message's id is the turn id), then send the next question.
// Prints {stopped: {status, error, message}, next: {status, error, message}} as JSON.
//
// node chat_stop.mjs BASE_URL TOKEN CHAT_ID
import { AbstractChat, DefaultChatTransport } from "ai";

const [base, token, chatId] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };

class State {  // the state a framework binding (React, Vue, Svelte) keeps
  constructor() { this.messages = []; this.status = "ready"; this.error = undefined; }
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot = (value) => structuredClone(value);
}

const chat = new (class extends AbstractChat {})({
  id: chatId,
  state: new State(),
  transport: new DefaultChatTransport({
    api: `${base}/api/ui-messages`, headers, body: { provider: "openai", model: "gpt-4o" },
  }),
});
const seen = () => ({ status: chat.status, error: chat.error ? chat.error.message : null,
  message: chat.lastMessage });

const asked = chat.sendMessage({ text: "Tell me a long story" });
const answering = () => chat.status === "streaming" && chat.lastMessage.role === "assistant"
  && chat.lastMessage.parts.some((p) => p.type === "text" && p.text);
while (!answering()) await new Promise((resolve) => { setTimeout(resolve, 20); });
const turnId = chat.lastMessage.id;
const stop = await fetch(`${base}/api/chats/${chatId}/turns/${turnId}/stop`,
  { method: "POST", headers });
if (stop.status !== 202) throw new Error(`stop: HTTP ${stop.status}`);
await asked;
const stopped = seen();
await chat.sendMessage({ text: "And the next one" });
process.stdout.write(JSON.stringify({ stopped, next: seen() }));
