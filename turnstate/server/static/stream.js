// A streamed turn: the SSE reader over fetch, and the live answer it renders as events
// arrive (text as markdown, re-rendered at most once per frame).

import { $, el } from "./dom.js";
import { appendMarkdown, flushMarkdown, markdownNode } from "./livemd.js";
import { sourcesView, toolBlock } from "./messages.js";
import { renderMeter } from "./meter.js";
import { announce, toast } from "./toasts.js";
import { ABORT_WORDS, FALLBACK_WORDS, FINISH_WORDS, failureWords } from "./words.js";

const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

export async function* sseEvents(response) {
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
      let id = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
        else if (line.startsWith("id: ")) id = line.slice(4);
      }
      if (data.length) yield { name, data: JSON.parse(data.join("\n")), id };
    }
  }
}

const PINNED_PX = 60;  // this close to the bottom, the view still follows the answer

function liveText() {
  const node = markdownNode("");
  node.classList.add("cursor-blink");
  return node;
}

export class LiveTurn {
  /** ``text`` null: a turn resumed after a reload, whose question is already shown. */
  constructor(text) {
    $("welcome").hidden = true;
    this.user = text === null ? null : el("div", { class: "msg user" }, el("span", { class: "text" }, text));
    this.text = liveText();
    // Busy while it streams; a screen reader hears the answer once, at its end
    // (``announce``): the message list is no live region.
    this.node = el("div", { class: "msg assistant streaming", "aria-busy": "true" }, this.text);
    this.calls = new Map();
    this.path = [];
    $("messages").append(...(this.user ? [this.user] : []), this.node);
    // The view follows the answer's end until the user scrolls away from it (to read
    // what came before), and again once they scroll back down.
    this.pinned = true;
    this.onScroll = () => {
      const box = $("messages");
      this.pinned = box.scrollHeight - box.scrollTop - box.clientHeight < PINNED_PX;
    };
    $("messages").addEventListener("scroll", this.onScroll, { passive: true });
  }
  /** Stop pressed: the answer shows it at once, the text so far kept. */
  stopping() {
    if (this.done) return;
    flushMarkdown(this.text);
    this.node.querySelectorAll(".cursor-blink").forEach((n) => n.classList.remove("cursor-blink"));
    this.node.classList.add("stopped");
    if (!this.node.querySelector(".stop-note")) this.node.append(el("div", { class: "abort stop-note" }, "Stopped"));
  }
  /** The answer drawn again from the turn's first event. */
  restart() {
    this.text = liveText();
    this.thinking = null;
    this.calls = new Map();
    this.node.replaceChildren(this.text);
  }
  /** To the answer's end once this frame drew it (markdown renders once per frame),
   *  while the view follows it. */
  scroll() {
    if (this.scrolling) return;
    this.scrolling = requestAnimationFrame(() => {
      this.scrolling = 0;
      if (this.pinned) $("messages").scrollTop = $("messages").scrollHeight;
    });
  }
  handle({ name, data }) {
    if (name === "text_delta") appendMarkdown(this.text, data.text);
    else if (name === "reasoning_delta") this.reasoning(data.text);
    else if (name === "image_output") this.image(data);
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
  /** An image the model generated, shown from its bytes through a blob: URL of one of
   *  the four image types (the stored answer shows it from the media route). */
  image(data) {
    if (!IMAGE_TYPES.has(data.mediaType) || typeof data.data !== "string") return;
    const bytes = Uint8Array.from(atob(data.data), (c) => c.charCodeAt(0));
    const img = el("img", { class: "thumb generated", alt: `generated image, ${bytes.length} bytes`,
      src: URL.createObjectURL(new Blob([bytes], { type: data.mediaType })) });
    flushMarkdown(this.text);
    this.text.classList.remove("cursor-blink");
    this.text.after(img);
    this.text = liveText();
    img.after(this.text);
  }
  toolCall(call) {
    const block = toolBlock(call, null);
    this.calls.set(call.callId, block);
    flushMarkdown(this.text);
    this.text.classList.remove("cursor-blink");
    this.text.after(block);
    this.text = liveText();
    block.after(this.text);
  }
  toolResult(result) {
    const block = this.calls.get(result.callId);
    if (!block) return;
    const call = block.querySelector("summary .call");
    call.textContent = call.textContent.replace(/ …$/, "");
    block.querySelector(".tool-result").textContent = result.output;
    block.classList.toggle("error", result.isError);
  }
  finish(name, data) {
    if (FINISH_WORDS[data.finishReason]) toast("Answer ended early", FINISH_WORDS[data.finishReason]);
    if (data.failure) toast("Provider failed", failureWords(data.failure), "error");
    flushMarkdown(this.text);
    this.node.querySelectorAll(".cursor-blink").forEach((n) => n.classList.remove("cursor-blink"));
    this.node.classList.remove("streaming");
    this.node.removeAttribute("aria-busy");
    $("messages").removeEventListener("scroll", this.onScroll);
    // Shown now: the stored answer may come only once the server answers again (a restart).
    const sources = name === "turn_completed" ? sourcesView(data.citations) : null;
    if (sources) this.node.append(sources);
    const aborted = name === "turn_aborted" && data.reason !== "stopped"
      ? `Aborted: ${ABORT_WORDS[data.reason] || data.reason}` : "";
    if (aborted) this.node.append(el("div", { class: "abort" }, aborted));
    const said = this.node.querySelectorAll(".md");
    announce([name === "turn_completed" ? "Answer:" : aborted ? "Answer failed:" : "Answer stopped:",
              ...[...said].map((n) => n.textContent), aborted].join(" "));
    this.done = name;
  }
}
