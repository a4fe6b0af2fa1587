// Images and PDFs sent with a message: picked with Attach, pasted into the message or dropped on
// the composer; shown as thumbnails (blob: URLs, as the page's policy allows) until sent,
// then sent as content parts (base64). Stored images come back by their `src`, fetched
// with the token.

import { authHeaders } from "./api.js";
import { $, el, fmt } from "./dom.js";
import { state } from "./state.js";
import { toast } from "./toasts.js";

const TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"];
const MIB = 1024 * 1024;
const BASE64_ROOM = 64 * 1024;  // the turn body's own fields beside the base64

/** The most bytes of images and PDFs one message carries: the engine's inline bound,
 *  and what the turn's body (base64: 4 bytes per 3) leaves room for. */
function maxBytes() {
  const limits = (state.config && state.config.limits) || {};
  const inline = limits.maxInlineBytes || 20 * MIB;
  const body = limits.maxContentBytes ? Math.floor((limits.maxContentBytes - BASE64_ROOM) * 3 / 4) : inline;
  return Math.max(0, Math.min(inline, body));
}

let pending = [];  // {file, url, filename?}, or {part, name}: a stored linked image or file

/** The media type ``file``'s bytes start like (as the server reads them, ``sniffed_type``),
 *  or null: a name or a declared type can lie (a JPEG saved as .png, a text file renamed). */
async function sniffedType(file) {
  const head = new Uint8Array(await file.slice(0, 1024).arrayBuffer());
  const ascii = (from, to) => String.fromCharCode(...head.subarray(from, to));
  const starts = (...bytes) => bytes.every((b, i) => head[i] === b);
  if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WEBP") return "image/webp";
  if (starts(0x89, 0x50, 0x4e, 0x47)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  if (["GIF87a", "GIF89a"].includes(ascii(0, 6))) return "image/gif";
  // A PDF's header may follow a BOM or a mail header: readers look in its first 1,024 bytes.
  if (ascii(0, head.length).includes("%PDF-") || ascii(0, 4) === "%PDF") return "application/pdf";
  return null;
}

/** The file's type: a PDF some systems hand over without one is still a PDF. */
function typeOf(file) {
  return !file.type && /\.pdf$/i.test(file.name) ? "application/pdf" : file.type;
}

/** Why ``file`` is not attached, or null; the file as it is sent (with its bytes' type). */
async function checked(file, total) {
  const type = typeOf(file);
  if (!TYPES.includes(type)) return [`${file.name}: only PNG, JPEG, GIF or WebP images, or PDF documents`, null];
  if (file.size === 0) return [`${file.name} is empty`, null];
  if (total > maxBytes()) return [`${file.name} (${mib(file.size)}): a message carries at most ${limitWords(maxBytes())} of images and PDFs${total > file.size ? `, and ${mib(total - file.size)} are attached already` : ""}`, null];
  const found = await sniffedType(file);
  if (!found) return [`${file.name} is no PNG, JPEG, GIF or WebP image and no PDF (its contents are none of these)`, null];
  return [null, found === file.type ? file : new File([file], file.name, { type: found })];
}

let adding = Promise.resolve();  // one batch at a time: each counts what the last one took

function add(files) {
  adding = adding.then(() => addNow(files));
}

async function addNow(files) {
  for (const picked of files) {
    const total = pending.reduce((sum, a) => sum + (a.file ? a.file.size : 0), 0) + picked.size;
    const [problem, file] = await checked(picked, total);
    if (problem) toast("Not attached", problem, "error");
    else pending.push({ file, url: URL.createObjectURL(file), filename: file.type === "application/pdf" ? file.name : undefined });
  }
  renderTray();
}

const mib = (bytes) => `${(bytes / MIB).toFixed(1)} MiB`;
const limitWords = (bytes) => `${Number((bytes / MIB).toFixed(1))} MiB`;  // "20 MiB", "0.5 MiB"

function renderTray() {
  $("attachments").replaceChildren(...pending.map((item) => el("span", { class: "attachment" },
    preview(item),
    el("button", { class: "ghost remove", type: "button", "aria-label": `Remove ${nameOf(item)}`,
      onclick: () => {
        pending = pending.filter((a) => a !== item);
        if (item.url) URL.revokeObjectURL(item.url);
        renderTray();
      } },
    "×"))));
  $("attachments").hidden = pending.length === 0;
}

export const hasAttachments = () => pending.length > 0;

/** The attachments, taken off the tray (``restoreAttachments`` puts them back). */
export function takeAttachments() {
  const taken = pending;
  pending = [];
  renderTray();
  return taken;
}

export function restoreAttachments(taken) {
  pending = [...taken, ...pending];
  renderTray();
}

function base64Of(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1]);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

