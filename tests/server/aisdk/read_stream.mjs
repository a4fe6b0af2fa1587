// Drives turnstate's /api/ui-messages through the AI SDK's own client code: the
// DefaultChatTransport a useChat front end uses sends the request and parses the SSE
// body (validating every chunk against the SDK's schema); readUIMessageStream builds
// the UI message from the chunks. Prints {message, chunks, errors} as JSON. The user
// message gets a fresh id, as useChat gives each (the server keys its turn by it).
//
// node read_stream.mjs BASE_URL TOKEN CHAT_ID TEXT BODY_JSON [FILES_JSON]
// FILES_JSON: FileUIParts ({type: "file", mediaType, filename, url}) the user message
// carries, as useChat's sendMessage({text, files}) puts them: the files, then the text.
// TEXT "--reconnect": resume the chat's running turn with reconnectToStream instead
// (prints "connected" on stderr once the stream is open; {message: null} on a 204).
import { DefaultChatTransport, generateId, readUIMessageStream, validateUIMessages } from "ai";

const [base, token, chatId, text, bodyJson, filesJson = "[]"] = process.argv.slice(2);
const transport = new DefaultChatTransport({
  api: `${base}/api/ui-messages`,
  headers: { Authorization: `Bearer ${token}` },
  body: JSON.parse(bodyJson),
});
const errors = [];
const chunks = [];
const stream = text === "--reconnect"
  ? await transport.reconnectToStream({ chatId })
  : await transport.sendMessages({
    chatId,
    trigger: "submit-message",
    messageId: undefined,
    // validated as useChat's messages are (a FileUIPart the SDK's schema refuses fails)
    messages: await validateUIMessages({ messages: [{ id: generateId(), role: "user",
      parts: [...JSON.parse(filesJson), { type: "text", text }] }] }),
    abortSignal: undefined,
  });
if (stream === null) {
  process.stdout.write(JSON.stringify({ message: null, chunks: [], errors }));
  process.exit(0);
}
process.stderr.write("connected\n");
const [forReader, forLog] = stream.tee();
const logged = (async () => {
  for await (const chunk of forLog) chunks.push(chunk);
})();
let message = null;
for await (const snapshot of readUIMessageStream({
  stream: forReader, onError: (error) => errors.push(String(error.message || error)),
})) message = snapshot;
await logged;
process.stdout.write(JSON.stringify({ message, chunks, errors }));