const nameOf = (item) => (item.file ? item.file.name : item.name);

/** An attachment as shown before it is sent: an image's thumbnail, else its name. */
function preview(item) {
  return item.file && item.file.type.startsWith("image/")
    ? el("img", { class: "thumb", src: item.url, alt: item.file.name })
    : el("span", { class: "attached doc", title: nameOf(item) }, nameOf(item));
}

/** The attachments as the turn body's ``content`` parts: picked or stored bytes as
 *  base64 (a stored PDF stays a file, with its filename), a stored link as it was. */
export async function contentParts(taken) {
  return Promise.all(taken.map(async (item) => {
    if (item.part) return item.part;
    const part = { type: item.file.type.startsWith("image/") ? "image" : "file",
      mediaType: item.file.type, data: await base64Of(item.file) };
    return item.filename ? { ...part, filename: item.filename } : part;
  }));
}

export function thumbnails(taken) {
  return taken.map(preview);
}

const fetched = new Map();  // src@createdAt -> blob: URL (a seq is reused after a delete)

function blobUrl(src, key) {
  if (!fetched.has(key)) {
    fetched.set(key, fetch(src, { headers: authHeaders() })
      .then((response) => (response.ok ? response.blob() : Promise.reject(new Error(`HTTP ${response.status}`))))
      .then((blob) => URL.createObjectURL(blob)));
  }
  return fetched.get(key);
}

/** A user message's stored images and files as attachments again (a question asked once
 *  more): inline ones fetched by their ``src``, linked ones as their part. */
export async function attachmentsOf(parts) {
  return Promise.all(parts.map(async (part, index) => {
    const name = part.filename || (part.type === "image" ? `image-${index + 1}` : `document-${index + 1}.pdf`);
    if (!part.src) {
      const again = { type: part.type, url: part.url };
      if (part.mediaType) again.mediaType = part.mediaType;
      if (part.filename) again.filename = part.filename;
      return { part: again, name };
    }
    const response = await fetch(part.src, { headers: authHeaders() });
    if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
    const file = new File([await response.blob()], name, { type: part.mediaType });
    return { file, url: URL.createObjectURL(file), filename: part.filename };
  }));
}

/** A stored image or PDF part of a message (a user's attachment, or an image the model
 *  generated): a thumbnail, a link, or a download. */
export function mediaView(part, message) {
  const key = `${part.src}@${message.createdAt}`;
  if (part.type === "image" && part.src) {
    const what = message.role === "assistant" ? "generated" : "attached";
    const img = el("img", { class: "thumb", alt: `${what} image, ${fmt(part.bytes)} bytes` });
    blobUrl(part.src, key).then((url) => { img.src = url; }, () => { img.alt = "image unavailable"; });
    return img;
  }
  const name = part.filename || (part.type === "image" ? "image" : "document.pdf");
  if (!part.src) {
    return el("a", { class: "attached", href: part.url, target: "_blank", rel: "noopener noreferrer nofollow" }, `${name}: ${part.url}`);
  }
  return el("button", { class: "link attached", type: "button", onclick: () => blobUrl(part.src, key)
    .then((url) => el("a", { href: url, download: name }).click(), () => toast("Could not open", name, "error")) },
  `${name} (${fmt(part.bytes)} bytes)`);
}

export function wireAttachments() {
  $("attach").addEventListener("click", () => $("attach-file").click());
  $("attach-file").addEventListener("change", () => { add([...$("attach-file").files]); $("attach-file").value = ""; });
  $("text").addEventListener("paste", (event) => {
    const files = [...(event.clipboardData ? event.clipboardData.files : [])];
    if (files.length) { event.preventDefault(); add(files); }
  });
  $("composer").addEventListener("dragover", (event) => event.preventDefault());
  $("composer").addEventListener("drop", (event) => {
    const files = [...(event.dataTransfer ? event.dataTransfer.files : [])];
    if (files.length) { event.preventDefault(); add(files); }
  });
}
